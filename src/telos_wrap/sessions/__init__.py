"""Sessions: the conversation-level state a cache-friendly prompt needs, durable and shareable.

``with telos_wrap.session("chat-42"):`` (or ``async with``) makes every patched call inside it part
of session ``chat-42``; calls outside any session get a stable implicit session. A session keeps,
in a store (in-memory by default, Redis for several workers), hashes and positions of its last
request, its folds, pins and learned volatile spans, and exact usage counters. See
``docs/sessions.md``.

At the top, ``registry`` (``session()``, the implicit and named sessions), ``core`` (``Session``,
the user's handle, and ``runtime_of``), ``runtime`` (``SessionRuntime``: the request path the patch
layer calls, and the state it shares with the handle), ``live`` (the process's tables of sessions),
``identity`` and ``arguments``; ``refresh`` / ``refresh_io`` (R8 keep-alive: the decision, and
``send_refresh`` through a client). Below them, rooms by concern, each importing only the rooms
after it (``pyproject.toml``'s contracts): ``turns/`` (one request as pure functions: the turn,
cache breaks, pins and folds, I2 on the wire), ``views/`` (``explain``, stats), ``learning/``
(volatility, values, fleet learning and its store plans with their two drivers, schema orders),
``sync/`` (the sans-IO store ``plans`` and their sync and async ``drivers``), ``stores/`` (memory,
Redis, the breaker), ``durable/`` (the state, its records, prompt prints, merging).
"""

from telos_wrap.sessions.core import Session
from telos_wrap.sessions.durable.records import CacheBreak, RangeFold, SlugFold, VolatileSpan
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.refresh import REFRESH_THRESHOLD, RefreshDecision
from telos_wrap.sessions.refresh_io import asend_refresh, send_refresh
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
from telos_wrap.sessions.views.explain import RequestRecord
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
    "asend_refresh",
    "current_session",
    "default_store",
    "implicit_session",
    "memory_limits",
    "named_session",
    "send_refresh",
    "session",
    "set_default_store",
    "set_memory_limits",
    "store_from_url",
]
