"""Touch only what pays (issue 16): below the minimum cacheable prefix, ``patch()`` sends the SDK's bytes.

A property over generated small requests for every public entry point of both SDKs (``ENTRIES`` and
``RESPONSES_ENTRIES`` of the reliability harness: create, stream, parse, raw / streaming responses,
beta, tool runner, token counts, Responses compact; sync and async). Each request is made twice
through the real SDK over the harness' recording transport: once unpatched, once with the default
``patch(strict=True)``; the body bytes on the wire must be equal. The
generated requests keep what telos would otherwise rewrite (unsorted tool schemas, a clock line in
the system prompt, a ``<system-reminder>`` in the last user turn) and stay far below every minimum in
``docs/engines.md`` (*Minimum cacheable prefix*); the documented exceptions list there is empty.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import telos_wrap

from .harness import ENTRIES, RESPONSES_ENTRIES, Entry, Wire, client_for, kwargs_for

_ALL = (*ENTRIES, *RESPONSES_ENTRIES)
#: Short printable text (the whole request stays a few hundred characters at most).
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=40)


@st.composite
def small_requests(draw: st.DrawFn) -> tuple[Entry, dict[str, Any]]:
    """An entry point and a small request for it, built on the harness' rewrite-bait request."""
    entry = draw(st.sampled_from(_ALL))
    kwargs = kwargs_for(entry.sdk, draw(st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True)))
    for tool in kwargs["tools"]:  # the harness' long tool manual would put the request above the minimum
        described = tool.get("function", tool)
        if "description" in described:
            described["description"] = draw(_TEXT)
    system = draw(_TEXT) + "\nCurrent time: 2026-11-21T10:00:00"
    question = draw(_TEXT) + "\n<system-reminder>be brief</system-reminder>"
    if entry.sdk == "anthropic":
        kwargs["system"] = system
    elif entry.sdk == "openai":
        kwargs["messages"][0]["content"] = system
    else:
        kwargs["instructions"] = system
    turns = kwargs["messages"] if entry.sdk != "responses" else kwargs["input"]
    turns[-1]["content"] = turns[-1]["content"].replace("second question", question, 1)
    if draw(st.booleans()):
        turns[-1]["content"] = (
            [{"type": "text", "text": turns[-1]["content"]}]
            if entry.sdk != "responses"
            else [{"type": "input_text", "text": turns[-1]["content"]}]
        )
    if draw(st.booleans()) and entry.name not in {"parse", "beta_tool_runner"}:
        kwargs["tools"] = list(reversed(kwargs["tools"]))
    return entry, kwargs


def _sent(entry: Entry, kwargs: dict[str, Any]) -> list[tuple[str, bytes]]:
    wire = Wire()
    entry.run(client_for(entry.sdk, wire, is_async=entry.is_async), kwargs)
    return [(sent.path, sent.raw) for sent in wire.sent]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_requests())
def test_below_the_minimum_patch_sends_the_sdks_bytes(case: tuple[Entry, dict[str, Any]]) -> None:
    entry, kwargs = case
    baseline = _sent(entry, kwargs)
    assert baseline, entry.id
    telos_wrap.patch(strict=True)  # the default: only what pays
    try:
        with telos_wrap.session() as session:
            patched = _sent(entry, kwargs)
    finally:
        telos_wrap.unpatch()
    assert patched == baseline, entry.id
    if entry.turn and not entry.count_only:
        # Recorded, and explained: the session says why it left the request as built (below the
        # minimum, or an Anthropic message thread: the beta tool runner sends one).
        why = session.explain(0)
        assert "left untouched" in why, entry.id
        assert ("-token minimum for" in why) or ("message thread" in why), why


def test_without_the_gate_the_same_request_is_rewritten() -> None:
    """Plain ``patch()`` (gate off) places markers on the same small request: the gate is the cause."""
    entry = next(e for e in ENTRIES if e.id == "anthropic-sync-create")
    kwargs = kwargs_for("anthropic")
    baseline = _sent(entry, kwargs)
    telos_wrap.patch(strict=True)
    try:
        with telos_wrap.session():
            patched = _sent(entry, kwargs)
    finally:
        telos_wrap.unpatch()
    assert patched != baseline
    assert b"cache_control" in patched[0][1] and b"cache_control" not in baseline[0][1]
