"""The I/O shells of the store plans: a plan of ``sessions.sync.plans`` run against a real store.

``run`` answers each operation with the store's sync methods (and ``time.sleep``); ``arun`` with
their async twins, awaited, each raced against the store's circuit breaker so a call still
waiting when another one trips the breaker is given up (``ABANDONED``), not waited for. A store
failure never escapes a driver: it goes back into the plan as ``Failed``, which decides.
``read_state`` is the one direct read outside a plan (``Session.state``). These are the only
session modules that call a store or asyncio on a plan's behalf (an import-linter contract keeps
the plans free of both).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Protocol, TypeVar

from telos_wrap.errors import RefPoolError, TelosStageError
from telos_wrap.ir.shared import share
from telos_wrap.sessions import live
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.stores import budget
from telos_wrap.sessions.stores.breaker import StoreBreaker, StoreEvent, breaker_of
from telos_wrap.sessions.stores.budget import StoreBudgetExceeded, StoreTimeSpent
from telos_wrap.sessions.stores.store import SessionStore, StoreOps, store_ops
from telos_wrap.sessions.sync.plans import ABANDONED, LOAD, Failed, GetBlob, Sleep, StateSync, StoreOp, Swap

__all__ = ["AsyncLocks", "Host", "Owner", "arun", "load_pins", "put_pin", "read_state", "run"]

T = TypeVar("T")


async def _race_trip(call: Coroutine[Any, Any, Any], breaker: StoreBreaker) -> Any:
    """Await a store call; if the breaker trips first (another call failed), give up on it."""
    started = breaker.clock()
    left = budget.remaining()
    if left is not None and left <= 0:
        # No store time left: the operation is not sent (the plan keeps its work in this process,
        # the request is counted; nothing is said of the store).
        call.close()
        spent = StoreTimeSpent("the call's store time budget ran out before this store call")
        return Failed(spent, started, sent=False)
    task = asyncio.ensure_future(call)
    trip = breaker.trip_future()
    try:
        await asyncio.wait((task, trip), timeout=left, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task.done():
        try:
            return task.result()
        except Exception as exc:
            return Failed(exc, started)
    task.cancel()
    # A client may end a cancelled call with its own error (redis-py's cluster client raises
    # ConnectionError from a connect it was cancelled in): read it, so asyncio does not log it
    # as "never retrieved".
    task.add_done_callback(_retrieve)
    if not trip.done():
        # The call's budget (the store's timeout, ``stores/budget.py``) ran out: the store is too
        # slow to wait for, a failure of its own (it opens the breaker).
        return Failed(StoreBudgetExceeded("the call's store time budget ran out"), started)
    breaker.abandoned()
    return ABANDONED


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _sync_call(ops: StoreOps, op: StoreOp, session_id: str, started: float | None = None) -> Any:
    """One store operation of a plan through the store's sync methods; a failure comes back as ``Failed``
    (``started``: the breaker's clock when the operation began)."""
    try:
        if op is LOAD:
            return ops.load(session_id)
        if isinstance(op, Swap):
            if ops.inline:
                return ops.store.swap_state(session_id, op.expected, op.state)
            return ops.swap(session_id, op.expected, op.text)
        assert isinstance(op, GetBlob)
        return ops.get_blob(session_id, op.key)
    except Exception as exc:
        return Failed(exc, started)


def run(plan: Generator[StoreOp, Any, T], store: SessionStore, breaker: StoreBreaker, session_id: str) -> T:
    """Run a plan with the store's sync methods (the caller holds the session's lock). ``session_id``:
    the key the state is stored under (``Session.store_key``)."""
    ops = store_ops(store)
    clock = breaker.clock
    value: Any = None
    while True:
        try:
            op = plan.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if isinstance(op, Sleep):
            time.sleep(op.seconds)
            value = None
            continue
        value = _sync_call(ops, op, session_id, clock())


async def arun(
    plan: Generator[StoreOp, Any, T],
    store: SessionStore,
    breaker: StoreBreaker,
    session_id: str,
    lock: asyncio.Lock,
) -> T:
    """Run a plan with the store's async methods, under ``lock`` (one plan per session at a time).

    Within a call's store budget (``stores/budget.py``) the lock is waited for only as long as the
    budget lasts: past it (or with the budget spent before the plan), ``TelosStageError`` with a
    ``StoreTimeSpent`` cause and the plan is not run. The patch layer then sends the request as
    built and counts it without the store or the lock (``SessionRuntime.note_passthrough_deferred``): the
    request and its usage are written with the session's next write, never dropped.
    """
    ops = store_ops(store)
    left = budget.remaining()
    if left is not None and not ops.inline:
        try:
            if left <= 0:
                raise StoreTimeSpent("the call's store time budget ran out before its session's plan")
            await budget.acquire(lock)
        except StoreBudgetExceeded as exc:
            plan.close()
            spent = exc if isinstance(exc, StoreTimeSpent) else StoreTimeSpent(str(exc))
            raise TelosStageError("session.store", spent) from spent
        try:
            return await _arun_locked(plan, ops, breaker, session_id)
        finally:
            lock.release()
    async with lock:
        return await _arun_locked(plan, ops, breaker, session_id)


async def _arun_locked(
    plan: Generator[StoreOp, Any, T], ops: StoreOps, breaker: StoreBreaker, session_id: str
) -> T:
    """``arun``'s loop, under the session's lock."""
    value: Any = None
    while True:
        try:
            op = plan.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if isinstance(op, Sleep):
            await asyncio.sleep(op.seconds)
            value = None
            continue
        if ops.inline:
            # An in-memory store never waits: its async twins are its sync methods, so the
            # race against the breaker (a task and a loop iteration, ~25 us) cannot matter.
            value = _sync_call(ops, op, session_id, breaker.clock())
            continue
        call: Coroutine[Any, Any, Any]
        if op is LOAD:
            call = ops.aload(session_id)
        elif isinstance(op, Swap):
            call = ops.aswap(session_id, op.expected, op.text)
        else:
            assert isinstance(op, GetBlob)
            call = ops.aget_blob(session_id, op.key)
        value = await _race_trip(call, breaker)


def read_state(sync: StateSync, store: SessionStore, breaker: StoreBreaker, key: str | None = None) -> None:
    """Adopt the store's current copy of the session into ``sync`` (when the breaker allows and no
    outage state waits to be written); a failure opens the breaker, the held copy stays. ``key``:
    the id the state is stored under (``Session.store_key``; default the session's id)."""
    if sync.dirty is None and breaker.allow():
        try:
            loaded = store_ops(store).load(key or sync.id)
        except Exception as exc:
            breaker.failure(exc)
        else:
            breaker.success()
            sync.adopt(loaded)


def load_pins(
    sync: StateSync, store: SessionStore, state: SessionState, store_key: str | None = None
) -> dict[str, str]:
    """The pinned texts of ``state``: from ``sync``'s blob cache, else read from the store (and kept)
    under ``store_key`` (``Session.store_key``; default the session's id)."""
    pins: dict[str, str] = {}
    for slug, key in state.pins.items():
        text = sync.blobs.get(key)
        if text is None:
            text = store.get_blob(store_key or sync.id, key)
            if text is None:
                raise RefPoolError(f"pinned document {slug!r} is missing from the session store")
            sync.blobs[key] = share(text)
        pins[slug] = text
    return pins


def put_pin(sync: StateSync, store: SessionStore, key: str, text: str, store_key: str | None = None) -> None:
    """Store a pinned text under blob ``key`` of ``store_key`` (``Session.store_key``; default the
    session's id), and keep it in ``sync``'s blob cache."""
    store.put_blob(store_key or sync.id, key, text)
    sync.blobs[key] = share(text)


class AsyncLocks:
    """One ``asyncio.Lock`` per event loop (a session may be used from several loops)."""

    def __init__(self) -> None:
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> asyncio.Lock:
        """The running loop's lock."""
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock


class Owner(Protocol):
    """What a ``Host`` needs of its owner (a session's last-known state: ``known.Known``)."""

    id: str
    clock: Callable[[], float]

    @property
    def store(self) -> SessionStore:
        """The store the session uses now (the process default may be replaced between calls:
        ``StateSync.bind_store``)."""
        ...

    @property
    def store_key(self) -> str:
        """The key its state is stored under (``Session.store_key``: the id, or the id within its tenant's
        namespace)."""
        ...

    def flush(self) -> None:
        """Write what the store does not have yet (``known.Known.flush``: sync client, fail open); the held
        table calls it (``live``)."""
        ...


class Host:
    """A session as its ``plans.StateSync`` sees it (``plans.SyncHost``): its store, the store's
    breaker, its events and the process's table of sessions holding unwritten state. Weak: what a
    session holds never keeps it alive (``live.find`` forgets a session the application dropped)."""

    __slots__ = ("_session",)

    def __init__(self, session: Owner) -> None:
        self._session = weakref.ref(session)

    def _get(self) -> Owner:
        found = self._session()
        assert found is not None  # only called from the session's own methods
        return found

    def current_store(self) -> object:
        """``SyncHost.current_store``: the session's store now, compared by identity to notice a replaced
        default."""
        return self._get().store

    def store_breaker(self) -> StoreBreaker:
        """The breaker of this session's store calls (on a cluster: its slot's node's)."""
        session = self._get()
        return breaker_of(session.store, session.store_key)

    def store_inline(self) -> bool:
        """``SyncHost.store_inline``: whether the session's store is an in-process ``MemoryStore``
        (``StoreOps.inline``), which keeps state objects and never reuses a revision."""
        return store_ops(self._get().store).inline

    def store_event(self, kind: str, state: SessionState, reason: str) -> None:
        """``SyncHost.store_event``: record ``kind`` (``reset``, ``merged``, ``restored``, ...) with the
        state's request count and ``reason`` on the store's own breaker, ``breaker_of(store)``, which logs it
        (hashed id, no text)."""
        session = self._get()
        breaker_of(session.store).record(
            StoreEvent(kind, session.id, state.requests, reason, session.clock())
        )

    def hold(self) -> None:
        """``SyncHost.hold``: the session holds state the store lacks; ``live`` keeps it strongly until
        ``release`` (flushed in the background, when too many wait, or at exit)."""
        live.hold(self._get())

    def release(self) -> None:
        """``SyncHost.release``: the store holds everything the session had; ``live`` lets go of it."""
        live.release(self._get())
