"""Fleet learning's store I/O is written once (issue 45): each store conversation of
``learning/fleet_io.py`` is a plan, and its sync and async entry points are thin shells over it.

Here every plan is driven by both drivers against stores that record what they are asked: the sync
driver (the store's sync methods), the async driver on a store with async twins, and the async
driver on a sync-only store (its methods in a thread). The three must ask the store the same
operations in the same order, return the same result and leave the same blobs, also when a store
call fails (fail open: one breaker failure, no facts), and erasure must raise what the store raises
on every driver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from telos_wrap.ir.hints import TelosHints
from telos_wrap.sessions import MemoryStore
from telos_wrap.sessions.learning import fleet as fleet_module
from telos_wrap.sessions.learning import fleet_io
from telos_wrap.sessions.learning.lengths import Lengths
from telos_wrap.sessions.stores.breaker import StoreBreaker, breaker_of
from tests.sessions.test_fleet import skeleton_regex

SPACE, TEMPLATE = "space-1", "template-1"


def _fact(line: int) -> fleet_module.Fact:
    return fleet_module.Fact(
        kind="list",
        block=0,
        lines=2,
        learned_at=1,
        before=skeleton_regex(f"You are helping user {line}."),
        after=skeleton_regex("Rules:"),
        own=(skeleton_regex(f"JOB_1=up (pid 41{line}1)"), skeleton_regex(f"JOB_2=up (pid 41{line}2)")),
    )


class Recording:
    """The blob methods of a store, recorded; ``fail_at``: the call number (0-based) that raises."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.inner = MemoryStore()
        self.breaker = StoreBreaker()
        self.calls: list[tuple[str, str, str]] = []
        self.fail_at = fail_at

    def _record(self, op: str, session_id: str, key: str) -> None:
        if self.fail_at == len(self.calls):
            self.calls.append((op + "!", session_id, key))
            raise ConnectionError("store down")
        self.calls.append((op, session_id, key))

    def get_blob(self, session_id: str, key: str) -> str | None:
        self._record("get", session_id, key)
        return self.inner.get_blob(session_id, key)

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        self._record("put", session_id, key)
        self.inner.put_blob(session_id, key, text)

    def blobs(self) -> dict[tuple[str, str], str | None]:
        return {(sid, key): self.inner.get_blob(sid, key) for op, sid, key in self.calls}


class RecordingAsync(Recording):
    """``Recording`` with the async twins (a ``RedisStore``'s shape)."""

    async def aget_blob(self, session_id: str, key: str) -> str | None:
        await asyncio.sleep(0)
        return self.get_blob(session_id, key)

    async def aput_blob(self, session_id: str, key: str, text: str) -> None:
        await asyncio.sleep(0)
        self.put_blob(session_id, key, text)

    # The rest of ``AsyncSessionStore`` (never asked by the fleet's plans).
    async def aload(self, session_id: str) -> Any:
        raise AssertionError("not a blob operation")

    async def acompare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        raise AssertionError("not a blob operation")

    async def adelete(self, session_id: str) -> None:
        raise AssertionError("not a blob operation")


def _drive(kind: str, call: Callable[[Any, str], Any], store: Recording) -> Any:
    """Run ``call(store, driver)`` with driver ``sync`` or ``async``."""
    if kind == "sync":
        return call(store, "sync")
    return asyncio.run(call(store, "async"))


_BODY = {"system": "You are the support assistant of Acme.\nBe brief.\n" + "Rule. " * 200}


def _publish(store: Any, driver: str) -> Any:
    body, hints = _BODY, TelosHints()
    facts = (_fact(0), _fact(1))
    plan = fleet_io._publish_plan(store, SPACE, TEMPLATE, facts, ("p1", "p2"), Lengths((2, 1)), "conv-1")
    if driver == "sync":
        fleet_io.run_plan(plan, store)
        return fleet_io.publish_learned(store, "anthropic", body, hints, facts, None, "conv-2")

    async def run() -> None:
        await fleet_io.arun_plan(plan, store)
        await fleet_io.apublish_learned(store, "anthropic", body, hints, facts, None, "conv-2")

    return run()


def _first_request(store: Any, driver: str) -> Any:
    args = (store, "anthropic", _BODY, TelosHints(), None, "conv-3")
    if driver == "sync":
        return fleet_io.fleet_for(*args)
    return fleet_io.afleet_for(*args)


def _lookup(store: Any, driver: str) -> Any:
    plan = fleet_io._lookup_plan(store, SPACE, TEMPLATE)
    return fleet_io.run_plan(plan, store) if driver == "sync" else fleet_io.arun_plan(plan, store)


def _erase(store: Any, driver: str) -> Any:
    if driver == "sync":
        return fleet_io.erase(store, "conv-1")
    return fleet_io.aerase(store, "conv-1")


_STEPS = (_publish, _first_request, _lookup, _erase)
_DRIVERS = (("sync", Recording), ("async", RecordingAsync), ("async", Recording))


def _story(kind: str, store: Recording) -> list[Any]:
    return [_drive(kind, step, store) for step in _STEPS]


def test_every_driver_asks_the_store_the_same_and_ends_the_same() -> None:
    runs = []
    for kind, made in _DRIVERS:
        store = made()
        results = _story(kind, store)
        runs.append((results, store.calls, store.blobs()))
    first = runs[0]
    assert first[0][2].facts and first[0][3] == 1  # the story publishes facts, then erases one entry
    assert any(op == "put" for op, _, _ in first[1])
    for other in runs[1:]:
        assert other == first


@pytest.mark.parametrize("fail_at", range(6))
def test_a_failing_store_call_is_handled_the_same_by_every_driver(fail_at: int) -> None:
    """A store that fails at its ``fail_at``-th call: publishing and reading fail open alike (the
    breaker hears of one failure); erasure raises the store's error."""
    outcomes = []
    for kind, made in _DRIVERS:
        store = made(fail_at=fail_at)
        seen: list[Any] = []
        for step in _STEPS:
            store.breaker = StoreBreaker()  # each step starts with a closed breaker
            try:
                seen.append(("ok", _drive(kind, step, store)))
            except ConnectionError:
                seen.append(("raised", step.__name__))
            seen.append(("failures", breaker_of(store).stats().failures))
        outcomes.append((seen, store.calls, store.blobs()))
    assert any("!" in op for op, _, _ in outcomes[0][1])  # the failure happened
    for other in outcomes[1:]:
        assert other == outcomes[0]
