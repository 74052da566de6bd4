"""A session store named by a URL: ``session(store="redis://host:6379/0")``, and what ``telos-wrap run
--store URL`` and ``TELOS_STORE_URL`` set as the default store (``telos_wrap.autopatch``).

``memory://`` is the process' default ``MemoryStore``; every URL ``redis_urls`` knows (``redis://``,
``rediss://``, ``unix://``, ``valkey://``, ``redis+cluster://``, ``redis+sentinel://`` …) is a
``RedisStore`` with its defaults (prefix ``telos:``, a week's TTL, a 1 s timeout). One store per URL per
process: the sessions of a URL share its connection pool and circuit breaker, and a session named on it
(``telos_hint={"session": …}``) is the same live session for every caller of that URL. A store with
other options (``prefix``, ``ttl``, ``timeout``...) is made with ``RedisStore(url, ...)`` and passed as
an object. The URL is checked here, without I/O (a client is made on the store's first call); a URL
that cannot work raises ``TelosOptionError`` saying what a good one looks like, never echoing a
password.
"""

from __future__ import annotations

import importlib.util
import threading
from typing import Any
from urllib.parse import urlsplit

from telos_wrap.errors import TelosHintError, TelosOptionError
from telos_wrap.sessions.stores import redis_urls
from telos_wrap.sessions.stores.store import SessionStore, default_store

__all__ = ["EXAMPLES", "check_store", "redacted", "store_from_url"]

#: What a good store URL looks like (said in every error).
EXAMPLES = (
    "redis://HOST:6379/0, rediss://:PASSWORD@HOST:6380/0, redis+cluster://H1:7000,H2:7001, "
    "redis+sentinel://S1:26379/SERVICE, or memory:// (this process only)"
)

_lock = threading.Lock()
_by_url: dict[str, SessionStore] = {}


def redacted(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``: safe to print or log."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    elif at and userinfo:
        userinfo = "***"  # redis://PASSWORD@host: the whole userinfo may be the secret
    return f"{scheme}{sep}{userinfo}{at}{hosts}{slash}{tail}"


def store_from_url(url: str) -> SessionStore:
    """The session store ``url`` names (one per URL per process; see the module docstring).

    Raises ``TelosOptionError`` (a ``ValueError``) for a URL that cannot work, or a Redis URL when
    redis-py is not installed, saying what to do. No I/O: a Redis store connects on its first use.
    """
    text = url.strip() if isinstance(url, str) else ""
    if not text:
        raise TelosOptionError(f"no store URL given; expected one of: {EXAMPLES}")
    if text.lower() in ("memory://", "memory:"):
        return default_store()
    shown = redacted(text)
    try:
        parsed = redis_urls.parse(text)
        if parsed.kind != "cluster":
            port = urlsplit(parsed.url).port  # raises ValueError for a port that is not a number
            if port is not None and not 0 < port < 65536:
                raise ValueError(f"port {port} is out of range")
    except ValueError as exc:
        reason = str(exc).replace(text, shown)
        raise TelosOptionError(
            f"store URL {shown!r} cannot work ({reason}); expected one of: {EXAMPLES}, "
            "or a store object (MemoryStore(), RedisStore(url, ...))"
        ) from None
    if importlib.util.find_spec("redis") is None:
        raise TelosOptionError(
            f"store URL {shown!r} needs redis-py, which this Python cannot import: "
            "pip install 'telos-wrap[redis]' in the application's environment"
        )
    with _lock:
        found = _by_url.get(text)
        if found is None:
            from telos_wrap.sessions.stores.redis_store import RedisStore

            found = _by_url[text] = RedisStore(text)
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
