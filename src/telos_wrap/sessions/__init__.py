"""Sessions: the conversation-level state a cache-friendly prompt needs, durable and shareable.

``with telos_wrap.session("chat-42"):`` (or ``async with``) makes every patched call inside it part
of session ``chat-42``; calls outside any session get a stable implicit session. A session keeps,
in a store (in-memory by default, Redis for several workers), hashes and positions of its last
request, its folds, pins and learned volatile spans, and exact usage counters — never a copy of the
conversation. See ``docs/sessions.md``.

Modules, in the style of a sans-IO core with thin I/O shells: ``core`` (``Session``, the public
object composing the others), ``registry`` (``session()``, the implicit and named sessions),
``live`` (the process's tables of sessions), ``plans`` (the store plans: pure, state in, store
operations out), ``drivers`` (their sync and async runners against a store), ``steps`` (the
primitives' pure state transitions), ``explain`` (``RequestRecord``, ``explain``'s text),
``turn`` (one request, pure), ``state`` / ``records`` (durable values), ``store`` /
``redis_store`` (compare-and-set stores, sync and async),
``breaker`` (the stores' circuit breaker), ``prints`` / ``breaks``
(cache-break detection), ``volatility`` (learned DROP spans), ``folds`` (pins and folds),
``stats`` (costs), ``refresh`` / ``refresh_io`` (R8 keep-alive).
"""

from telos_wrap.sessions.core import RequestRecord, Session
from telos_wrap.sessions.durable.records import CacheBreak, RangeFold, SlugFold, VolatileSpan
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.refresh import REFRESH_THRESHOLD, RefreshDecision
from telos_wrap.sessions.registry import (
    current_session,
    implicit_session,
    memory_limits,
    named_session,
    session,
    set_memory_limits,
)
from telos_wrap.sessions.stores.breaker import BreakerStats, StoreBreaker, StoreEvent
from telos_wrap.sessions.stores.from_url import store_from_url
from telos_wrap.sessions.stores.redis_store import RedisStore
from telos_wrap.sessions.stores.store import (
    MemoryStore,
    SessionStore,
    Versioned,
    default_store,
    set_default_store,
)
from telos_wrap.sessions.turns.folds import FoldError
from telos_wrap.sessions.views.stats import DEFAULT_PRICES, PriceMultipliers, SessionStats

__all__ = [
    "DEFAULT_PRICES",
    "REFRESH_THRESHOLD",
    "BreakerStats",
    "CacheBreak",
    "FoldError",
    "MemoryStore",
    "PriceMultipliers",
    "RangeFold",
    "RedisStore",
    "RefreshDecision",
    "RequestRecord",
    "Session",
    "SessionState",
    "SessionStats",
    "SessionStore",
    "SlugFold",
    "StoreBreaker",
    "StoreEvent",
    "Versioned",
    "VolatileSpan",
    "current_session",
    "default_store",
    "implicit_session",
    "memory_limits",
    "named_session",
    "session",
    "set_default_store",
    "set_memory_limits",
    "store_from_url",
]
