"""The identity of a judged prompt, defined once: its key columns, the modes of the prompt stream, and the stable
hash that seeds per-context randomness.
"""

from __future__ import annotations

import hashlib

# The identity of one judged prompt: mode "compare" for a pair (cand_a in slot A, cand_b in slot B), an absolute
# mode for one candidate (cand_a, with cand_b empty).
PROMPT_KEY = ("context_id", "mode", "attribute", "template_id", "cand_a", "cand_b")


# The mode of comparative prompts in the prompt stream (``PROMPTS.mode``).
COMPARE = "compare"


GENERATE = "generate"


# A judged prompt of a context as CONTEXTS.done holds it (schemas.DONE).
DONE_KEY = ("mode", "attribute", "template_id", "cand_a", "cand_b")

# A row of the judgments table (schemas.JUDGMENTS): one ordering of one pair, by one judge.
JUDGMENT_KEY = ("context_id", "attribute", "template_id", "cand_a", "cand_b", "judge")


def stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
