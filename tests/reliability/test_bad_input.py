"""Bad and unusual input: telos fails early where the caller erred, and is invisible everywhere else.

* A wrong ``telos_hint`` (type, key or value) raises ``TelosHintError`` (a ``TypeError``) at call time,
  on every entry point, before any network I/O, with a message listing every valid key.
* Malformed SDK arguments give the SDK's own error, or the vendor's, exactly as unpatched — same
  exception, same request on the wire — and are not counted as telos failures.
* Generators, iterators and tuples passed as ``messages`` / ``tools`` are consumed once and forwarded.
* The caller's objects (``messages``, ``tools``, ``system``, ``extra_body``, ``extra_headers``,
  ``metadata``, the ``telos_hint`` dict) are never mutated, rewritten or failing open.
* A 10 MB tool result and a 5,000-message conversation go through, in time linear in their size.
"""

from __future__ import annotations

import copy
import gc
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import telos_wrap
from telos_wrap import TelosHintError, TelosHints, failopen, pipeline
from telos_wrap.pipeline import PrepareOptions, prepare
from telos_wrap.sessions import MemoryStore, Session
from telos_wrap.sessions.core import runtime_of
from tests.sdk_http import sdk_http

from .harness import ENTRIES, ENTRY_IDS, TOOL_MANUAL, Wire, client_for, entry, kwargs_for
from .sdk_types import SchemaError, check_anthropic_body, check_openai_body

BAD_HINTS: dict[str, Any] = {
    "string": "1h",
    "number": 5,
    "list": ["ttl"],
    "unknown-key": {"tll": "1h"},
    "bad-ttl": {"ttl": "2h"},
    "bad-engine": {"engine": "gpt"},
    "bad-regex": {"drop_patterns": ["(unclosed"]},
    "bad-turns": {"expected_turns": 0},
    "wrong-type-value": {"disable": "yes please"},
}


@pytest.mark.parametrize("hint", list(BAD_HINTS))
@pytest.mark.parametrize("entry_id", ENTRY_IDS)
def test_a_wrong_hint_fails_before_any_io_listing_the_valid_keys(entry_id: str, hint: str) -> None:
    e = entry(entry_id)
    wire = Wire()
    client = client_for(e.sdk, wire, is_async=e.is_async)
    telos_wrap.patch()
    with pytest.raises(TelosHintError) as info:
        e.run(client, {**kwargs_for(e.sdk), "telos_hint": BAD_HINTS[hint]})
    assert isinstance(info.value, TypeError), "like any wrong keyword argument"
    assert wire.sent == [], "nothing was sent"
    message = str(info.value)
    assert all(key in message for key in TelosHints.model_fields), message
    assert telos_wrap.failure_counts() == {}, "the caller's mistake is not a telos failure"


@pytest.mark.parametrize("entry_id", ["anthropic-sync-create", "openai-async-create_stream"])
def test_a_hint_given_as_telos_hints_or_none_is_accepted(entry_id: str) -> None:
    e = entry(entry_id)
    telos_wrap.patch(strict=True)
    hint: object
    for hint in (None, TelosHints(ttl="1h" if e.sdk == "anthropic" else "30m"), {}):
        e.run(client_for(e.sdk, Wire(), is_async=e.is_async), {**kwargs_for(e.sdk), "telos_hint": hint})


# -- malformed SDK arguments -------------------------------------------------------------------------


def _validating_wire() -> Wire:
    """A backend that answers 400 (vendor-shaped) to a body its SDK's own types reject."""

    def fail(request: sdk_http.Request, attempt: int) -> sdk_http.Response | None:
        body = json.loads(request.content)
        try:
            if request.url.path.endswith("/v1/messages"):
                check_anthropic_body(body)
            else:
                check_openai_body(body)
        except (SchemaError, KeyError, TypeError) as exc:
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": str(exc)[:200]}}
            return sdk_http.Response(400, json=error)
        return None

    return Wire(fail)


def _changed(kwargs: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with each of ``changes`` set (``_DELETE``: the key removed)."""
    for key, value in changes.items():
        if value is _DELETE:
            kwargs.pop(key)
        else:
            kwargs[key] = value
    return kwargs


def _anthropic_kwargs(**changes: Any) -> dict[str, Any]:
    kwargs = {**kwargs_for("anthropic"), "system": "You are terse."}  # nothing to move into a message
    return _changed(kwargs, changes)


def _openai_kwargs(**changes: Any) -> dict[str, Any]:
    kwargs = kwargs_for("openai")
    kwargs["messages"] = [{"role": "system", "content": "You are terse."}, *kwargs["messages"][1:]]
    return _changed(kwargs, changes)


_DELETE = object()
#: case → (sdk, the malformed top-level field — None when the SDK refuses before sending, kwargs).
MALFORMED: dict[str, tuple[str, str | None, Callable[[], dict[str, Any]]]] = {
    "anthropic-missing-max_tokens": ("anthropic", None, lambda: _anthropic_kwargs(max_tokens=_DELETE)),
    "anthropic-unknown-kwarg": ("anthropic", None, lambda: _anthropic_kwargs(temprature=0.5)),
    "anthropic-messages-a-string": ("anthropic", "messages", lambda: _anthropic_kwargs(messages="hello")),
    "anthropic-message-a-string": ("anthropic", "messages", lambda: _anthropic_kwargs(messages=["hello"])),
    "anthropic-content-a-number": (
        "anthropic",
        "messages",
        lambda: _anthropic_kwargs(messages=[{"role": "user", "content": 5}]),
    ),
    "anthropic-system-a-number": ("anthropic", "system", lambda: _anthropic_kwargs(system=123)),
    "anthropic-tools-a-dict": ("anthropic", "tools", lambda: _anthropic_kwargs(tools={"name": "x"})),
    "anthropic-block-without-type": (
        "anthropic",
        "messages",
        lambda: _anthropic_kwargs(messages=[{"role": "user", "content": [{"text": "hi"}]}]),
    ),
    "anthropic-max_tokens-a-string": ("anthropic", "max_tokens", lambda: _anthropic_kwargs(max_tokens="ten")),
    "anthropic-role-missing": (
        "anthropic",
        "messages",
        lambda: _anthropic_kwargs(messages=[{"content": "hi"}]),
    ),
    "openai-missing-messages": ("openai", None, lambda: _openai_kwargs(messages=_DELETE)),
    "openai-unknown-kwarg": ("openai", None, lambda: _openai_kwargs(temprature=0.5)),
    "openai-messages-a-dict": (
        "openai",
        "messages",
        lambda: _openai_kwargs(messages={"role": "user", "content": "hi"}),
    ),
    "openai-role-missing": ("openai", "messages", lambda: _openai_kwargs(messages=[{"content": "hi"}])),
    "openai-content-a-number": (
        "openai",
        "messages",
        lambda: _openai_kwargs(messages=[{"role": "user", "content": 5}]),
    ),
    "openai-tools-not-a-list": ("openai", "tools", lambda: _openai_kwargs(tools="calc")),
    "openai-part-without-type": (
        "openai",
        "messages",
        lambda: _openai_kwargs(messages=[{"role": "user", "content": [{"text": "hi"}]}]),
    ),
}


def _outcome(sdk: str, kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], list[Any]]:
    wire = _validating_wire()
    client = client_for(sdk, wire)
    try:
        if sdk == "anthropic":
            result = client.messages.create(**kwargs)
        else:
            result = client.chat.completions.create(**kwargs)
        got: tuple[Any, ...] = ("ok", type(result).__name__)
    except Exception as exc:
        got = (type(exc), str(exc), getattr(exc, "status_code", None), getattr(exc, "body", None))
    return got, wire.bodies


@pytest.mark.parametrize(
    "case",
    [pytest.param(case) if case.endswith("role-missing") else case for case in MALFORMED],
)
def test_malformed_arguments_give_the_sdks_own_error(case: str) -> None:
    sdk, field, make = MALFORMED[case]
    unpatched, sent_unpatched = _outcome(sdk, make())
    telos_wrap.patch()
    patched, sent_patched = _outcome(sdk, make())
    assert patched == unpatched, "the same exception, with the same message, status and body"
    assert patched[0] != "ok", "the case really is malformed"
    assert isinstance(patched[0], type) and issubclass(
        patched[0], (TypeError, anthropic.APIError, openai.APIError)
    )
    if field is None:
        assert sent_patched == sent_unpatched == [], "the SDK refused before sending"
    else:  # telos may still rewrite the well-formed rest; the malformed part goes out as the caller built it
        assert [body[field] for body in sent_patched] == [body[field] for body in sent_unpatched]


# -- generators --------------------------------------------------------------------------------------


GENERATOR_ENTRIES = [
    "anthropic-sync-create",
    "anthropic-async-stream_helper",
    "anthropic-sync-count_tokens",
    "openai-sync-create",
    "openai-async-create_stream",
    "openai-sync-stream_helper",
]


#: Iterables the SDKs accept for their ``Iterable[...]`` params (a custom iterable class is not
#: JSON-serializable by the SDKs themselves, patched or not).
ITERABLES: dict[str, Callable[[list[Any]], Any]] = {
    "generator": lambda items: (item for item in items),
    "map": lambda items: map(dict, items),
    "tuple": tuple,
}


def _with_iterables(sdk: str, kind: str) -> dict[str, Any]:
    kwargs = kwargs_for(sdk)
    kwargs["messages"] = ITERABLES[kind](kwargs["messages"])
    kwargs["tools"] = ITERABLES[kind](kwargs["tools"])
    return kwargs


def _consumed_once(kwargs: dict[str, Any], kind: str) -> None:
    if kind in ("generator", "map"):
        for name in ("messages", "tools"):
            assert next(kwargs[name], None) is None, "consumed"


def _sent(e: Any, kwargs: dict[str, Any], *, patched: bool) -> list[Any]:
    wire = Wire()
    if patched:
        telos_wrap.patch(strict=True)
    try:
        with telos_wrap.session(f"generators-{uuid.uuid4().hex}"):
            e.run(client_for(e.sdk, wire, is_async=e.is_async), kwargs)
    finally:
        telos_wrap.unpatch()
    return wire.bodies


@pytest.mark.parametrize("entry_id", GENERATOR_ENTRIES)
@pytest.mark.parametrize("kind", list(ITERABLES))
def test_generators_are_consumed_once_and_forwarded(entry_id: str, kind: str) -> None:
    e = entry(entry_id)
    unpatched = _sent(e, kwargs_for(e.sdk), patched=False)
    rewritten = _sent(e, kwargs_for(e.sdk), patched=True)
    kwargs = _with_iterables(e.sdk, kind)
    sent = _sent(e, kwargs, patched=True)
    _consumed_once(kwargs, kind)
    assert sent in (unpatched, rewritten), "every item went out, once"


@pytest.mark.parametrize(
    "entry_id",
    [
        pytest.param("anthropic-sync-create"),
        pytest.param("anthropic-async-stream_helper"),
        "openai-sync-create",
        "openai-async-create_stream",
    ],
)
@pytest.mark.parametrize("kind", list(ITERABLES))
def test_generators_are_rewritten_like_lists(entry_id: str, kind: str) -> None:
    e = entry(entry_id)
    rewritten = _sent(e, kwargs_for(e.sdk), patched=True)
    kwargs = _with_iterables(e.sdk, kind)
    assert _sent(e, kwargs, patched=True) == rewritten
    _consumed_once(kwargs, kind)


# -- the caller's objects are never mutated ----------------------------------------------------------------


def _rich_kwargs(sdk: str) -> dict[str, Any]:
    kwargs = kwargs_for(sdk)
    kwargs["extra_headers"] = {"x-app": "demo"}
    kwargs["extra_body"] = {"service_tier": "auto"} if sdk == "openai" else {"top_k": 3}
    kwargs["metadata"] = {"user_id": "u-1"} if sdk == "anthropic" else {"team": "a"}
    kwargs["telos_hint"] = {"ttl": "1h" if sdk == "anthropic" else "30m", "drop_patterns": ["^Build: .*$"]}
    if sdk == "anthropic":
        kwargs["system"] = [
            {
                "type": "text",
                "text": "You are terse.\nCurrent time: 2026-11-21T10:00:00",
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            }
        ]
        kwargs["messages"][-1]["content"] = [
            {
                "type": "text",
                "text": "question\n<system-reminder>x</system-reminder>",
                "cache_control": {"type": "ephemeral"},
            }
        ]
    else:
        kwargs["store"] = False
    return kwargs


@pytest.mark.parametrize("mode", ["rewrite", "fail-open"])
@pytest.mark.parametrize("entry_id", [e.id for e in ENTRIES if not e.is_async or e.name == "create"])
def test_the_callers_objects_are_never_mutated(
    entry_id: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    e = entry(entry_id)
    kwargs = _rich_kwargs(e.sdk)
    if e.count_only:
        kwargs.pop("metadata")
        kwargs.pop("extra_body")
    before = copy.deepcopy(kwargs)
    nested = {key: kwargs[key] for key in kwargs}
    telos_wrap.patch()
    if mode == "fail-open":
        monkeypatch.setattr(pipeline, "_stage_hook", lambda stage: (_ for _ in ()).throw(RuntimeError(stage)))
    wire = Wire()
    with telos_wrap.session("mutation"):
        e.run(client_for(e.sdk, wire, is_async=e.is_async), {**kwargs})
    assert kwargs == before, "nothing the caller passed was changed"
    assert all(kwargs[key] is value for key, value in nested.items())
    assert wire.sent and wire.sent[-1].headers.get("x-app") == "demo"
    rewritten = mode == "rewrite"
    assert (wire.bodies[-1]["messages"] != before["messages"]) == rewritten or e.sdk == "openai"


# -- scale: linear, not quadratic ------------------------------------------------------------------------


def _conversation(n: int) -> dict[str, Any]:
    salt = uuid.uuid4().hex  # fresh text: nothing memoized from an earlier run
    messages: list[dict[str, Any]] = []
    for i in range(n):
        if i % 2 == 0:
            messages.append(
                {
                    "role": "user",
                    "content": f"{salt} question {i}\n<system-reminder>turn {i}</system-reminder>",
                }
            )
        else:
            messages.append({"role": "assistant", "content": f"{salt} answer {i}"})
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": f"{salt} last question"})
    return {"model": "claude-opus-5", "max_tokens": 64, "system": f"{salt} system", "messages": messages}


def _tool_result(megabytes: float) -> dict[str, Any]:
    payload = uuid.uuid4().hex + "r" * int(megabytes * 1_000_000)
    return {
        "model": "claude-opus-5",
        "max_tokens": 64,
        "tools": [{"name": "read_file", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "read it"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "tu_1", "name": "read_file", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": payload}]},
        ],
    }


def _seconds(make: Callable[[], dict[str, Any]]) -> float:
    """Best of three first-turn rewrites (through a session, as a patched call does).

    The cyclic garbage collector is paused while timing, as ``timeit`` does: its full passes scan
    the whole heap of the test process, whose size depends on every test that ran before, and
    would measure the suite rather than telos' own scaling.
    """
    best = float("inf")
    gc.collect()
    paused = gc.isenabled()
    gc.disable()
    try:
        for _ in range(3):
            body = make()
            session = Session(f"scale-{uuid.uuid4().hex}", store=MemoryStore())
            started = time.perf_counter()
            runtime_of(session).prepare_request("anthropic", body, PrepareOptions(engine="anthropic"))
            prepare("anthropic", body, PrepareOptions(engine="anthropic"))
            best = min(best, time.perf_counter() - started)
    finally:
        if paused:
            gc.enable()
    return best


@pytest.mark.parametrize(
    ("what", "make", "small", "large"),
    [
        ("messages", _conversation, 1_250, 5_000),
        ("tool-result-megabytes", _tool_result, 2.5, 10.0),
    ],
)
@pytest.mark.timed
def test_size_scales_linearly(
    what: str, make: Callable[[Any], dict[str, Any]], small: Any, large: Any
) -> None:
    t_small = _seconds(lambda: make(small))
    t_large = _seconds(lambda: make(large))
    # 4x the size: linear is ~4x, quadratic 16x. Generous for a loaded CI machine.
    assert t_large < max(10 * t_small, 0.05), (
        f"{what}: {small} took {t_small:.3f}s, {large} took {t_large:.3f}s"
    )
    assert t_large < 3.0


@pytest.mark.timed
@pytest.mark.parametrize("case", ["10MB-tool-result", "5000-messages"])
def test_huge_requests_go_through_the_patched_sdk_intact(case: str) -> None:
    body = _tool_result(10.0) if case == "10MB-tool-result" else _conversation(5_000)
    wire = Wire()
    telos_wrap.patch(strict=True)
    started = time.perf_counter()
    client_for("anthropic", wire).messages.create(**body)
    elapsed = time.perf_counter() - started
    sent = wire.bodies[-1]
    assert len(sent["messages"]) == len(body["messages"])
    if case == "10MB-tool-result":
        assert sent["messages"][-1]["content"][0]["content"] == body["messages"][-1]["content"][0]["content"]
    else:
        assert sent["messages"][-1]["content"][0]["text"].endswith("last question")
    assert elapsed < 5.0, f"{case} took {elapsed:.2f}s"


# -- malformed shapes: the request the SDK built, or a rewrite that keeps every line ---------------------


def _leaves(value: Any) -> list[str]:
    """Every string in ``value`` (dict keys excluded), depth first."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [leaf for inner in value.values() for leaf in _leaves(inner)]
    if isinstance(value, (list, tuple)):
        return [leaf for inner in value for leaf in _leaves(inner)]
    return []


def _lines_reach_the_wire(kwargs: dict[str, Any], sent: dict[str, Any]) -> None:
    """Every non-empty line of every string the caller passed is in a string the wire carries."""
    wire_text = "\x00".join(_leaves(sent))
    for leaf in _leaves(
        {key: kwargs[key] for key in ("system", "messages", "instructions", "input") if key in kwargs}
    ):
        for line in leaf.splitlines():
            assert not line.strip() or line in wire_text, f"caller text missing on the wire: {line[:60]!r}"


_CLOCK = "Current time: 2026-11-21T10:00:00"
_WORDS = st.text(alphabet="abcdefghij ", min_size=1, max_size=12).map(lambda s: f"w-{s}")
#: Values of a wrong type, at any level.
_ODD = st.one_of(
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.just({}),
    st.just([]),
    _WORDS.map(lambda w: {"x": w}),
)


def _odd_block(api: str) -> st.SearchStrategy[Any]:
    text_type = "input_text" if api == "responses" else "text"
    return st.one_of(
        _ODD,
        _WORDS,  # a bare string where a block belongs
        _WORDS.map(lambda w: {"text": w}),  # no type
        st.tuples(st.sampled_from(["txet", "Text", "tool_call", "imagee", ""]), _WORDS).map(
            lambda kw: {"type": kw[0], "text": kw[1]}
        ),  # unknown type
        _ODD.map(lambda v: {"type": text_type, "text": v}),  # text of a wrong type
    )


def _odd_message(api: str) -> st.SearchStrategy[Any]:
    """One malformed message (or item) holding caller text."""
    role = "user"
    return st.one_of(
        _ODD,
        st.just({"role": role}),  # no content
        _ODD.map(lambda v: {"role": role, "content": v}),  # content of a wrong type
        st.tuples(st.sampled_from(["bogus", "User", "tool_x", "model"]), _WORDS).map(
            lambda rw: {"role": rw[0], "content": rw[1]}
        ),  # unknown role
        st.lists(_odd_block(api), min_size=1, max_size=3).flatmap(
            lambda blocks: _WORDS.map(
                lambda w: {
                    "role": role,
                    "content": [{"type": "input_text" if api == "responses" else "text", "text": w}, *blocks],
                }
            )
        ),
        # Responses: the server may hold the call an output answers, so an orphan is not refused there.
        _WORDS.map(lambda w: _orphan("anthropic" if api == "responses" else api, w)),
    )


def _orphan(api: str, text: str) -> dict[str, Any]:
    """A tool result answering no call."""
    if api == "anthropic":
        return {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_none", "content": text}],
        }
    if api == "openai":
        return {"role": "tool", "tool_call_id": "call_none", "content": text}
    return {"type": "function_call_output", "call_id": "call_none", "output": text}


def _malformed_request(api: str, odd: Any, where: int) -> dict[str, Any]:
    sdk = "responses" if api == "responses" else api
    kwargs = kwargs_for(sdk)
    key = "input" if api == "responses" else "messages"
    items = kwargs[key]
    if api == "anthropic":
        kwargs["system"] = f"You are terse.\n{TOOL_MANUAL}{_CLOCK}"
    items.insert(min(where, len(items)), odd)
    return kwargs


def _send(api: str, kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
    wire = Wire()
    client = client_for("openai" if api == "responses" else api, wire)
    try:
        if api == "anthropic":
            client.messages.create(**copy.deepcopy(kwargs))
        elif api == "openai":
            client.chat.completions.create(**copy.deepcopy(kwargs))
        else:
            client.responses.create(**copy.deepcopy(kwargs))
        error = None
    except Exception as exc:
        error = type(exc)
    return error, wire.bodies


@pytest.mark.parametrize("api", ["anthropic", "openai", "responses"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_malformed_request_goes_out_as_the_sdk_built_it(api: str, data: st.DataObject) -> None:
    """Malformed shapes at any position: the patched call sends exactly the SDK's own body (a counted,
    logged fallback), and no line of caller text is ever missing from the wire."""
    odd = data.draw(_odd_message(api), label="odd")
    where = data.draw(st.integers(min_value=0, max_value=4), label="where")
    kwargs = _malformed_request(api, odd, where)
    telos_wrap.unpatch()
    unpatched = _send(api, kwargs)
    failopen.reset_failures()
    telos_wrap.patch()
    try:
        patched = _send(api, kwargs)
    finally:
        telos_wrap.unpatch()
    assert patched[0] is unpatched[0], "the same outcome (the SDK's own error, or the vendor's answer)"
    for sent in patched[1]:
        _lines_reach_the_wire(kwargs, sent)
    passthrough = api == "responses" and isinstance(odd, dict) and "type" not in odd and "role" not in odd
    if patched[1] and not passthrough:  # (a typeless, roleless Responses item: a documented passthrough)
        assert patched[1] == unpatched[1], "sent exactly as the SDK built it"
        assert telos_wrap.failure_counts().get("lift", 0) >= 1, "the fallback is counted"


@pytest.mark.parametrize(
    ("api", "case"),
    [
        ("anthropic", {"role": "user"}),
        ("anthropic", {"role": "user", "content": 5}),
        ("anthropic", {"role": "user", "content": [{"type": "txet", "text": "qzx-secret"}]}),
        ("anthropic", _orphan("anthropic", "qzx-secret")),
        ("openai", {"role": "user"}),
        ("openai", {"role": "user", "content": 5}),
        ("openai", {"role": "user", "content": [{"type": "txet", "text": "qzx-secret"}]}),
        ("openai", _orphan("openai", "qzx-secret")),
        ("responses", {"role": "user", "content": 5}),
        ("responses", {"role": "user", "content": [{"type": "txet", "text": "qzx-secret"}]}),
    ],
)
def test_the_issue_cases_keep_the_clock_line_and_log_once(
    api: str, case: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    kwargs = _malformed_request(api, case, 99)
    telos_wrap.patch(strict=True)  # a malformed request is the vendor's to answer, even under strict
    with caplog.at_level("WARNING", logger="telos_wrap"):
        _, sent = _send(api, kwargs)
        _send(api, kwargs)
    assert _CLOCK in json.dumps(sent[-1]), "the clock line is where the caller put it"
    assert telos_wrap.failure_counts() == {"lift": 2}
    # (An older SDK line also logs, once, the entry points it lacks: not about this request.)
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "telos_wrap" and "not present in this SDK version" not in r.getMessage()
    ]
    assert len(lines) == 1, lines
    assert "sent the request as the SDK built it" in lines[0] and (
        "messages[" in lines[0] or "input[" in lines[0]
    )
    assert "qzx" not in lines[0], "no caller text in the log"


def test_the_known_block_types_are_the_sdks() -> None:
    """The lift's list of Anthropic block types is the SDK's (GA and beta): a type a newer SDK adds
    fails here, so it is listed (until then such a request is sent as built). Checked against the
    newest SDK line: an older line defines fewer types, which the lift reads all the same."""
    import typing

    import anthropic

    if anthropic.__version__.startswith("0."):
        pytest.skip("the 0.x SDK line defines fewer block types; the list follows the newest line")

    from anthropic.types.beta.beta_content_block_param import BetaContentBlockParam
    from anthropic.types.content_block_param import ContentBlockParam

    from telos_wrap.lift.readable import ANTHROPIC_BLOCK_TYPES

    def literals(union: Any) -> set[str]:
        found: set[str] = set()
        for member in typing.get_args(union):
            if not isinstance(member, type):  # a nested (Annotated) union: the response blocks
                found |= literals(typing.get_args(member)[0])
                continue
            kind = (
                typing.get_type_hints(member, include_extras=True).get("type")
                if member.__module__.endswith("_param")
                else None
            )
            if kind is None:  # a response model (pydantic): its ``type`` field's annotation
                field = getattr(member, "model_fields", {}).get("type")
                kind = field.annotation if field is not None else None
            for arg in typing.get_args(kind):
                found.update(value for value in (typing.get_args(arg) or (arg,)) if isinstance(value, str))
        return found

    assert literals(ContentBlockParam) | literals(BetaContentBlockParam) == set(ANTHROPIC_BLOCK_TYPES)


def test_a_well_formed_request_is_still_rewritten() -> None:
    """The check refuses only what it cannot read: the reference requests are rewritten, no fallback."""
    telos_wrap.patch(strict=True)
    for api in ("anthropic", "openai", "responses"):
        kwargs = kwargs_for("responses" if api == "responses" else api)
        error, sent = _send(api, kwargs)
        assert error is None
        telos_wrap.unpatch()
        _, unpatched = _send(api, kwargs)
        telos_wrap.patch(strict=True)
        assert sent != unpatched, api
        _lines_reach_the_wire(kwargs, sent[-1])
    assert telos_wrap.failure_counts() == {}
