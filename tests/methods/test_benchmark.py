"""The judge benchmarks' counting (pipeline.methods.quality.benchmark) against the released code's rules, restated
here as released: JudgeBench's ``utils/metrics.py: compute_final_metrics`` (reverse_order) and LLMBar's
``LLMEvaluator/evaluate.py`` statistics, on verdicts drawn by hypothesis (ties, missing verdicts and one-sided
judges included)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.methods.quality.benchmark import benchmark_scores, pair_right, votes

# --- the released rules, as written upstream ------------------------------------------------------------------


def flip_judgment(decision):
    """ScalerLab/JudgeBench utils/metrics.py."""
    if decision == "A>B":
        decision = "B>A"
    elif decision == "B>A":
        decision = "A>B"
    return decision


def judgebench_accuracy(pairs):
    """ScalerLab/JudgeBench utils/metrics.py: compute_final_metrics(pairs, reverse_order=True)."""
    n_pairs = len(pairs)
    n_correct = 0
    for pair in pairs:
        label = pair["label"]
        judgment1, judgment2 = pair["judgments"]
        decision1 = judgment1["decision"] if judgment1 is not None else None
        decision2 = flip_judgment(judgment2["decision"] if judgment2 is not None else None)
        counter = 0
        for decision in [decision1, decision2]:
            if decision == label:
                counter += 1
            elif decision == flip_judgment(label):
                counter -= 1
        if counter > 0:
            n_correct += 1
    return 100 * n_correct / n_pairs


def llmbar_statistics(dataset):
    """princeton-nlp/LLMBar LLMEvaluator/evaluate.py: the counts of its statistics.json."""
    correct_False, correct_True, correct_both, equal = 0, 0, 0, 0
    for instance in dataset:
        label = str(instance["label"])
        output_False = instance["results"][-1]["swap = False"]["winner"]
        output_True = instance["results"][-1]["swap = True"]["winner"]
        correct_False += output_False == label
        correct_True += output_True == label
        correct_both += (output_False == label) and (output_True == label)
        equal += output_True == output_False
    n = len(dataset)
    return {
        "correct_False": correct_False / n * 100,
        "correct_True": correct_True / n * 100,
        "correct_average": (correct_False + correct_True) / 2 / n * 100,
        "correct_both": correct_both / n * 100,
        "equal": equal / n * 100,
    }


# --- verdicts as p(slot A wins) -------------------------------------------------------------------------------

P_OF = {"A>B": 0.75, "B>A": 0.25, "A=B": 0.5, None: 0.5}

decisions = st.sampled_from(["A>B", "B>A", "A=B", None])


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(st.sampled_from(["A>B", "B>A"]), decisions, decisions, st.booleans()),
        min_size=1,
        max_size=60,
    )
)
def test_judgebench_accuracy_is_the_released_count(rows):
    """Each pair's two decisions as the product reads them (p(slot A wins) in each ordering, the right response
    where the label says) give the released accuracy; a judgment that is missing votes as none."""
    pairs, p_ab, p_ba, right_a = [], [], [], []
    for label, d1, d2, missing in rows:
        second = None if missing else {"decision": d2}
        pairs.append({"label": label, "judgments": [{"decision": d1}, second]})
        p_ab.append(P_OF[d1])
        p_ba.append(np.nan if missing else P_OF[d2])
        right_a.append(label == "A>B")
    a = np.array(right_a)
    # ordering AB shows A in slot A; BA shows B there
    v_ab, v_ba = votes(np.array(p_ab), a), votes(np.array(p_ba), ~a)
    ours = 100 * pair_right(v_ab, v_ba).mean()
    assert abs(ours - judgebench_accuracy(pairs)) < 1e-9


winners = st.sampled_from(["1", "2", None])


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from([1, 2]), winners, winners), min_size=1, max_size=60))
def test_llmbar_statistics_are_the_released_counts(rows):
    """LLMBar's winners (in the outputs' own labels; None: not parsed) as the product reads each ordering give the
    released per-ordering accuracies, their average, both right and the positional agreement (two unparsed verdicts
    agreeing, as the released ``==`` counts them)."""
    dataset, p_first, p_second, first_right = [], [], [], []
    for label, w_false, w_true in rows:
        dataset.append(
            {
                "label": label,
                "results": [{"swap = False": {"winner": w_false}, "swap = True": {"winner": w_true}}],
            }
        )
        # swap = False shows output 1 first: winner "1" is slot A; swap = True shows output 2 first
        p_first.append({"1": 0.75, "2": 0.25, None: 0.5}[w_false])
        p_second.append({"2": 0.75, "1": 0.25, None: 0.5}[w_true])
        first_right.append(label == 1)
    right = np.array(first_right)
    v1, v2 = votes(np.array(p_first), right), votes(np.array(p_second), ~right)
    n = len(rows)
    found = benchmark_scores(v1, v2, np.ones(n, bool), np.ones(n, bool))
    want = llmbar_statistics(dataset)
    assert abs(100 * found.accuracy_first - want["correct_False"]) < 1e-9
    assert abs(100 * found.accuracy_second - want["correct_True"]) < 1e-9
    assert abs(100 * found.accuracy_orderings - want["correct_average"]) < 1e-9
    assert abs(100 * found.both_right - want["correct_both"]) < 1e-9
    assert abs(100 * found.positional_agreement - want["equal"]) < 1e-9


def test_votes_read_a_probability_near_one_half_as_no_preference_and_a_missing_ordering_as_none():
    p = np.array([0.5, 0.5 + 1e-14, 0.75, 0.25, np.nan, 0.5000001])
    right_in_a = np.array([True, True, True, True, True, False])
    assert votes(p, right_in_a).tolist() == [0, 0, 1, -1, 0, -1]


def test_an_ordering_never_judged_is_not_defined_and_the_pair_votes_with_the_other():
    v1, v2 = np.array([1, -1, 1]), np.array([0, 0, 0])
    found = benchmark_scores(v1, v2, np.ones(3, bool), np.zeros(3, bool))
    assert np.isnan(found.accuracy_second) and np.isnan(found.positional_agreement)
    assert found.accuracy == 2 / 3 and found.accuracy_first == 2 / 3 and found.accuracy_orderings == 2 / 3
