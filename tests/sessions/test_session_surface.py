"""``Session``'s public surface is exactly what docs/sessions.md documents (issue 45, item 1).

The request path (prepare a request, record a pass-through, add usage, bind to a call's tenant) is
the session's runtime (``sessions/runtime.py``), reached through ``core.runtime_of``: a new public
name on ``Session`` must be added to the list below and to the table in docs/sessions.md ("The
``Session`` object"), or this test fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import telos_wrap
from telos_wrap.sessions import MemoryStore, Session
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.runtime import SessionRuntime

DOCUMENTED = [
    "aerase",
    "aflush",
    "bind",
    "bound",
    "cache_breaks",
    "erase",
    "explain",
    "flush",
    "fold",
    "forget_volatility",
    "hints",
    "id",
    "implicit",
    "mark",
    "pin",
    "refresh",
    "scope",
    "state",
    "stats",
    "store",
    "store_key",
    "strict",
    "volatile_spans",
]

#: The request path: on the runtime, never on the user's handle.
REQUEST_PATH = [
    "ahooks",
    "bind_tenant",
    "hooks",
    "note_passthrough",
    "note_passthrough_async",
    "note_passthrough_deferred",
    "prepare_request",
    "prepare_request_async",
    "record_usage",
    "request_record",
    "serves",
]

_DOCS = Path(__file__).resolve().parents[2] / "docs" / "sessions.md"


def test_the_public_names_of_session_are_the_documented_ones() -> None:
    assert [n for n in dir(Session) if not n.startswith("_")] == DOCUMENTED


def test_every_public_name_is_in_the_session_table_of_the_docs() -> None:
    text = _DOCS.read_text(encoding="utf-8")
    section = text.split("## The `Session` object", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(?:await )?s\.(\w+)", section))
    assert named == set(DOCUMENTED)


def test_the_request_path_is_the_runtimes_only() -> None:
    for name in REQUEST_PATH:
        assert callable(getattr(SessionRuntime, name)), name
        assert not hasattr(Session, name), name


def test_a_session_takes_no_new_attribute() -> None:
    s = Session("surface", store=MemoryStore())
    with pytest.raises(AttributeError):
        s.prepare_request = None  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        s.strict = True  # type: ignore[misc]


def test_the_handle_and_its_runtime_see_one_state() -> None:
    store = MemoryStore()
    s = telos_wrap.session("surface-state", store=store, scope="global")
    runtime = runtime_of(s)
    assert runtime_of(s) is runtime and runtime.id == s.id == "surface-state"
    index = runtime.note_passthrough("anthropic", "anthropic", {"messages": []})
    runtime.record_usage(index, telos_wrap.UsageReport("anthropic", 10, 0, 0, 1))
    assert s.stats.requests == 1 and s.state.requests == 1
    assert runtime.request_record(index) is not None
    assert "request 0" in s.explain(index)
    s.pin("doc", "a pinned document")
    assert "doc" in s.state.pins
    s.erase()
    assert s.state.requests == 0 and runtime.request_record(index) is None
