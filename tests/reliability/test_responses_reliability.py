"""The reliability suite on the OpenAI Responses API: fault injection, bad input, properties.

Every Responses entry point (``harness.RESPONSES_ENTRIES``: create, ``stream=True``, ``.stream()``,
``.parse()``, raw, streaming response, ``input_tokens.count``, ``compact``; sync and async) gets the
same checks as the Messages and Chat Completions entry points in ``test_fault_injection.py``: under
every injected fault the call succeeds and the caller sees what the unpatched SDK gives, the original
request (or the rewrite, if it was made) goes out, failures are counted and logged once per call site,
and ``strict=True`` raises naming the stage. Bad hints fail before any I/O; malformed ``input`` gets the
SDK's / API's own error with what the caller built on the wire. Hypothesis checks that no input item
is ever lost, reordered or altered (beyond canonical key order), that the rewrite is idempotent, and
that the emitted body is the same whatever the caller's key order.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import telos_wrap
from telos_wrap import TelosHintError, TelosStageError
from telos_wrap.ir.canon import canonicalize_payload
from telos_wrap.ir.hints import TelosHints
from telos_wrap.pipeline import PrepareOptions, prepare

from .faults import FAULTS, fault
from .harness import RESPONSES_ENTRIES, Wire, client_for, entry, kwargs_for
from .test_bad_input import BAD_HINTS
from .test_fault_injection import test_fault_fails_open as _fails_open

_IDS = [e.id for e in RESPONSES_ENTRIES]


@pytest.mark.parametrize(
    ("entry_id", "fault_name"),
    [pytest.param(e.id, f.name, id=f"{e.id}-{f.name}") for e in RESPONSES_ENTRIES for f in FAULTS],
)
def test_fault_fails_open(
    entry_id: str, fault_name: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _fails_open(entry_id, fault_name, monkeypatch, caplog)


_STRICT = [
    e_id
    for e_id in ("responses-sync-create", "responses-async-create_stream", "responses-sync-compact")
    if any(e.id == e_id for e in RESPONSES_ENTRIES)  # openai 2.x has no compact
]


@pytest.mark.parametrize(
    ("entry_id", "fault_name"),
    [
        pytest.param(e_id, f.name, id=f"{e_id}-{f.name}")
        for e_id in _STRICT
        for f in FAULTS
        if f.fires(entry(e_id)) and not (f.name == "session.record-usage" and entry(e_id).streaming)
    ],
)
def test_strict_mode_raises_naming_the_stage(
    entry_id: str, fault_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    e, f = entry(entry_id), fault(fault_name)
    wire = Wire()
    telos_wrap.patch(strict=True)
    f.install(monkeypatch)
    with pytest.raises(TelosStageError) as info:
        e.run(client_for(e.sdk, wire, is_async=e.is_async), kwargs_for(e.sdk))
    assert info.value.stage == f.stage_for(e)
    if f.side in ("request", "store"):
        assert wire.sent == [], "strict mode raises before anything is sent"


# -- bad input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("hint", list(BAD_HINTS))
@pytest.mark.parametrize("entry_id", _IDS)
def test_a_wrong_hint_fails_before_any_io(entry_id: str, hint: str) -> None:
    e = entry(entry_id)
    wire = Wire()
    telos_wrap.patch()
    with pytest.raises(TelosHintError) as info:
        e.run(
            client_for(e.sdk, wire, is_async=e.is_async), {**kwargs_for(e.sdk), "telos_hint": BAD_HINTS[hint]}
        )
    assert wire.sent == [], "nothing was sent"
    assert all(key in str(info.value) for key in TelosHints.model_fields)
    assert telos_wrap.failure_counts() == {}


def _validating_wire() -> Wire:
    """A backend that answers a 400 in OpenAI's shape when an input item is not an object."""

    def fail(request: Any, attempt: int) -> Any:
        from tests.sdk_http import sdk_http

        items = json.loads(request.read() or b"{}").get("input")
        if isinstance(items, list) and not all(isinstance(item, dict) for item in items):
            error = {
                "message": "Invalid 'input': every item must be an object.",
                "type": "invalid_request_error",
            }
            return sdk_http.Response(400, json={"error": error})
        return None

    return Wire(fail)


def _outcome(kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], list[Any]]:
    wire = _validating_wire()
    try:
        client_for("responses", wire).responses.create(**kwargs)
        got: tuple[Any, ...] = ("ok",)
    except Exception as exc:
        got = (type(exc), str(exc), getattr(exc, "status_code", None))
    return got, wire.bodies


@pytest.mark.parametrize(
    "bad_input",
    [["loose text", {"role": "user", "content": "hi"}], [{"role": "user", "content": "hi"}, 42], [None]],
)
def test_malformed_input_gets_the_apis_own_error_as_sent(bad_input: list[Any]) -> None:
    kwargs = {**kwargs_for("responses"), "input": bad_input}
    unpatched, sent_unpatched = _outcome(copy.deepcopy(kwargs))
    telos_wrap.patch(strict=True)
    patched, sent_patched = _outcome(copy.deepcopy(kwargs))
    assert patched == unpatched and patched[0] is openai.BadRequestError
    assert (
        [body["input"] for body in sent_patched] == [body["input"] for body in sent_unpatched] == [bad_input]
    )
    # Refused by the lift, sent as built: counted and logged once, never raised (lift/readable.py).
    assert telos_wrap.failure_counts() == {"lift": 1}


def test_an_input_generator_is_sent_once_rewritten() -> None:
    items = kwargs_for("responses")["input"]
    wire = Wire()
    telos_wrap.patch(strict=True)
    client_for("responses", wire).responses.create(**{**kwargs_for("responses"), "input": (i for i in items)})
    sent = wire.bodies[0]["input"]
    assert sent[: len(items) - 1] == canonicalize_payload(items)[: len(items) - 1]
    # the user's own reminder is split off its question (a DROP part after it, pruned once it is history)
    question, reminder = sent[len(items) - 1]["content"]
    assert question["text"].startswith("second question") and reminder["text"].startswith("<system-reminder>")
    # The instructions' final clock to the second stays where the caller wrote it until it changes
    # (OpenAI before gpt-5.6 reads any prefix: docs/sessions.md, *A clock that ends the system prompt*).
    assert wire.bodies[0]["instructions"].endswith("Current time: 2026-11-21T10:00:00")
    assert len(sent) == len(items)


# -- properties -----------------------------------------------------------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | _TEXT,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text("abcxyz", min_size=1, max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_ENVELOPE = st.sampled_from(
    ["", "\nCurrent time: 2026-11-21T10:00:00", "\n<system-reminder>x</system-reminder>"]
)
_MESSAGE = st.builds(
    lambda role, text, env, as_parts: {
        "role": role,
        "content": [{"type": "input_text" if role != "assistant" else "output_text", "text": text + env}]
        if as_parts
        else text + env,
    },
    st.sampled_from(["user", "assistant", "developer"]),
    _TEXT,
    _ENVELOPE,
    st.booleans(),
)
_ITEM = st.one_of(
    _MESSAGE,
    st.builds(
        lambda c, a: {"type": "function_call", "call_id": c, "name": "f", "arguments": a}, _TEXT, _TEXT
    ),
    st.builds(lambda c, o: {"type": "function_call_output", "call_id": c, "output": o}, _TEXT, _TEXT),
    st.builds(
        lambda e, s: {"type": "reasoning", "id": "rs", "encrypted_content": e, "summary": s},
        _TEXT,
        st.lists(_JSON, max_size=2),
    ),
    st.builds(
        lambda kind, data: {"type": kind, "data": data},
        st.sampled_from(["web_search_call", "future_item", "item_reference"]),
        _JSON,
    ),
)
_BODY = st.builds(
    lambda items, instructions, env, tools: {
        "model": "gpt-5.6",
        "instructions": instructions + env,
        "input": items,
        "tools": tools,
    },
    st.lists(_ITEM, min_size=1, max_size=8),
    _TEXT,
    _ENVELOPE,
    st.lists(
        st.one_of(
            st.builds(
                lambda n, p: {"type": "function", "name": n, "parameters": p},
                st.text("abc", min_size=1, max_size=3),
                _JSON,
            ),
            st.sampled_from([{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["v"]}]),
        ),
        max_size=4,
        unique_by=lambda tool: str(tool.get("name", tool["type"])),  # the API rejects duplicate tools
    ),
)
PROPERTY = settings(max_examples=120, deadline=None)


def _send(body: dict[str, Any], engine: str = "openai") -> dict[str, Any]:
    return prepare("openai_responses", body, PrepareOptions(engine=engine)).body


def _strip_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_markers(v) for k, v in value.items() if k != "prompt_cache_breakpoint"}
    if isinstance(value, list):
        return [_strip_markers(v) for v in value]
    return value


@PROPERTY
@given(_BODY)
def test_no_item_is_lost_reordered_or_altered(body: dict[str, Any]) -> None:
    original = copy.deepcopy(body)
    sent = _send(body)
    assert body == original, "the caller's body is never modified"
    items = _strip_markers(sent["input"])
    expected = canonicalize_payload(original["input"])
    # Every item in place; a user text may only lose its envelope (moved to one trailing system item).
    extra = len(items) - len(expected)
    assert extra in (0, 1)
    if extra:
        assert items[-1]["role"] == "system" and set(items[-1]) == {"role", "content"}
    for got, want in zip(items, expected, strict=False):
        if want.get("role") == "user":
            assert got["role"] == "user"
        else:
            assert got == want
    for got, want in zip(items, expected, strict=False):
        if want.get("type") == "reasoning":
            assert got["encrypted_content"] == want["encrypted_content"]


@PROPERTY
@given(_BODY)
def test_the_rewrite_is_idempotent(body: dict[str, Any]) -> None:
    once = _send(body)
    assert _send(once) == once


@PROPERTY
@given(_BODY, st.randoms(use_true_random=False))
def test_key_and_tool_order_never_change_the_bytes(body: dict[str, Any], rng: Any) -> None:
    from telos_wrap.replay.traces import shuffle_keys

    shuffled = shuffle_keys(copy.deepcopy(body), rng)
    rng.shuffle(shuffled["tools"])
    # Below the top level the bytes are the same; the top level keeps each caller's own order.
    sent_shuffled, sent = _send(shuffled), _send(body)
    kept = [key for key in shuffled if key in sent_shuffled]
    assert list(sent_shuffled)[: len(kept)] == kept
    assert json.dumps(dict(sorted(sent_shuffled.items()))) == json.dumps(dict(sorted(sent.items())))
