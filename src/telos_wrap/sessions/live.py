"""The process's tables of sessions: the context stack, live sessions by (store, id), the sessions
holding state their store does not have yet, and the sessions holding texts (warm).

Its contract is the public functions below, used by ``core.Session`` (which enters and leaves the
stack and registers itself), ``runtime.SessionRuntime`` (warm and cooled, held and released),
``registry`` (the active session, a live session by id), ``sync/drivers.py`` (held and released)
and ``sync/flusher.py`` (what is held, since when). No session logic here: a table calls back only
``flush()`` on what it holds (``LiveSession``) and ``cool()`` on what it warms (``Coolable``).
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

__all__ = [
    "WARM_BYTES",
    "Coolable",
    "LiveSession",
    "drop_held",
    "find",
    "flush_held",
    "forget_warm",
    "held",
    "held_for",
    "hold",
    "innermost",
    "on_hold",
    "pop",
    "push",
    "register",
    "release",
    "warm_bytes",
    "warm_up",
]


class LiveSession(Protocol):
    """What the held table needs of what it holds (a session's last-known state,
    ``sync.known.Known``): its id, the key its state is stored under, its store, a flush."""

    id: str

    @property
    def store_key(self) -> str:
        """The key its state is stored under (``Session.store_key``)."""
        ...

    @property
    def store(self) -> object:
        """The store its state is written to (for a session given none: the process default as it is now)."""
        ...

    def flush(self) -> None:
        """Write what its store does not have yet, with the store's sync client; never raises (fail open).
        Called on what the table holds: past ``_HOLD_LIMIT``, by ``flush_held`` at exit, by the background
        flush."""
        ...


class Coolable(Protocol):
    """What the warm table needs of a session's runtime (``runtime.SessionRuntime``): ``cool()``
    drops the texts it holds in this process; what is sent does not change."""

    def cool(self) -> None:
        """Drop the texts the session holds in this process (its history memo, wire ledger, last request);
        what is sent next does not change, only what it costs to build. A busy session may be skipped."""
        ...


# -- the context stack ------------------------------------------------------------------------------

#: The active sessions of this context, innermost last (``with session(...)``).
_stack: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar("telos_wrap_sessions", default=())


def push(session: object) -> None:
    """Make ``session`` the innermost active session of this context (``with session:``)."""
    _stack.set((*_stack.get(), session))


def pop(session: object) -> bool:
    """Make ``session`` inactive if it is the innermost one; ``False`` (nothing changed) if it is not."""
    stack = _stack.get()
    if not stack or stack[-1] is not session:
        return False
    _stack.set(stack[:-1])
    return True


def innermost() -> Any | None:
    """The innermost active session of this context, if any."""
    stack = _stack.get()
    return stack[-1] if stack else None


# -- live sessions by (store, id) -------------------------------------------------------------------

#: Live sessions by (store, id): the store is part of a session's name (two tenants may both use
#: ``support-1``, each on its own store). ``_scope``: the identity of the store given, ``0`` for a
#: session on the process default store (whichever it is at the time of use). Weak values: a
#: session the application dropped is not kept alive by this table.
_live: weakref.WeakValueDictionary[tuple[int, str], Any] = weakref.WeakValueDictionary()


def _scope(store: object | None) -> int:
    return 0 if store is None else id(store)


def register(session: object, store: object | None, session_id: str) -> None:
    """``session`` is the live session ``session_id`` on ``store`` as given (``None``: the process
    default store); it replaces an earlier one. Weak: the table never keeps it alive."""
    _live[(_scope(store), session_id)] = session


def find(store: object | None, session_id: str) -> Any | None:
    """The live session registered as ``session_id`` on ``store`` (``None``: on the default store)."""
    return _live.get((_scope(store), session_id))


# -- sessions holding what their store does not have yet --------------------------------------------

#: Guards ``_holding`` and ``_warm``.
_lock = threading.Lock()

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


def hold(held: LiveSession) -> None:
    """``held`` has something its store does not: keep it (strongly) until ``release``. Past
    ``_HOLD_LIMIT`` the oldest held is flushed; ``on_hold`` is called."""
    with _lock:
        _holding[id(held)] = held
        _holding.move_to_end(id(held))
        _held_since.setdefault(id(held), time.monotonic())
        oldest = next(iter(_holding.values())) if len(_holding) > _HOLD_LIMIT else None
    hook = on_hold
    if hook is not None:
        hook()
    if oldest is not None:
        oldest.flush()


def release(held: LiveSession) -> None:
    """``held`` has nothing left to write: let it go."""
    with _lock:
        _holding.pop(id(held), None)
        _held_since.pop(id(held), None)


def held() -> list[LiveSession]:
    """What is held now, oldest first."""
    with _lock:
        return list(_holding.values())


def held_for() -> list[tuple[LiveSession, float]]:
    """What is held, with when each started holding (``time.monotonic``; oldest hold first)."""
    with _lock:
        return [(entry, _held_since.get(key, 0.0)) for key, entry in _holding.items()]


def drop_held() -> None:
    """Let go of everything held without writing it (a test whose store is gone for good)."""
    with _lock:
        _holding.clear()
        _held_since.clear()


@atexit.register
def flush_held() -> None:
    """Write what every held session holds (best effort, bounded by the stores' timeouts and
    skipped for stores whose circuit breaker is open). Run at interpreter exit."""
    for entry in held():
        entry.flush()


# -- sessions holding texts (warm) ------------------------------------------------------------------

#: Sessions holding texts in this process (history memo, wire ledger, last request), least recently
#: used first, with the bytes each holds. Bounded in bytes (``WARM_BYTES``, ``set_memory_limits``):
#: past it the least recently used sessions drop those texts (``Coolable.cool``), which changes no
#: byte that is sent (docs/sessions.md, "What a session keeps in this process").
#: Weak references: a session the application dropped frees its texts with it (its entry is dropped
#: when it comes up here), so the table never keeps a per-request session object alive.
_warm: OrderedDict[int, tuple[weakref.ref[Coolable], int]] = OrderedDict()
_warm_total = 0
WARM_BYTES = 32 << 20


def warm_up(session: Coolable, size: int) -> None:
    """``session`` was just used and holds about ``size`` bytes of texts: cool the coldest past
    ``WARM_BYTES`` (outside the lock)."""
    global _warm_total
    cold: list[Coolable] = []
    with _lock:
        previous = _warm.pop(id(session), None)
        if previous is not None:
            _warm_total -= previous[1]
        _warm[id(session)] = (weakref.ref(session), size)
        _warm_total += size
        while _warm_total > WARM_BYTES and len(_warm) > 1:
            _, (oldest, dropped) = _warm.popitem(last=False)
            _warm_total -= dropped
            alive = oldest()
            if alive is not None:
                cold.append(alive)
    for entry in cold:
        entry.cool()


def forget_warm(session: Coolable) -> None:
    """``session`` holds no texts any more (cooled, or erased)."""
    global _warm_total
    with _lock:
        found = _warm.get(id(session))
        if found is not None and found[0]() is session:
            del _warm[id(session)]
            _warm_total -= found[1]


def warm_bytes() -> tuple[int, int]:
    """(sessions, bytes) in the warm table."""
    with _lock:
        return len(_warm), _warm_total
