"""What this process last knew of each session: one ``StateSync`` per (store, store key), shared by
every ``Session`` object whose state lives at that key of that store.

The documented per-request pattern (``async with telos_wrap.session(conv_id, store=...)`` around
each request) makes a new ``Session`` object per request. Each used to start knowing nothing: while
the store could not be read (a restart, a circuit breaker's back-off window, a Redis out of memory
refusing writes) its turn ran on an empty state and read nothing from the vendor's cache, the usage
of the previous request waited in the dropped object until exit, and ``.stats`` read zeros. Here
the objects of one conversation share what the process knows (the stored copy last seen, the state
kept during an outage, the usage not yet written), so a new object behaves like the one long-lived
object would have: it works on the last-known state while the store cannot be read, and the
store's answer reconciles it (``plans.StateSync``).

The entry is taken by the store key, which a tenant-scoped session learns at its first call
(``SessionRuntime.bind_tenant``; ``<id>@t:<namespace>``): two tenants naming one conversation id never share
an entry. Before its binding a session works on an entry of its own, whose pinned texts it carries
into the shared one. The locks plans run under are shared by the session id itself
(``SessionLocks``), known when the object is made, so a binding never swaps a lock a caller holds;
two tenants' sessions of one id wait for each other's plans in this process, and share nothing else.

The table is bounded (``LIMIT`` entries, least recently used dropped first). A dropped entry that
still holds something the store lacks stays held (``live.hold``) until it is written (the
background flush, ``flusher``); a session object keeps its entry for as long as it lives.
Entries hold positions, digests and counters (a ``SessionState``), never the caller's texts
beyond pinned documents the session pinned itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from telos_wrap.errors import TelosError
from telos_wrap.sessions import live
from telos_wrap.sessions.stores import budget
from telos_wrap.sessions.stores.breaker import breaker_of
from telos_wrap.sessions.stores.store import SessionStore, default_store
from telos_wrap.sessions.sync import drivers, flusher
from telos_wrap.sessions.sync.plans import StateSync, unchanged

__all__ = ["LIMIT", "Known", "SessionLocks", "clear", "known_for", "locks_for"]

#: Sessions whose last-known state the process keeps (``set_memory_limits(known_sessions=...)``).
LIMIT = 4096


class SessionLocks:
    """The locks of one session id's plans in this process: ``lock`` (threads) and ``alocks`` (one
    ``asyncio.Lock`` per event loop). Shared by every object and entry of that id on one store."""

    __slots__ = ("__weakref__", "alocks", "lock")

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.alocks = drivers.AsyncLocks()


class Known:
    """The last-known state of one session on one store, and the locks its plans run under.

    ``store``: the store given to the session (``None``: the process default at the time of use).
    ``id``: the session id (its events name it). ``store_key``: the key its state is stored under
    (``Session.store_key``). ``clock``: seconds clock for the events it records. ``locks``: the
    id's ``SessionLocks`` (``locks_for``).
    """

    __slots__ = (
        "__weakref__",
        "_given",
        "alocks",
        "clock",
        "id",
        "lock",
        "locks",
        "loop",
        "plans",
        "store_key",
        "sync",
    )

    def __init__(
        self,
        store: SessionStore | None,
        session_id: str,
        store_key: str,
        clock: Callable[[], float],
        locks: SessionLocks,
    ) -> None:
        self._given = store
        self.id = session_id
        self.store_key = store_key
        self.clock = clock
        self.locks = locks
        self.lock = locks.lock
        self.alocks = locks.alocks
        #: The event loop of the last async plan run on this state (the background flush writes
        #: through that loop's client, under its lock): a weak reference, or ``None``.
        self.loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        #: Async plans of this state in flight (waiting for their loop's lock or running). A sync
        #: flush or read (another thread, or ``.stats`` in async code) leaves the store alone
        #: meanwhile: two plans at once on one state would write pending usage twice, or drop it.
        self.plans = 0
        self.sync = StateSync(session_id, drivers.Host(self))

    def reset(self) -> None:
        """Forget what it holds (the session was erased: its id starts afresh)."""
        self.sync = StateSync(self.id, drivers.Host(self))

    def adopt(self, before: Known) -> None:
        """Take the pinned texts ``before`` (a session's entry before its binding) holds."""
        for key, text in before.sync.blobs.items():
            self.sync.blobs.setdefault(key, text)

    @property
    def store(self) -> SessionStore:
        """The session's store: the one it was given, else the process default as it is at the time of asking
        (``set_default_store`` may replace it between calls)."""
        return self._given if self._given is not None else default_store()

    @property
    def unwritten(self) -> bool:
        """Whether it holds usage or outage state the store does not have yet."""
        return bool(self.sync.pending) or self.sync.dirty is not None

    def flush(self) -> None:
        """Write what the store does not have yet with the store's sync client (fail open)."""
        with self.lock:
            if self.unwritten and not self.plans:
                store = self.store
                with contextlib.suppress(TelosError):
                    drivers.run(
                        self.sync.plan(unchanged, strict=False, counted=False),
                        store,
                        breaker_of(store, self.store_key),
                        self.store_key,
                    )

    async def aflush(self) -> None:
        """``flush`` through the running loop's async client, under the loop's plan lock."""
        if self.unwritten:
            store = self.store
            self.plans += 1
            try:
                with contextlib.suppress(TelosError), budget.opened(store):
                    await drivers.arun(
                        self.sync.plan(unchanged, strict=False, counted=False),
                        store,
                        breaker_of(store, self.store_key),
                        self.store_key,
                        self.alocks.get(),
                    )
            finally:
                self.plans -= 1

    def ran_async(self) -> None:
        """An async plan runs on this state now: remember its loop (for the background flush)."""
        loop = asyncio.get_running_loop()
        if self.loop is None or self.loop() is not loop:
            self.loop = weakref.ref(loop)

    def __repr__(self) -> str:
        return "<telos_wrap last-known session state>"


live.on_hold = flusher.ensure_running

#: Guards the table (its own lock: the registry makes sessions while it holds its tables' lock).
_table_lock = threading.Lock()
_table: OrderedDict[tuple[int, str], Known] = OrderedDict()
#: The locks of each (store, session id) some object or entry still holds.
_locks: weakref.WeakValueDictionary[tuple[int, str], SessionLocks] = weakref.WeakValueDictionary()


def _scope(store: object | None) -> int:
    return 0 if store is None else id(store)


def locks_for(store: SessionStore | None, session_id: str) -> SessionLocks:
    """The locks of ``session_id``'s plans on ``store`` in this process (made if nothing holds them)."""
    key = (_scope(store), session_id)
    with _table_lock:
        found = _locks.get(key)
        if found is None:
            found = _locks[key] = SessionLocks()
        return found


def known_for(
    store: SessionStore | None, session_id: str, store_key: str, clock: Callable[[], float]
) -> Known:
    """The last-known state of the session stored at ``store_key`` on ``store`` (made if the
    process has none).

    An entry holds its store: an id of a store cannot be reused while an entry names it.
    """
    key = (_scope(store), store_key)
    locks = locks_for(store, session_id)
    with _table_lock:
        found = _table.get(key)
        if found is not None:
            _table.move_to_end(key)
            return found
        found = _table[key] = Known(store, session_id, store_key, clock, locks)
        while len(_table) > LIMIT:
            _table.popitem(last=False)  # one holding unwritten state is still held (live.hold)
        return found


def clear() -> None:
    """Forget every entry (tests; what is unwritten stays held for its flush)."""
    with _table_lock:
        _table.clear()


def known_count() -> int:
    with _table_lock:
        return len(_table)


def _entries() -> list[Any]:
    with _table_lock:
        return list(_table.values())
