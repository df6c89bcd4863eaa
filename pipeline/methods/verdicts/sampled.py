"""A verdict sampled, not read: each requested word's probability from how many samples said it.

The verdict is asked ``n`` times (a hosted model that returns no log-probabilities, ``judge.endpoint.path=sampled``; a
recorded verdict is one such sample, :mod:`pipeline.judge.recorded`), and each sample's first word after the answer
prefix is read as one of the requested words (the label words, or an absolute mode's score words). Word ``w`` gets
the empirical probability with half a count added to every word (so that no verdict is certain from a handful of
samples)::

    p(w) = (c(w) + 1/2) / (n + |W| / 2)

where ``c(w)`` counts the samples that said ``w`` and ``W`` is the set of requested words (compared without the
whitespace around them: " A" and "A" are one word). A word requested as several tokens (" A" and "A") shares its
probability evenly among them, so that a side's log-sum-exp is ``log p(w)``. Samples that say none of the words
lower every word's share (the label mass), as the tokens that are not labels do in the log-probability read.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence

_PUNCTUATION = string.punctuation + "“”‘’«»"


def first_word(text: str, prefix: str) -> str:
    """The first word a sample says after the answer prefix (repeated by a model that does not continue it), without
    the punctuation around it: "Summary A." and " A, because" give "A"."""
    text = text.strip()
    head = prefix.strip()
    if head and text.startswith(head):
        text = text[len(head) :].strip()
    for word in text.split():
        word = word.strip(_PUNCTUATION)
        if word:
            return word
    return ""


def sampled_logprobs(texts: Sequence[str], words: Sequence[str], prefix: str) -> tuple[list[float], int]:
    """Each requested word's log-probability from the samples' first words (module docstring), and the number of
    samples that said none of them."""
    stripped = [w.strip() for w in words]
    distinct = list(dict.fromkeys(stripped))
    said = [first_word(t, prefix) for t in texts]
    counts = {w: sum(1 for s in said if s == w) for w in distinct}
    n = len(texts)
    total = n + len(distinct) / 2
    logprobs = [math.log((counts[w] + 0.5) / total / stripped.count(w)) for w in stripped]
    return logprobs, n - sum(counts.values())
