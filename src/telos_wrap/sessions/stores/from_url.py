"""A session store named by a URL: ``session(store="redis://host:6379/0")`` and ``store_from_url``.

``memory://`` is the process' default ``MemoryStore``; every URL a ``RedisStore`` accepts
(``redis://``, ``rediss://``, ``unix://``, ``valkey://``, ``redis+cluster://``, ``redis+sentinel://``:
``redis_urls``) is a ``RedisStore`` made with its default options. One store per URL per process:
the sessions of a URL share its connection pool and circuit breaker, and a session named on it
(``telos_hint={"session": …}``) is the same live session for every caller of that URL. A store with
other options (``prefix``, ``ttl``, ``timeout``...) is made with ``RedisStore(url, ...)`` and passed
as an object.
"""

from __future__ import annotations

import threading
from typing import Any

from telos_wrap.errors import TelosHintError, TelosOptionError
from telos_wrap.sessions.stores import redis_urls

__all__ = ["check_store", "store_from_url"]

_lock = threading.Lock()
_by_url: dict[str, Any] = {}


def store_from_url(url: str) -> Any:
    """The store ``url`` names (one per URL per process; see the module docstring).

    Raises ``TelosOptionError`` (a ``ValueError``) saying what is valid for a URL of no known form.
    No I/O: a Redis store connects on its first use.
    """
    if url.strip().lower() in ("memory://", "memory:"):
        from telos_wrap.sessions.stores.store import default_store

        return default_store()
    try:
        redis_urls.parse(url)
    except ValueError as exc:
        raise TelosOptionError(
            f"store={_redacted(url)!r} is not a store URL ({exc}); valid: memory://, redis://host:port/db, "
            "rediss://, unix://, valkey://, redis+cluster://h1:p1,h2:p2, redis+sentinel://host:port/SERVICE, "
            "or a store object (MemoryStore(), RedisStore(url, ...))"
        ) from None
    with _lock:
        found = _by_url.get(url)
        if found is None:
            from telos_wrap.sessions.stores.redis_store import RedisStore

            found = _by_url[url] = RedisStore(url)
        return found


def check_store(store: Any, where: str = "session") -> Any:
    """``store`` as a store object: a URL made into one (``store_from_url``), ``None`` and a store
    object as they are. Raises ``TelosHintError`` (a ``TypeError``) for anything else."""
    if store is None:
        return None
    if isinstance(store, str):
        return store_from_url(store)
    if not any(
        all(callable(getattr(store, name, None)) for name in names)
        for names in (("load", "compare_and_set"), ("aload", "acompare_and_set"))
    ):
        raise TelosHintError(
            f"{where}(store=...) must be a session store (MemoryStore(), RedisStore(url, ...)) or a store "
            f"URL ('redis://host:6379/0'), not a {type(store).__name__}"
        )
    return store


def _redacted(url: str) -> str:
    """``url`` without its password (``user:***@``): error messages may be logged."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, _ = rest.partition("/")[0].rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{rest[len(userinfo) + 1 :]}"
