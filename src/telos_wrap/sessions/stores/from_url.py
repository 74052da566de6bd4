"""A session store named by a URL: what ``telos-wrap run --store URL`` and ``TELOS_STORE_URL`` set
as the default store (``telos_wrap.autopatch``).

``memory://`` is this process' own ``MemoryStore``; every URL ``redis_urls`` knows (``redis://``,
``rediss://``, ``unix://``, ``valkey://``, ``redis+cluster://``, ``redis+sentinel://`` …) is a
``RedisStore`` with its defaults (prefix ``telos:``, a week's TTL, a 1 s timeout). The URL is checked
here, without I/O (a client is made on the store's first call); a URL that cannot work raises
``TelosOptionError`` saying what a good one looks like, never echoing a password.
"""

from __future__ import annotations

import importlib.util
from urllib.parse import urlsplit

from telos_wrap.errors import TelosOptionError
from telos_wrap.sessions.stores import redis_urls
from telos_wrap.sessions.stores.store import MemoryStore, SessionStore

__all__ = ["EXAMPLES", "redacted", "store_from_url"]

#: What a good store URL looks like (said in every error).
EXAMPLES = (
    "redis://HOST:6379/0, rediss://:PASSWORD@HOST:6380/0, redis+cluster://H1:7000,H2:7001, "
    "redis+sentinel://S1:26379/SERVICE, or memory:// (this process only)"
)


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
    """The session store ``url`` names (see the module docstring).

    Raises ``TelosOptionError`` (a ``ValueError``) for a URL that cannot work, or a Redis URL when
    redis-py is not installed, saying what to do.
    """
    text = url.strip() if isinstance(url, str) else ""
    if not text:
        raise TelosOptionError(f"no store URL given; expected one of: {EXAMPLES}")
    if text.lower() in ("memory://", "memory:"):
        return MemoryStore()
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
            f"store URL {shown!r} cannot work ({reason}); expected one of: {EXAMPLES}"
        ) from None
    if importlib.util.find_spec("redis") is None:
        raise TelosOptionError(
            f"store URL {shown!r} needs redis-py, which this Python cannot import: "
            "pip install 'telos-wrap[redis]' in the application's environment"
        )
    from telos_wrap.sessions.stores.redis_store import RedisStore

    return RedisStore(text)
