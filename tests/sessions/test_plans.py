"""The store plans without a store: a plan is driven by hand, answer by answer (sans-IO).

``sessions.sync.plans.StateSync.plan`` yields the store operations it needs and decides on their
answers; these tests are the store, so every branch of the protocol is reachable in a few lines:
one round trip when nobody else wrote, building on another worker's write, recognizing a write of
this process whose answer was lost, and keeping state in-process while the breaker is open.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from typing import Any

import pytest

from telos_wrap.errors import StoreUnavailableError
from telos_wrap.sessions.durable.merge import marked
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.stores.breaker import StoreBreaker
from telos_wrap.sessions.stores.store import Swapped, Versioned
from telos_wrap.sessions.sync.plans import LOAD, Failed, GetBlob, StateSync, StoreOp, Swap, unchanged


class Host:
    """A session's side of the plans: one store object, a breaker on a manual clock, a log."""

    def __init__(self) -> None:
        self.store = object()
        self.now = 0.0
        self.breaker = StoreBreaker(backoff=5.0, clock=lambda: self.now)
        self.events: list[tuple[str, int, str]] = []
        self.held = 0

    def current_store(self) -> object:
        return self.store

    def store_breaker(self) -> StoreBreaker:
        return self.breaker

    def store_inline(self) -> bool:
        return False

    def store_event(self, kind: str, state: SessionState, reason: str) -> None:
        self.events.append((kind, state.requests, reason))

    def hold(self) -> None:
        self.held += 1

    def release(self) -> None:
        self.held = 0


def count(state: SessionState) -> tuple[SessionState, int]:
    """A step: one more request; the result is the request's index."""
    return replace(state, requests=state.requests + 1), state.requests


def first(plan: Generator[StoreOp, Any, Any]) -> StoreOp:
    return next(plan)


def answer(plan: Generator[StoreOp, Any, Any], value: Any) -> Any:
    """Send ``value`` into ``plan``: the next operation it yields, or ``("done", result)``."""
    try:
        return plan.send(value)
    except StopIteration as stop:
        return ("done", stop.value)


@pytest.fixture
def host() -> Host:
    return Host()


def test_one_round_trip_once_the_state_is_known(host: Host) -> None:
    sync = StateSync("s1", host)
    plan = sync.plan(count, strict=False)
    assert first(plan) is LOAD  # a session this process has not seen: one read, the first time
    swap = answer(plan, None)
    assert isinstance(swap, Swap) and swap.expected == 0 and swap.state.requests == 1
    assert answer(plan, Swapped(11)) == ("done", 0)

    plan = sync.plan(count, strict=False)
    swap = first(plan)  # no read: the revision this process wrote is tried directly
    assert isinstance(swap, Swap) and swap.expected == 11 and swap.state.requests == 2
    assert answer(plan, Swapped(12)) == ("done", 1)
    assert sync.view() == swap.state and host.events == []


def test_a_lost_compare_and_set_builds_on_the_other_workers_state(host: Host) -> None:
    sync = StateSync("s1", host)
    sync.bind_store()  # the store this state belongs to (a first plan binds it itself)
    sync.adopt(Versioned(3, SessionState(session_id="s1", requests=4).dumps()))
    plan = sync.plan(count, strict=False)
    swap = first(plan)
    assert isinstance(swap, Swap) and swap.expected == 3
    theirs = SessionState(session_id="s1", requests=9)
    retry = answer(plan, Swapped(None, Versioned(8, theirs.dumps())))
    assert isinstance(retry, Swap) and retry.expected == 8 and retry.state.requests == 10
    assert answer(plan, Swapped(13)) == ("done", 9)


def test_a_write_whose_answer_was_lost_is_recognized_when_it_landed(host: Host) -> None:
    sync = StateSync("s1", host)
    sync.bind_store()  # the store this state belongs to (a first plan binds it itself)
    sync.adopt(None)
    plan = sync.plan(count, strict=False)
    swap = first(plan)
    assert isinstance(swap, Swap)
    assert answer(plan, Failed(StoreUnavailableError("timeout"), 0.0)) == ("done", 0)
    assert sync.dirty is not None and host.held == 1  # kept here until it can be written

    host.now = 10.0  # the breaker's window is over: the next call probes the store
    plan = sync.plan(count, strict=False)
    retry = first(plan)
    assert isinstance(retry, Swap) and retry.expected == 0 and retry.state.requests == 2
    # The store holds the first write after all (only its answer was lost): build on it, drop nothing.
    again = answer(plan, Swapped(None, Versioned(21, swap.text)))
    assert isinstance(again, Swap) and again.expected == 21 and again.state.requests == 2
    assert answer(plan, Swapped(22)) == ("done", 1)
    assert [kind for kind, _, _ in host.events] == ["reconciled"] and host.held == 0


def test_a_write_sent_again_after_another_worker_built_on_it_is_recognized_as_landed(host: Host) -> None:
    """The write landed, its answer was lost, and the client sent it again (redis-py's retry) after
    another worker had written on top: the store answers "moved on", and its mark for this worker
    names this very write. Counted once (before the fix it was applied again: test_outage_machine
    with the background flush running every 5 ms stored 30 requests for 29 calls)."""
    sync = StateSync("s1", host)
    sync.bind_store()
    sync.adopt(None)
    plan = sync.plan(count, strict=False)
    swap = first(plan)
    assert isinstance(swap, Swap) and swap.state.requests == 1
    # Another worker's write on top of it: one more request of its own, this worker's mark carried.
    other = marked(replace(swap.state, requests=2), "another-worker", 1)
    assert answer(plan, Swapped(None, Versioned(6, other.dumps()))) == ("done", 0)
    view = sync.view()
    assert view is not None and view.requests == 2 and sync.dirty is None
    # The next request builds on the store's state at its revision: one write, nothing counted twice.
    plan = sync.plan(count, strict=False)
    nxt = first(plan)
    assert isinstance(nxt, Swap) and nxt.expected == 6 and nxt.state.requests == 3


def test_while_the_breaker_is_open_nothing_is_yielded_and_the_state_stays_here(host: Host) -> None:
    sync = StateSync("s1", host)
    host.breaker.failure(StoreUnavailableError("down"))
    plan = sync.plan(count, strict=False)
    assert answer(plan, None) == ("done", 0)  # no store operation at all
    assert sync.dirty is not None and sync.dirty.requests == 1 and host.held == 1
    plan = sync.plan(unchanged, strict=False, readonly=True)
    assert answer(plan, None) == ("done", None)


def test_pinned_texts_are_fetched_once_and_then_cached(host: Host) -> None:
    sync = StateSync("s1", host)
    stored = SessionState(session_id="s1", pins={"doc": "k1"})
    sync.bind_store()
    sync.adopt(Versioned(2, stored.dumps()))
    plan = sync.plan(unchanged, strict=False, readonly=True)
    assert first(plan) == GetBlob("k1")
    assert answer(plan, "the text") == ("done", None)
    assert sync.cached_pins(stored) == {"doc": "the text"}
    assert answer(sync.plan(unchanged, strict=False, readonly=True), None) == ("done", None)
