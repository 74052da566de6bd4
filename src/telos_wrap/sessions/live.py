"""The process's tables of sessions: the context stack, live sessions by (store, id), and the
sessions holding state their store does not have yet.

Shared by ``core.Session`` (which registers itself and holds or releases itself) and ``registry``
(which creates and finds sessions); no session logic here.
"""

from __future__ import annotations

import atexit
import contextvars
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["LiveSession"]


class LiveSession(Protocol):
    """What the tables need of a session (``core.Session``) or of its last-known state
    (``sync.known.Known``): its id, the key its state is stored under, its store, a flush."""

    id: str

    @property
    def store_key(self) -> str: ...

    @property
    def store(self) -> object: ...

    def flush(self) -> None: ...


#: The active sessions of this context, innermost last (``with session(...)``).
_stack: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar("telos_wrap_sessions", default=())
#: Guards ``_holding`` and the registry's tables.
_registry_lock = threading.Lock()

#: Live sessions by (store, id): the store is part of a session's name (two tenants may both use
#: ``support-1``, each on its own store). ``_scope``: the identity of the store given, ``0`` for a
#: session on the process default store (whichever it is at the time of use). Weak values: a
#: session the application dropped is not kept alive by this table.
_live: weakref.WeakValueDictionary[tuple[int, str], Any] = weakref.WeakValueDictionary()


def _scope(store: object | None) -> int:
    return 0 if store is None else id(store)


#: Sessions holding usage or outage state the store does not have yet, oldest first. Strong
#: references: a ``Session`` the application dropped still gets its last usage written (on a read
#: of that session id here, when more than ``_HOLD_LIMIT`` wait, or at interpreter exit).
_holding: OrderedDict[int, LiveSession] = OrderedDict()
_HOLD_LIMIT = 10_000
#: When each held session started holding something unwritten (``time.monotonic``), by ``id``:
#: the background flush (``sync/flusher.py``) writes what waited longer than its delay.
_held_since: dict[int, float] = {}
#: Called (outside the lock) when a session starts holding: starts the background flush.
on_hold: Callable[[], None] | None = None


def _hold(held: LiveSession) -> None:
    with _registry_lock:
        _holding[id(held)] = held
        _holding.move_to_end(id(held))
        _held_since.setdefault(id(held), time.monotonic())
        oldest = next(iter(_holding.values())) if len(_holding) > _HOLD_LIMIT else None
    hook = on_hold
    if hook is not None:
        hook()
    if oldest is not None:
        oldest.flush()


def _release(held: LiveSession) -> None:
    with _registry_lock:
        _holding.pop(id(held), None)
        _held_since.pop(id(held), None)


def _held_for() -> list[tuple[LiveSession, float]]:
    """The held sessions with when each started holding (oldest hold first)."""
    with _registry_lock:
        return [(held, _held_since.get(key, 0.0)) for key, held in _holding.items()]


#: Sessions holding texts in this process (history memo, wire ledger, last request), least recently
#: used first, with the bytes each holds. Bounded in bytes (``WARM_BYTES``, ``set_memory_limits``):
#: past it the least recently used sessions drop those texts (``Session._cool``), which changes no
#: byte that is sent (docs/sessions.md, "What a session keeps in this process").
#: Weak references: a session the application dropped frees its texts with it (its entry is dropped
#: when it comes up here), so the table never keeps a per-request session object alive.
_warm: OrderedDict[int, tuple[weakref.ref[Any], int]] = OrderedDict()
_warm_total = 0
WARM_BYTES = 32 << 20


def _warm_up(session: Any, held: int) -> None:
    """``session`` was just used and holds about ``held`` bytes of texts: cool the coldest past the bound."""
    global _warm_total
    cold: list[Any] = []
    with _registry_lock:
        previous = _warm.pop(id(session), None)
        if previous is not None:
            _warm_total -= previous[1]
        _warm[id(session)] = (weakref.ref(session), held)
        _warm_total += held
        while _warm_total > WARM_BYTES and len(_warm) > 1:
            _, (oldest, size) = _warm.popitem(last=False)
            _warm_total -= size
            alive = oldest()
            if alive is not None:
                cold.append(alive)
    for oldest in cold:
        oldest._cool()


def _forget_warm(session: Any) -> None:
    """``session`` holds no texts any more (cooled)."""
    global _warm_total
    with _registry_lock:
        found = _warm.get(id(session))
        if found is not None and found[0]() is session:
            del _warm[id(session)]
            _warm_total -= found[1]


def _warm_bytes() -> tuple[int, int]:
    """(sessions, bytes) in the warm table."""
    with _registry_lock:
        return len(_warm), _warm_total


def _held() -> list[LiveSession]:
    with _registry_lock:
        return list(_holding.values())


@atexit.register
def _flush_at_exit() -> None:
    """Write every session's pending usage before the interpreter exits (best effort, bounded by
    the stores' timeouts and skipped for stores whose circuit breaker is open)."""
    for held in _held():
        held.flush()
