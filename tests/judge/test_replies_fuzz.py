"""Fuzzing the readers of pipeline.judge.endpoint.replies (hypothesis): reply bodies for every request kind (label and
absolute reads on the token-id and chat paths, sampled verdicts, reasoning and generation), valid, mutated, truncated,
retyped and with extreme numbers. Each is refused with a kind of KINDS, or read as finite values equal to what the
body says (computed here from the body, independently of the reader); nothing else is ever raised. The batch output
reader gets lines of the same bodies, and of every wrong type."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.judge.endpoint.batch import Line, Tally, read_output
from pipeline.judge.endpoint.replies import KINDS, Refused, chat_reader, check_of, completion_reader

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
json_any = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
logprob_values = st.one_of(
    st.floats(min_value=-50, max_value=0),
    st.sampled_from([0.0, -0.0, 1e-300, -1e-300, 5.0, 800.0, -1e308, math.nan, math.inf, -math.inf]),
    st.integers(min_value=-3, max_value=3),
)
counts = st.one_of(
    st.none(),
    st.integers(min_value=0, max_value=10_000),
    st.sampled_from([-5, 2.7, 3e9, 3_000_000_000, 2**31 - 1, True, "12", [1]]),
)

# the request kinds: (path, samples, requested tokens) -- ids on the token-id path, words on the chat path
KIND_OF_REQUEST = st.sampled_from(
    [
        ("completions", 1, (7, 9)),  # a comparison's label tokens
        ("completions", 1, (11, 12, 13, 14, 15)),  # an absolute read's score tokens
        ("completions", 1, ()),  # generation
        ("completions", 3, ()),  # samples
        ("chat", 1, (" A", "A", " B", "B")),  # labels on the chat path (reasoning too: a conversation)
        ("chat", 1, ("1", "2", "3", "4", "5")),  # an absolute read
        ("chat", 5, ()),  # a sampled verdict
        ("chat", 1, ()),  # generation, or reasoning's text
    ]
)


@st.composite
def usage(draw) -> Any:
    if draw(st.booleans()):
        return draw(st.sampled_from([None, [], "x", 3]))
    out: dict[str, Any] = {}
    for key in ("prompt_tokens", "completion_tokens"):
        if draw(st.booleans()):
            out[key] = draw(counts)
    if draw(st.booleans()):
        out["prompt_tokens_details"] = draw(
            st.one_of(st.none(), st.just([]), st.fixed_dictionaries({"cached_tokens": counts}))
        )
    return out


@st.composite
def body_of(draw, path: str, n: int, tokens: tuple) -> Any:
    """A reply for the request: built valid, then maybe mutated."""
    choices = []
    for k in range(n):
        text = draw(st.text(max_size=6))
        choice: dict[str, Any] = {
            "index": k,
            "finish_reason": draw(st.sampled_from(["stop", "length", None])),
        }
        if path == "completions":
            choice["text"] = text
            top = {f"token_id:{t}": draw(logprob_values) for t in tokens}
            for extra in draw(st.lists(st.integers(0, 30), max_size=2)):
                top.setdefault(f"token_id:{extra}", draw(logprob_values))
            choice["logprobs"] = {"top_logprobs": [top]} if tokens else None
        else:
            choice["message"] = {"role": "assistant", "content": text}
            if tokens:
                said = draw(
                    st.lists(st.sampled_from([*tokens, "x", "\n"]), min_size=1, max_size=4, unique=True)
                )
                alternatives = [{"token": t, "logprob": draw(logprob_values)} for t in said]
                choice["logprobs"] = {"content": [{**alternatives[0], "top_logprobs": alternatives}]}
        choices.append(choice)
    body: dict[str, Any] = {"choices": choices}
    if draw(st.booleans()):
        body["usage"] = draw(usage())
    if draw(st.booleans()):
        draw(st.randoms()).shuffle(choices)
    return mutate(draw, json.loads(json.dumps(body)))  # a copy: the values sampled_from gives are shared


def mutate(draw, body: Any) -> Any:
    """Up to three mutations: a field deleted or retyped, a list truncated or extended, the body replaced."""
    for _ in range(draw(st.integers(0, 3))):
        paths = list(walk(body))
        if not paths:
            break
        where, holder, key = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["delete", "retype", "extreme", "truncate", "duplicate", "replace"]))
        if action == "replace" and where == ():
            return draw(json_any)
        if action == "delete" and isinstance(holder, dict):
            del holder[key]
        elif action == "truncate" and isinstance(holder[key], list):
            del holder[key][draw(st.integers(0, len(holder[key]))) :]
        elif action == "duplicate" and isinstance(holder[key], list) and holder[key]:
            holder[key].append(json.loads(json.dumps(holder[key][0])))
        elif action == "extreme":
            holder[key] = draw(
                st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 2**63, -1, 0.5])
            )
        else:
            holder[key] = draw(json_any)
    return body


def walk(node: Any, where: tuple = ()):
    """(path, holder, key) of every field under ``node``."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in list(items):
        yield (*where, key), node, key
        yield from walk(value, (*where, key))


def expected(body: dict, path: str, n: int, tokens: tuple) -> tuple[list, list, list, tuple]:
    """What an accepted body says, read from it here: texts by index, the tokens' log-probabilities, usage."""
    by_index = {c.get("index", k): c for k, c in enumerate(body["choices"])}
    choices = [by_index[k] for k in range(n)]
    if path == "completions":
        texts = [c["text"] for c in choices]
        top = choices[0]["logprobs"]["top_logprobs"][0] if tokens else {}
        values = [top[f"token_id:{t}"] for t in tokens]
    else:
        texts = [c["message"]["content"] for c in choices]
        first = choices[0]["logprobs"]["content"][0] if tokens else {}
        alternatives = {a["token"]: a["logprob"] for a in [*first.get("top_logprobs", []), first] if a}
        values = [alternatives.get(w, min(alternatives.values(), default=None)) for w in tokens]
    reasons = [c.get("finish_reason") or "stop" for c in choices]
    given = body.get("usage") or {}
    details = given.get("prompt_tokens_details") or {}
    return texts, values, reasons, (given.get("prompt_tokens"), given.get("completion_tokens"),
                                    details.get("cached_tokens"))  # fmt: skip


def reader_of(path: str, n: int, tokens: tuple):
    return completion_reader(n, tokens) if path == "completions" else chat_reader(n, tokens)


@FUZZ
@given(data=st.data(), request=KIND_OF_REQUEST)
def test_every_reply_is_refused_with_its_kind_or_read_as_it_says(data, request):
    path, n, tokens = request
    body = data.draw(body_of(path, n, tokens))
    try:
        answer = reader_of(path, n, tokens)(body)
    except Refused as refused:
        assert refused.kind in KINDS
        assert check_of(reader_of(path, n, tokens))(body)[0] == refused.kind
        return
    texts, values, reasons, usage = expected(body, path, n, tokens)
    assert answer.texts == texts and answer.reasons == reasons
    assert answer.logprobs == values and all(math.isfinite(v) and v <= 0 for v in answer.logprobs)
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.cached_tokens) == usage
    assert all(c is None or (type(c) is int and 0 <= c < 2**31) for c in usage)
    assert 0 <= answer.missing <= len(tokens)


@FUZZ
@given(data=st.data(), request=KIND_OF_REQUEST)
def test_a_batch_output_of_any_lines_is_read_without_a_crash_and_every_request_accounted_for(data, request):
    path, n, tokens = request
    check = check_of(reader_of(path, n, tokens))
    lines = [Line(f"req-{k}", {"k": k}, check) for k in range(3)]
    raw = []
    for _ in range(data.draw(st.integers(0, 6))):
        entry: Any = {
            "custom_id": data.draw(st.sampled_from(["req-0", "req-1", "req-2", "other"])),
            "response": {
                "status_code": data.draw(st.sampled_from([200, 200, 500, 400])),
                "body": data.draw(body_of(path, n, tokens)),
            },  # fmt: skip
            "error": None,
        }
        entry = mutate(data.draw, entry)
        raw.append(json.dumps(entry) if data.draw(st.integers(0, 9)) else "not json {")
    tally = Tally()
    out = read_output(["\n".join(raw)], lines, tally)
    for line in lines:
        if line.custom_id in out:
            assert check(out[line.custom_id]) is None
        else:
            assert tally.failures[line.custom_id] and set(tally.failures[line.custom_id]) <= set(KINDS)


# --- bodies built to break a reader: what reaches the client as bytes ---------------------------------------------

HOSTILE = st.sampled_from(
    [
        "huge_int_310",  # a log-probability or a count of 310 digits (a float overflows)
        "huge_int_4400",  # past Python's own limit on parsing integers
        "token_id_4400",  # a token_id: key of 4,400 digits
        "token_id_padded",  # token_id:0007 beside token_id:7
        "deep_1000",  # the body nested 1,000 deep
        "deep_5000",  # 5,000 deep
        "surrogate",  # a lone UTF-16 surrogate in a text
        "oversize_list",  # 5,000 alternatives
        "huge_body",  # a body of more than the size limit
    ]
)


def hostile(body: Any, how: str, rng) -> bytes:
    """``body`` serialised, then made hostile as ``how`` says (at a place drawn with ``rng``)."""
    text = json.dumps(body)
    if how.startswith("huge_int"):
        digits = "7" * (310 if how.endswith("310") else 4400)
        numbers = [
            m for m in __import__("re").finditer(r"(?<![\w.\"])-?\d+(\.\d+)?(e-?\d+)?(?![\w\"])", text)
        ]
        if numbers:
            m = rng.choice(numbers)
            text = text[: m.start()] + "-" + digits + text[m.end() :]
        else:
            text = '{"x": -' + digits + ', "body": ' + text + "}"
    elif how == "token_id_4400":
        text = text.replace('"token_id:', '"token_id:' + "1" * 4400, 1) if "token_id:" in text else text
    elif how == "token_id_padded":
        text = text.replace('{"token_id:7": ', '{"token_id:0007": -0.5, "token_id:7": ', 1)
    elif how.startswith("deep"):
        depth = 1000 if how.endswith("1000") else 5000
        text = "[" * depth + text + "]" * depth
    elif how == "surrogate":
        text = text.replace('"text": "', '"text": "\\ud800', 1).replace(
            '"content": "', '"content": "\\udfff', 1
        )
    elif how == "oversize_list":
        many = ", ".join(f'{{"token": "t{k}", "logprob": -{k % 50}.5}}' for k in range(5000))
        text = text.replace('"top_logprobs": [', '"top_logprobs": [' + many + ", ", 1)
    elif how == "huge_body":
        text = '{"pad": "' + "x" * (5 * 2**20) + '", "body": ' + text + "}"
    return text.encode("utf-8", "surrogatepass")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), request=KIND_OF_REQUEST, how=HOSTILE)
def test_bodies_built_to_break_the_readers_are_refused_by_kind_and_never_raise(data, request, how):
    """The client's reading of a reply (parse within the limits, then the request's check) and the batch output
    reader, on bodies with huge integers, deep nesting, lone surrogates, oversize lists and padded token ids: a
    refusal of a kind of KINDS or an answer whose every string can be stored, never another exception."""
    from pipeline.judge.endpoint.client import _answer

    path, n, tokens = request
    body = data.draw(body_of(path, n, tokens))
    raw = hostile(body, how, data.draw(st.randoms()))
    check = check_of(reader_of(path, n, tokens))
    answer, problem = _answer(raw, check)  # the bytes the client read (up to its limit)
    if problem is not None:
        assert answer is None and problem[0] in KINDS, problem
    else:
        json.dumps(answer).encode("utf-8")  # storable as the cache stores it
    if (
        how in ("deep_1000", "deep_5000", "huge_int_4400", "surrogate", "huge_body")
        and raw != json.dumps(body).encode()
    ):
        assert problem is not None and problem[0] in (
            "not_json", "too_deep", "bad_number", "bad_text", "too_large", "no_choices"
        ), problem  # fmt: skip
    line = Line("req-0", {"k": 0}, check)
    entry = b'{"custom_id": "req-0", "response": {"status_code": 200, "body": ' + raw + b"}}"
    tally = Tally()
    out = read_output([entry.decode("utf-8", "surrogatepass")], [line], tally)
    assert ("req-0" in out) != bool(tally.failures.get("req-0")), (out, tally.failures)
    if "req-0" in out:
        json.dumps(out["req-0"]).encode("utf-8")
