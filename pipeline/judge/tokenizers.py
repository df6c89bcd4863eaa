"""The judge's tokenizer, wherever it can be had.

The pipeline settles prompts with the judge's tokenizer (chat template, label-word token ids, prompt lengths).
For a judge behind an API (``judge.backend=api``) that checkpoint may not be on this machine (a hosted model):

1. the local checkpoint's tokenizer (``judge.model`` names a folder, an alias or a reachable hub id): exact;
2. the server's own tokenizer through vLLM's ``/tokenize`` and ``/detokenize`` (exact token ids and counts, no
   chat template here: the chat endpoint applies the server's);
3. neither (a hosted model): :class:`WordPieces`, which splits text into words and punctuation marks. Token
   counts are then estimates (prompt lengths are checked approximately) and a label word counts as one token
   when it is one such piece; the run checks the label words with a test request at start
   (:func:`pipeline.judge.openai.words.check_words`).

Every object here offers what the pipeline uses of a Hugging Face tokenizer: ``encode``, ``decode``, calling it
on texts, and ``chat_template``; ``exact`` says whether its ids are the model's.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)

# Pieces of text a word-level estimate counts: a word or number with the whitespace before it, or one other mark.
_PIECE = re.compile(r"\s*[^\W_]+|\s*[^\w\s]|\s*_|\s+$", re.UNICODE)
# Ids of pieces up to this many UTF-8 bytes are the bytes themselves (decodable); longer ones are hashed above.
_DIRECT_BYTES = 7
_HASHED = 1 << 62


class WordPieces:
    """A stand-in tokenizer for a model whose tokenizer is nowhere to be had: words (with their leading
    whitespace) and single marks. ``decode`` gives back every piece of up to 7 bytes (label words, scores)."""

    exact = False
    chat_template = None
    source = "estimated (words and marks; no tokenizer)"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self._id(p) for p in _PIECE.findall(text)]

    def __call__(self, texts: str | Sequence[str], add_special_tokens: bool = False) -> dict[str, Any]:
        if isinstance(texts, str):
            return {"input_ids": self.encode(texts)}
        return {"input_ids": [self.encode(t) for t in texts]}

    def decode(self, ids: Sequence[int], **_: Any) -> str:
        out = []
        for i in ids:
            if i >= _HASHED:
                raise ValueError(f"token id {i} stands for a piece longer than {_DIRECT_BYTES} bytes")
            raw = int(i).to_bytes(_DIRECT_BYTES + 1, "big").lstrip(b"\0")
            out.append(raw[1:].decode("utf-8"))  # the leading 0x01 keeps leading NULs apart
        return "".join(out)

    @staticmethod
    def _id(piece: str) -> int:
        raw = piece.encode("utf-8")
        if len(raw) <= _DIRECT_BYTES:
            return int.from_bytes(b"\x01" + raw, "big")
        import hashlib

        return _HASHED + int.from_bytes(hashlib.blake2b(raw, digest_size=7).digest(), "big")


class ServerTokenizer:
    """The tokenizer of the model a vLLM server serves, through its ``/tokenize`` and ``/detokenize``."""

    exact = True
    chat_template = None
    source = "the server's /tokenize"

    def __init__(self, base_url: str, model: str, api_key: Any = None, timeout: float = 60.0):
        import httpx

        root = re.sub(r"/v1/?$", "", base_url.rstrip("/"))
        headers = {"Authorization": f"Bearer {api_key.value}"} if api_key is not None else {}
        self.model = model
        self.client = httpx.Client(base_url=root, headers=headers, timeout=timeout)
        self._memo: dict[tuple[str, bool], list[int]] = {}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        key = (text, add_special_tokens)
        if key not in self._memo:
            reply = self.client.post(
                "/tokenize",
                json={"model": self.model, "prompt": text, "add_special_tokens": add_special_tokens},
            )
            reply.raise_for_status()
            if len(self._memo) > 4096:
                self._memo.clear()
            self._memo[key] = [int(t) for t in reply.json()["tokens"]]
        return list(self._memo[key])

    def __call__(self, texts: str | Sequence[str], add_special_tokens: bool = False) -> dict[str, Any]:
        if isinstance(texts, str):
            return {"input_ids": self.encode(texts, add_special_tokens)}
        return {"input_ids": [self.encode(t, add_special_tokens) for t in texts]}

    def decode(self, ids: Sequence[int], **_: Any) -> str:
        reply = self.client.post("/detokenize", json={"model": self.model, "tokens": [int(i) for i in ids]})
        reply.raise_for_status()
        return str(reply.json()["prompt"])

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("a ServerTokenizer holds a connection; make it where it is used")


def server_tokenizer(base_url: str, model: str, api_key: Any = None) -> ServerTokenizer | None:
    """The server's tokenizer if it answers ``/tokenize`` for the model (vLLM), else None."""
    try:
        tokenizer = ServerTokenizer(base_url, model, api_key, timeout=20.0)
        if tokenizer.encode("Hello") and tokenizer.decode(tokenizer.encode(" A")).strip() == "A":
            return tokenizer
    except Exception as exc:  # no such endpoint (404), no server, another protocol: not this source
        log.debug("no /tokenize at %s: %s", base_url, exc)
    return None


def load_tokenizer(spec: Any, ask_server: bool = True) -> Any:
    """The judge's (or a generator's) tokenizer: the local checkpoint's; for an API judge without one, the
    server's (unless not ``ask_server``: ``make check`` sends nothing), else :class:`WordPieces` (logged once, with
    what it means); for a judge that answers by key (recorded verdicts: it reads no text), :class:`WordPieces`."""
    from pipeline.config.backends import Trait, backend

    entry = backend(spec.backend)
    if entry.answers:
        return WordPieces()
    from transformers import AutoTokenizer

    if spec.model_path:
        try:
            return AutoTokenizer.from_pretrained(spec.model_path)
        except OSError as exc:
            if Trait.ENDPOINT not in entry.traits:
                raise
            log.info("no local tokenizer for %s (%s)", spec.model_path, str(exc).splitlines()[0])
    if Trait.ENDPOINT not in entry.traits or spec.endpoint is None:
        raise ValueError(f"judge {spec.name}: no model to load a tokenizer from")
    # a server that takes token-id prompts (vLLM's) may tokenize for us; another (a hosted API) is not asked
    found = (
        server_tokenizer(str(spec.endpoint.settings.base_url), spec.endpoint.model, spec.endpoint.secret)
        if Trait.TOKEN_IDS in entry.traits and ask_server
        else None
    )
    if found is not None:
        log.info("judge %s: tokens from %s", spec.name, found.source)
        return found
    log.warning(
        "%s: no tokenizer here (no local checkpoint, %s): token counts are estimated from words and marks, and "
        "prompts go by the chat path",
        spec.name,
        "no /tokenize on the server" if ask_server else "and make check does not ask the server's /tokenize",
    )
    return WordPieces()


def is_exact(tokenizer: Any) -> bool:
    """Whether the tokenizer's ids are the model's own."""
    return bool(getattr(tokenizer, "exact", True))


def is_local(tokenizer: Any) -> bool:
    """A tokenizer of a checkpoint on this machine (neither the server's nor an estimate)."""
    return not isinstance(tokenizer, (WordPieces, ServerTokenizer))
