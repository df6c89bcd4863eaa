"""``make engine-modes``'s sample (pipeline.run.engine_modes.representative): whole contexts whose prompts'
mean length is nearest the run's, so that the rates recorded are those of the run's prompts, not of its first
article's. Pure on given prompts; then on the product's own prompts of SummEval (its stages up to the judging, no
engine)."""

from __future__ import annotations

import random
import statistics
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.run.engine_modes import main, representative, run_prompts


def blocks(lengths: dict[str, list[int]]) -> tuple[list[str], list[str]]:
    contexts = [c for c, own in lengths.items() for _ in own]
    prompts = [f"{c}:{k}:" + "x" * n for c, own in lengths.items() for k, n in enumerate(own)]
    return contexts, prompts


def test_the_contexts_nearest_the_mean_length_whole_and_in_their_order():
    # prompt lengths (plus the id prefix, 4-5 characters alike): means 10, 50, 28 and 90; all, 44.5
    contexts, prompts = blocks({"a": [10, 10], "b": [40, 60], "c": [28, 28], "d": [90, 90]})
    assert [p.split(":")[0] for p in representative(contexts, prompts, 4)] == ["b", "b", "c", "c"]
    assert [p[:4] for p in representative(contexts, prompts, 3)] == ["b:0:", "b:1:", "c:0:"]
    assert len(representative(contexts, prompts, 100)) == 8 and representative([], [], 5) == []


@given(
    st.lists(st.lists(st.integers(1, 400), min_size=1, max_size=6), min_size=1, max_size=12),
    st.integers(1, 40),
    st.randoms(use_true_random=False),
)
def test_whatever_the_order_of_the_contexts_the_same_sample(lengths, n, rng: random.Random):
    named = {f"c{k}": own for k, own in enumerate(lengths)}
    order = list(named)
    rng.shuffle(order)
    contexts, prompts = blocks(named)
    first = representative(contexts, prompts, n)
    again = representative(*blocks({c: named[c] for c in order}), n)
    mean = sum(map(len, prompts)) / len(prompts)

    def gap(context):
        own = [p for c, p in zip(contexts, prompts, strict=True) if c == context]
        return abs(sum(map(len, own)) / len(own) - mean)

    def gaps(sample):
        return sorted(gap(p.split(":")[0]) for p in sample)

    assert len(first) == len(again) == min(n, sum(map(len, lengths)))
    # each prompt's context as far from the mean (ties may be broken by the order), each context's prompts in order
    assert gaps(first) == gaps(again)
    for sample in (first, again):
        for c in {p.split(":")[0] for p in sample}:
            own = [int(p.split(":")[1]) for p in sample if p.startswith(f"{c}:")]
            assert own == list(range(len(own)))


def test_on_summeval_the_sample_is_as_long_as_the_run_s_prompts(datasets, tmp_path):
    """The first nine articles of SummEval: the first 256 prompts (its first article) are shorter than the run's on
    average; the sample's mean length is nearer theirs, and it is made of whole contexts."""
    from tests.conftest import compose

    cfg = compose(
        [
            "dataset=summeval",
            "dataset.max_contexts=9",
            "dataset.attributes=[coherence]",
            f"dataset.path={datasets / 'summeval' / 'summeval.jsonl'}",
            f"paths.output_root={tmp_path}",
            "tracking.enabled=false",
            "runtime=inprocess",
        ]
    )
    _, _, contexts, prompts = run_prompts(cfg)
    assert len(prompts) == 2160 and len(set(contexts)) == 9

    def mean(sample):
        return sum(map(len, sample)) / len(sample)

    sample = representative(contexts, prompts, 256)
    first = prompts[:256]
    assert abs(mean(sample) - mean(prompts)) < abs(mean(first) - mean(prompts)) / 2
    taken = set(sample)
    chosen = Counter(c for c, p in zip(contexts, prompts, strict=True) if p in taken)
    assert sorted(chosen.values()) == [16, 240]  # the nearest context whole, then the first of the next


@pytest.mark.parametrize("args", [["--passes", "0"], ["--prompts", "0"]])
def test_no_pass_or_no_prompt_is_refused_before_anything_starts(args, capsys):
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2 and "--passes and --prompts must be at least 1" in capsys.readouterr().err


class Drifting:
    """A meter on a host whose speed falls steadily: the k-th pass on the host (whichever meter makes it) runs at
    ``1 - slope * k`` of the meter's own rate."""

    def __init__(self, host: list[int], rate: float, slope: float):
        self.host, self.own, self.slope = host, rate, slope

    def call(self, name: str) -> float:
        assert name == "rate"
        k = self.host[0]
        self.host[0] += 1
        return self.own * (1 - self.slope * k)


@given(
    st.integers(1, 6),
    st.floats(0.5, 2.0),
    st.sampled_from([0.0, 0.001, 0.01, 0.05]),
)
def test_alternated_rounds_cancel_a_steady_drift(half, gain, slope):
    """An even number of rounds, the order reversed every other one: the medians' ratio is the meters' own, whatever
    the drift; one meter's passes after the other's would give the drift to the later one."""
    from pipeline.run.engine_modes import rounds

    host = [0]
    rates = rounds(
        {"eager": Drifting(host, 10.0, slope), "compiled": Drifting(host, 10.0 * gain, slope)}, 2 * half
    )
    assert [len(r) for r in rates.values()] == [2 * half, 2 * half] and host == [4 * half]
    ratio = statistics.median(rates["compiled"]) / statistics.median(rates["eager"])
    assert ratio == pytest.approx(gain, rel=1e-9)
    host = [0]
    apart = {
        m: rounds({m: Drifting(host, r, slope)}, 2 * half)[m]
        for m, r in (("eager", 10.0), ("compiled", 10 * gain))
    }
    late = statistics.median(apart["compiled"]) / statistics.median(apart["eager"])
    assert late < gain if slope else late == pytest.approx(gain)


def test_the_rounds_alternate_their_order():
    from pipeline.run.engine_modes import rounds

    seen: list[str] = []

    class Named:
        def __init__(self, name):
            self.name = name

        def call(self, what):
            seen.append(self.name)
            return 1.0

    rounds({"a": Named("a"), "b": Named("b")}, 3)
    assert seen == ["a", "b", "b", "a", "a", "b"]
