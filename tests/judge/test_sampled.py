"""The sampled verdict (judge.endpoint.path=sampled): each sample's first word after the answer prefix, counted into the
requested words' probabilities with half a count each; no engine, no server."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.config.judging import EndpointConfig
from pipeline.contracts.engine import Request
from pipeline.judge.endpoint.sampled import first_word, sampled_logprobs, sampled_request
from pipeline.methods.verdicts.win_probability import p_a_wins, side_logprobs


@pytest.mark.parametrize(
    "text,prefix,word",
    [
        (" A", "Summary", "A"),
        ("Summary B.", "Summary", "B"),
        ("  B, because it is shorter", "Summary", "B"),
        ("**A**", "", "A"),
        ("", "Summary", ""),
        ("Summary", "Summary", ""),
    ],
)
def test_the_first_word_after_the_answer_prefix(text, prefix, word):
    assert first_word(text, prefix) == word


def test_counts_become_probabilities_with_half_a_count_each_and_sides_sum_their_words():
    words = [" A", "A", " B", "B"]  # two tokens per side, one word each
    texts = [" A"] * 6 + [" B"] * 3 + [" maybe"]
    logprobs, unmatched = sampled_logprobs(texts, words, "Summary")
    assert unmatched == 1
    p = np.exp(logprobs)
    n, distinct = 10, 2
    assert p[0] == pytest.approx(p[1]) and p[2] == pytest.approx(p[3])
    assert p[0] + p[1] == pytest.approx((6 + 0.5) / (n + distinct / 2))
    assert p[2] + p[3] == pytest.approx((3 + 0.5) / (n + distinct / 2))
    # the read of P(A wins) is the share of A among the label words' mass
    p_a = p_a_wins(*side_logprobs(np.array([logprobs]), 2))[0]
    assert p_a == pytest.approx(6.5 / 10)
    # no certainty from unanimous samples
    unanimous, _ = sampled_logprobs([" A"] * 10, words, "Summary")
    assert 0.9 < p_a_wins(*side_logprobs(np.array([unanimous]), 2))[0] < 1.0
    assert all(math.isfinite(x) for x in unanimous)


def test_the_request_sent_samples_the_verdict_and_asks_no_logprobs():
    settings = EndpointConfig(samples=12, sample_temperature=0.7, sample_tokens=5)
    sent = sampled_request(Request(token_ids=(1, 2), max_tokens=1), settings)
    assert sent.token_ids == () and sent.n == 12 and sent.temperature == 0.7 and sent.max_tokens == 5
    assert sent.seed is None  # unseeded: vLLM's CPU server fails on seeded samples prefilled in chunks
