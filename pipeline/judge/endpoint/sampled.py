"""A sampled verdict, for a hosted model that returns no log-probabilities (``judge.endpoint.path=sampled``).

The verdict is asked ``n`` times at a temperature (one request with ``n`` samples; the reply cache keeps the reply,
so that a rerun asks nothing again), and each sample's first word after the answer prefix is read as one of the
requested words: each word's probability is its share of the samples with half a count added to every word
(:mod:`pipeline.methods.verdicts.sampled`, the one definition).

The judge's name carries ``:sampled`` (:func:`pipeline.judge.models.resolve_endpoint`), so every table it
reaches (judgments, comparisons, position bias, scores, correlations, cost, leaderboard, jurors) says that its
probabilities are sampled, not read.
"""

from __future__ import annotations

from dataclasses import replace

from pipeline.config.judging import EndpointConfig
from pipeline.contracts.engine import Request
from pipeline.methods.verdicts.sampled import first_word, sampled_logprobs

__all__ = ["SUFFIX", "first_word", "sampled_logprobs", "sampled_request"]

SUFFIX = ":sampled"


def sampled_request(request: Request, settings: EndpointConfig) -> Request:
    """The request actually sent for a verdict read by sampling: ``samples`` samples of up to ``sample_tokens``
    tokens at ``sample_temperature``, no log-probabilities asked. Unseeded (the read's own seed, none for a
    verdict): hosted servers honour seeds at best loosely, and vLLM's CPU server fails on seeded samples whose
    prompt it prefills in chunks ("CPU Generator does not use offset"); the reply cache keeps what was answered,
    so a rerun asks nothing again."""
    return replace(
        request,
        token_ids=(),
        n=settings.samples,
        temperature=settings.sample_temperature,
        max_tokens=settings.sample_tokens,
    )
