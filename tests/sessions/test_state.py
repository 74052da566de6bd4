"""Durable state: JSON only, hashes not copies, bounded size; the in-memory store."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from telos_wrap.errors import StoreConflictError
from telos_wrap.ir.canon import canonical_json
from telos_wrap.pipeline import PrepareOptions
from telos_wrap.sessions import MemoryStore, Session, SessionState
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.durable.state import ints, pack_ints, unpack_ints
from telos_wrap.sessions.stores.store import Versioned
from telos_wrap.sessions.sync import known
from telos_wrap.sessions.turns.turn import run_turn


def _long_conversation(turns: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for t in range(turns):
        messages.append({"role": "user", "content": f"Turn {t}: please look at file {t}.py " + "x" * 200})
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Reading {t}.py"},
                    {"type": "tool_use", "id": f"tu_{t}", "name": "read", "input": {"path": f"{t}.py"}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"tu_{t}", "content": "y" * 400}],
            }
        )
        messages.append({"role": "assistant", "content": f"Done with {t}.py " + "z" * 100})
    messages.append({"role": "user", "content": "And now?"})
    return {"model": "claude-opus-4-8", "max_tokens": 64, "system": "You are a coder.", "messages": messages}


def test_state_of_a_1000_turn_session_is_small_json_without_the_conversation() -> None:
    body = _long_conversation(1000)
    options = PrepareOptions(engine="anthropic", session_id="big")
    state = SessionState(session_id="big")
    for now in (1.0, 2.0):
        state = run_turn(state, "anthropic", body, options, pins={}, now=now).state
    text = state.dumps()
    assert len(text.encode()) < 1_000_000
    assert "please look at file" not in text and "y" * 50 not in text  # hashes, not copies
    assert SessionState.loads(text) == state
    assert json.loads(text)["requests"] == 2
    assert text == canonical_json(state.to_json()), "the fast writer emits the canonical text"


def test_states_of_every_shape_are_written_canonically_and_read_back() -> None:
    body = _long_conversation(3)
    options = PrepareOptions(engine="anthropic", session_id="shapes")
    empty = SessionState(session_id="shapes")
    turned = run_turn(empty, "anthropic", body, options, pins={}, now=1.0).state
    # Written only when set: fallbacks, and the writers' applied marks (sessions/durable/merge.py).
    marked = replace(turned, fallbacks=2, applied={"9f2c4e1a0b3d": 7, "0a1b2c3d4e5f": 1})
    shapes = (empty, turned, replace(turned, last=None), replace(turned, app=None, pins={"a": "b"}), marked)
    for state in shapes:
        text = state.dumps()
        assert text == canonical_json(state.to_json())
        assert SessionState.loads(text) == state
        assert SessionState.loads(text).dumps() == text


def test_integer_arrays_are_packed_and_schema_1_lists_still_read() -> None:
    values = ints((0, 1, 7, 2**16, 2**32 - 1))
    assert unpack_ints(pack_ints(values)) == values
    body = _long_conversation(2)
    state = run_turn(
        SessionState(session_id="old"),
        "anthropic",
        body,
        PrepareOptions(engine="anthropic"),
        pins={},
        now=1.0,
    ).state
    assert state.last is not None
    data = state.to_json()
    assert isinstance(data["last"]["sizes"], str)
    data["schema"] = 1
    data["last"]["sizes"] = list(state.last.sizes)
    data["last"]["msg_blocks"] = list(state.last.msg_blocks)
    assert SessionState.from_json(data) == state
    data["schema"] = 99
    with pytest.raises(ValueError, match="upgrade telos_wrap, or start a new session id"):
        SessionState.from_json(data)


def test_memory_store_compare_and_set_and_lru() -> None:
    store = MemoryStore(max_sessions=2)
    a = store.compare_and_set("a", 0, "1")
    assert a is not None
    assert store.compare_and_set("a", 0, "x") is None
    assert store.compare_and_set("a", a, "y") not in (None, a)
    assert store.compare_and_set("b", 0, "2") is not None
    assert store.load("a") is not None  # a is now the most recent
    assert store.compare_and_set("c", 0, "3") is not None
    assert store.load("b") is None and len(store) == 2
    # Revisions are never reused: "b" created again cannot take a revision any session had.
    seen = {a, store.load("a").revision, store.load("c").revision}
    assert store.compare_and_set("b", 0, "4") not in seen
    with pytest.raises(ValueError):
        MemoryStore(max_sessions=0)


def test_memory_store_swap_state_encodes_on_first_load_and_keeps_compare_and_set() -> None:
    store = MemoryStore()
    one = SessionState(session_id="s", requests=1)
    two = SessionState(session_id="s", requests=2)
    first = store.swap_state("s", 0, one)
    assert first.revision is not None and store._entries["s"].text is None  # not encoded yet
    lost = store.swap_state("s", 0, two)  # a stale expected revision loses, and sees the current state
    assert lost.revision is None and lost.current == Versioned(first.revision, one.dumps())
    assert store._entries["s"].text == one.dumps()  # encoded once, by that load
    second = store.swap_state("s", first.revision, two)
    assert second.revision not in (None, first.revision)
    assert store.load("s") == Versioned(second.revision, two.dumps())
    # A text written with compare_and_set replaces the kept state object.
    third = store.compare_and_set("s", second.revision, "{}")
    assert third is not None and store._entries["s"].state is None
    assert store.load("s") == Versioned(third, "{}")


def test_reading_a_state_this_session_wrote_to_a_memory_store_parses_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sess = Session("kept", store=MemoryStore()).bind()  # no tenant signal: the id's own key
    sess.pin("doc", "a long document")  # written with swap_state: not encoded
    parsed: list[str] = []
    loads = SessionState.loads

    def counted(text: str) -> SessionState:
        parsed.append(text)
        return loads(text)

    monkeypatch.setattr(SessionState, "loads", staticmethod(counted))
    assert sess.state.pins.keys() == {"doc"} and parsed == []
    # Another Session object on the same id and tenant in this process shares what the process
    # knows of the session (``sync/known.py``): it parses nothing either.
    again = Session("kept", store=sess.store).bind()
    assert again.state == sess.state and parsed == []
    # A process that knows nothing of the session (its last-known table dropped it) parses it.
    known.clear()
    other = Session("kept", store=sess.store).bind()
    assert other.state == sess.state and len(parsed) == 1


class _AlwaysLosing(MemoryStore):
    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        return None


def test_a_store_that_always_loses_the_race_raises_store_conflict() -> None:
    sess = Session("lost", store=_AlwaysLosing()).bind()
    with pytest.raises(StoreConflictError):
        sess.pin("doc", "text")
    assert (
        runtime_of(sess).note_passthrough("anthropic", "anthropic", {}) == -1
    )  # never raises on the request path
