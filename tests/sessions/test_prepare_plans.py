"""The request path is written once (issue 45): each sequence of ``SessionRuntime`` that does store
I/O (preparing a request, the hooks of a call that is not a turn, recording a pass-through,
erasure) is one plan, and its sync and async entry points are thin shells that choose the driver.

Here the same conversations go through the sync entry points and through the async ones (on a store
with async twins, and on a sync-only store, whose methods run in a thread): they must ask the store
the same operations in the same order, prepare the same bodies and fail the same way. And the
first request of a conversation asks the fleet once, also when two async calls on one session
start at the same moment from two threads (each with its own event loop): the check and the set
of "asked" are one step under the session's lock on both paths.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from telos_wrap.errors import TelosStageError
from telos_wrap.pipeline import PrepareOptions, SessionHooks
from telos_wrap.sessions import MemoryStore, Session
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.learning.fleet import FLEET_PREFIX
from telos_wrap.sessions.runtime import SessionRuntime
from telos_wrap.sessions.stores.store import Versioned

from .fleet_app import MODEL, app_system, messages_for

OPTIONS = PrepareOptions(engine="anthropic")


def _body(conv: int, turn: int) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 16,
        "system": app_system(conv, turn),
        "messages": messages_for(turn),
    }


class Recording:
    """A sync-only store (no async twins) that records every operation it is asked, in order:
    ``(operation, entry, blob)``, and the text of each blob written. ``fail``: a predicate on an
    operation that makes it raise ``ConnectionError``."""

    def __init__(self, fail: Callable[[str, str], bool] | None = None) -> None:
        self.inner = MemoryStore()
        self.calls: list[tuple[str, ...]] = []
        self.fail = fail
        self.lock = threading.Lock()

    def _record(self, *call: str) -> None:
        with self.lock:
            self.calls.append(call)
        if self.fail is not None and self.fail(call[0], call[1]):
            raise ConnectionError("store down")

    def load(self, session_id: str) -> Versioned | None:
        self._record("load", session_id)
        return self.inner.load(session_id)

    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        self._record("cas", session_id)
        return self.inner.compare_and_set(session_id, expected, text)

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        self._record("put", session_id, key, text)
        self.inner.put_blob(session_id, key, text)

    def get_blob(self, session_id: str, key: str) -> str | None:
        self._record("get", session_id, key)
        return self.inner.get_blob(session_id, key)

    def delete(self, session_id: str) -> None:
        self._record("delete", session_id)
        self.inner.delete(session_id)

    def fleet_calls(self) -> list[tuple[str, ...]]:
        return [call for call in self.calls if call[1].startswith(FLEET_PREFIX)]


class RecordingAsync(Recording):
    """``Recording`` with the async twins (a ``RedisStore``'s shape): each yields to the loop once."""

    async def aload(self, session_id: str) -> Versioned | None:
        await asyncio.sleep(0)
        return self.load(session_id)

    async def acompare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        await asyncio.sleep(0)
        return self.compare_and_set(session_id, expected, text)

    async def aput_blob(self, session_id: str, key: str, text: str) -> None:
        await asyncio.sleep(0)
        self.put_blob(session_id, key, text)

    async def aget_blob(self, session_id: str, key: str) -> str | None:
        await asyncio.sleep(0)
        return self.get_blob(session_id, key)

    async def adelete(self, session_id: str) -> None:
        await asyncio.sleep(0)
        self.delete(session_id)


def _session(store: Recording, sid: str) -> SessionRuntime:
    return runtime_of(Session(sid, store=store, fleet_learning=True, clock=lambda: 1_000.0))


def _prepare(runtime: SessionRuntime, driver: str, body: dict[str, Any], strict: bool | None = None) -> Any:
    if driver == "sync":
        return runtime.prepare_request("anthropic", body, OPTIONS, strict=strict, tenant="t")
    return asyncio.run(runtime.prepare_request_async("anthropic", body, OPTIONS, strict=strict, tenant="t"))


def _story(driver: str, store: Recording) -> list[Any]:
    """Two conversations of one application (the first pinned a document before its first call,
    carried onto its tenant's entry at that call; it learns the live lines and teaches the fleet;
    the second starts from the fleet's facts), the hooks of a call that is not a turn, a
    pass-through request, and the first conversation's erasure: what each step returned."""
    results: list[Any] = []
    pinned = Session("conv-1", store=store, fleet_learning=True, clock=lambda: 1_000.0)
    pinned.pin("handbook", "The handbook of Example Corp, chapter one.\n" * 40)  # carried at the binding
    first = runtime_of(pinned)
    for turn in range(4):
        index, prepared = _prepare(first, driver, _body(1, turn))
        results.append((index, prepared.body))
    second = _session(store, "conv-2")
    for turn in range(3):
        index, prepared = _prepare(second, driver, _body(2, turn))
        results.append((index, prepared.body))
    assert second.request_record(0) is not None
    if driver == "sync":
        hooks = second.hooks(strict=True)
        passed = second.note_passthrough("anthropic", "anthropic", _body(2, 3))
        first.erase()
    else:

        async def rest() -> tuple[SessionHooks, int]:
            hooks = await second.ahooks(strict=True)
            passed = await second.note_passthrough_async("anthropic", "anthropic", _body(2, 3))
            await first.aerase()
            return hooks, passed

        hooks, passed = asyncio.run(rest())
    results.append((type(hooks).__name__, passed, second.request_indices()))
    results.append(second.read().requests)
    return results


_DRIVERS = (("sync", Recording), ("async", RecordingAsync), ("async", Recording))


def test_sync_and_async_ask_the_store_the_same_and_prepare_the_same() -> None:
    runs = []
    for driver, made in _DRIVERS:
        store = made()
        runs.append((_story(driver, store), store.calls))
    results, calls = runs[0]
    # The story does what it says: the fleet taught the second conversation, erasure rewrote the
    # fleet's entry and deleted the first conversation's state.
    assert any(call[0] == "put" and call[1].startswith(FLEET_PREFIX) for call in calls)
    entry = next(call[1] for call in calls if call[0] == "cas")  # the first conversation's entry
    assert ("put", entry) == calls[calls.index(("load", entry)) - 1][:2]  # its pin, carried first
    assert calls[-1] == ("load", "conv-2@t:" + entry.split("@t:")[1]) and ("delete", entry) in calls
    assert results[-2] == ("StateHooks", 3, [0, 1, 2, 3])
    for other_results, other_calls in runs[1:]:
        assert other_results == results
        assert other_calls == calls


@pytest.mark.parametrize(("driver", "made"), _DRIVERS)
def test_a_failing_store_fails_the_same_on_every_driver(driver: str, made: type[Recording]) -> None:
    # The session's state cannot be read: strict raises the stage error, else the turn runs on
    # this process's state (and the fleet's failed read is no facts).
    store = made(fail=lambda op, key: not key.startswith(FLEET_PREFIX))
    with pytest.raises(TelosStageError) as raised:
        _prepare(_session(store, "conv-1"), driver, _body(1, 0), strict=True)
    assert raised.value.stage == "session.store"
    store = made(fail=lambda op, key: True)
    index, prepared = _prepare(_session(store, "conv-2"), driver, _body(1, 0), strict=False)
    assert index == 0 and prepared.body["system"]


class _Gate:
    """A truth value that holds the first thread asking it until a second thread asks it (at most
    ``wait`` seconds): put as a session's ``fleet_learning``, it holds a first request between
    reading "not asked yet" and setting "asked", where a second request of another thread would
    also read "not asked yet" unless that check and set are one step under the session's lock."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self.calls = 0
        self._lock = threading.Lock()
        self._second = threading.Event()

    def __bool__(self) -> bool:
        with self._lock:
            self.calls += 1
            calls = self.calls
        if calls == 1:
            self._second.wait(self.wait)
        elif calls == 2:
            self._second.set()
        return True


def _fleet_asked(driver: str, concurrent: bool) -> list[tuple[str, ...]]:
    """The fleet operations of a conversation's first request, made by one call or by two calls at
    once from two threads (each with its own event loop when async)."""
    store = RecordingAsync()
    runtime = _session(store, "conv-1")
    runtime.fleet_learning = _Gate(1.0 if concurrent else 0.0)  # type: ignore[assignment]
    failed: list[BaseException] = []

    def call() -> None:
        try:
            _prepare(runtime, driver, _body(1, 0))  # the same body: the second learns nothing
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=call) for _ in range(2 if concurrent else 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not failed and not any(thread.is_alive() for thread in threads)
    return store.fleet_calls()


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_two_first_requests_at_once_ask_the_fleet_once(driver: str) -> None:
    alone = _fleet_asked(driver, concurrent=False)
    assert alone and alone[0][0] == "get"  # one request alone reads the application's facts
    assert _fleet_asked(driver, concurrent=True) == alone


class Probing(RecordingAsync):
    """Records, at each store call, whether another thread could take the session's lock then."""

    def __init__(self) -> None:
        super().__init__()
        self.session_lock: Any = None
        self.free: list[tuple[str, bool]] = []

    def _record(self, *call: str) -> None:
        got: list[bool] = []

        def take() -> None:
            if self.session_lock.acquire(timeout=0.05):
                got.append(True)
                self.session_lock.release()

        probe = threading.Thread(target=take)
        probe.start()
        probe.join()
        self.free.append((call[0], bool(got)))
        super()._record(*call)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_the_lock_is_held_over_store_calls_only_on_the_sync_path(driver: str) -> None:
    # The sync path holds the session's lock over its store calls (as it always did); the async one
    # takes it around the steps between them, never across an await (the fleet's read, the load and
    # the compare-and-set of a first request, and the publish of a later one that learned).
    store = Probing()
    runtime = _session(store, "conv-1")
    store.session_lock = runtime.lock
    for turn in range(2):
        _prepare(runtime, driver, _body(1, turn))
    free = [taken for _, taken in store.free]
    # The second request's compare-and-set, then the publish of what it learned (a read and a write).
    turn = max(i for i, (op, _) in enumerate(store.free) if op == "cas")
    assert [op for op, _ in store.free[turn:]][:3] == ["cas", "get", "put"]
    assert {op for op, _ in store.free[:turn]} == {"get", "put", "load", "cas"}
    if driver == "sync":  # held over the fleet's read and the turns; let go before publishing
        assert free == [False] * (turn + 1) + [True] * (len(free) - turn - 1)
    else:
        assert all(free)
