"""The process's tables of sessions: the context stack, live sessions by (store, id), and the
sessions holding state their store does not have yet.

Shared by ``core.Session`` (which registers itself and holds or releases itself) and ``registry``
(which creates and finds sessions); no session logic here.
"""

from __future__ import annotations

import atexit
import contextvars
import threading
import weakref
from collections import OrderedDict
from typing import Any, Protocol

__all__ = ["LiveSession"]


class LiveSession(Protocol):
    """What the tables need of a session (``core.Session``)."""

    id: str

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


def _hold(held: LiveSession) -> None:
    with _registry_lock:
        _holding[id(held)] = held
        _holding.move_to_end(id(held))
        oldest = next(iter(_holding.values())) if len(_holding) > _HOLD_LIMIT else None
    if oldest is not None:
        oldest.flush()


def _release(held: LiveSession) -> None:
    with _registry_lock:
        _holding.pop(id(held), None)


def _held() -> list[LiveSession]:
    with _registry_lock:
        return list(_holding.values())


@atexit.register
def _flush_at_exit() -> None:
    """Write every session's pending usage before the interpreter exits (best effort, bounded by
    the stores' timeouts and skipped for stores whose circuit breaker is open)."""
    for held in _held():
        held.flush()
