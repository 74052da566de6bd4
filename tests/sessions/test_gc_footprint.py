"""What a live session leaves for CPython's garbage collector, per turn (issue 14).

A full collection walks every tracked object of the process: in a server holding hundreds of
sessions, what each session keeps is what its event loop waits for (BENCHMARKS.md, "Sessions under
load"). Object counts are deterministic for a given code path, so a budget per turn is a test, not a
timing: it fails when a change makes sessions keep more tracked objects than they do now.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import ManualClock
from telos_wrap.sessions import MemoryStore, Session
from telos_wrap.sessions.core import runtime_of
from tests.canned import anthropic_message, json_response
from tests.sdk_http import sdk_http
from tests.stores import default_store

from .convo import MODEL, messages_for, system_prompt

#: Tracked objects a session keeps per turn (one user and one assistant message added): 19.1-19.2
#: on CPython 3.11 (2026-11-27, this file alone or after other tests; the same at 65b6789): per turn
#: 3.7 dicts, 3.2 tuples, 2.7 lists, 2.1 IR blocks, 2 IR messages, the request's record, explain
#: record and usage report. 23.0 before the explain history and the Anthropic plan's per-message
#: rows were kept as plain tuples, which the collector does not track. The budget was 19, which the
#: file alone exceeded (it passed only after other tests had filled process-wide tables).
BUDGET_PER_TURN = 20
REPLY = json.dumps(
    anthropic_message(
        {
            "input_tokens": 10,
            "output_tokens": 1,
            "cache_read_input_tokens": 1000,
            "cache_creation_input_tokens": 50,
        },
        id="msg_gc",
        model=MODEL,
    )
).encode()


@pytest.fixture
def client() -> Iterator[anthropic.Anthropic]:
    """The real SDK over a transport that keeps nothing (the emulator keeps a log of every body)."""
    reply = sdk_http.MockTransport(lambda request: json_response(REPLY))
    telos_wrap.patch(strict=True, only_what_pays=False)
    try:
        with (
            default_store(MemoryStore()),
            anthropic.Anthropic(api_key="test", http_client=sdk_http.Client(transport=reply)) as sdk,
        ):
            yield sdk
    finally:
        telos_wrap.unpatch()


def _conversation(client: anthropic.Anthropic, session_id: str, turns: int) -> Session:
    clock = ManualClock(1_000.0)
    with telos_wrap.session(session_id, clock=clock.now) as sess:
        for turn in range(turns):
            client.messages.create(
                model=MODEL,
                max_tokens=8,
                system=system_prompt(0, clock_line=False),
                messages=messages_for(turn),
            )
    return sess


def test_a_session_keeps_few_tracked_objects_per_turn(client: anthropic.Anthropic) -> None:
    _conversation(client, "gc-warm-up", 3)  # process-wide caches and lazily built tables first
    sessions, turns = 8, 20
    gc.collect()
    before = len(gc.get_objects())
    held: list[Any] = [_conversation(client, f"gc-{n}", turns) for n in range(sessions)]
    gc.collect()
    per_turn = (len(gc.get_objects()) - before) / (sessions * turns)
    assert per_turn <= BUDGET_PER_TURN, f"{per_turn:.1f} tracked objects per session turn"
    # The explain history of every request is there, and the collector does not track it.
    records = runtime_of(held[0])._records
    assert len(records) == turns
    for record in records.values():
        assert record.explained is not None and record.explained.breakpoints
        assert not gc.is_tracked(record.explained.breakpoints)
        assert not gc.is_tracked(record.explained.records)
