"""The URLs a ``RedisStore`` accepts, and the redis-py clients (sync and asyncio) each one makes.

=====================================================================  ==============================
URL                                                                    client (sync / asyncio)
=====================================================================  ==============================
``redis://[user:pass@]host:port/db``, ``rediss://…``, ``unix://…``     ``redis.Redis`` /
                                                                       ``redis.asyncio.Redis``
``valkey://…``, ``valkeys://…`` (a Valkey server)                      the same (Valkey speaks the
                                                                       Redis protocol)
``redis+cluster://[user:pass@]h1:p1[,h2:p2…][?opts]``,                 ``redis.cluster.RedisCluster``
``rediss+cluster://…``, ``valkey+cluster://…``                         / ``redis.asyncio.cluster.
                                                                       RedisCluster``; every host
                                                                       listed is a startup node
``redis+sentinel://[user:pass@]s1:p1[,s2:p2…]/SERVICE[/db][?opts]``,   the primary of ``SERVICE``
``rediss+sentinel://…``, ``valkey+sentinel://…``                       (``Sentinel.master_for``),
                                                                       sync and asyncio
=====================================================================  ==============================

Query options (``?ssl_cert_reqs=none`` …) go to redis-py as its own ``from_url`` would take them;
user and password are the data nodes' (for Sentinel: the primary's). No I/O happens here except
what redis-py's own constructors do (a sync ``RedisCluster`` reads the cluster's topology when it
is made, so ``RedisStore`` makes it on first use, inside a store call).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

__all__ = ["RedisUrl", "async_client", "parse", "sync_client"]

#: Scheme aliases for a Valkey server (same protocol, same clients).
_PLAIN = {"redis": "redis", "rediss": "rediss", "unix": "unix", "valkey": "redis", "valkeys": "rediss"}


@dataclass(frozen=True, slots=True)
class RedisUrl:
    """A parsed store URL.

    ``kind`` is ``"single"``, ``"cluster"`` or ``"sentinel"``; ``url`` is a plain redis-py URL
    (for a cluster, its first node; for Sentinel, the primary's credentials, db and options, with
    a placeholder host); ``nodes`` the cluster's startup nodes or the sentinels; ``service`` the
    Sentinel service name.
    """

    kind: str
    url: str
    nodes: tuple[tuple[str, int], ...] = ()
    service: str | None = None


def _hosts(text: str, default_port: int) -> tuple[tuple[str, int], ...]:
    nodes = []
    for item in text.split(","):
        host, _, port = item.strip().rpartition(":") if ":" in item else (item.strip(), "", "")
        if not host:
            raise ValueError(f"a store URL names a node without a host: {item!r}")
        nodes.append((host.strip("[]"), int(port) if port else default_port))
    return tuple(nodes)


def parse(url: str) -> RedisUrl:
    """Parse a store URL (see the module docstring); raises ``ValueError`` for an unknown form."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not a store URL (scheme://…): {url!r}")
    base, _, mode = scheme.lower().partition("+")
    if base not in _PLAIN or (mode and base == "unix"):
        raise ValueError(f"unknown store URL scheme {scheme!r} (redis, rediss, unix, valkey, valkeys)")
    plain = _PLAIN[base]
    if not mode:
        return RedisUrl("single", f"{plain}://{rest}")
    netloc, slash, tail = rest.partition("/")
    path, qmark, query = tail.partition("?")
    if not slash and "?" in netloc:
        netloc, _, query = netloc.partition("?")
        qmark = "?"
    userinfo, at, hosts = netloc.rpartition("@")
    auth = f"{userinfo}@" if at else ""
    options = f"?{query}" if qmark else ""
    if mode == "cluster":
        nodes = _hosts(hosts, 6379)
        first_host, first_port = nodes[0]
        if path.strip("/") not in ("", "0"):
            raise ValueError("a Redis Cluster has only database 0")
        return RedisUrl("cluster", f"{plain}://{auth}{first_host}:{first_port}{options}", nodes)
    if mode == "sentinel":
        service, _, db = path.partition("/")
        if not service:
            raise ValueError("a redis+sentinel:// URL names its service: redis+sentinel://host:26379/SERVICE")
        return RedisUrl(
            "sentinel",
            f"{plain}://{auth}sentinel-primary/{db or 0}{options}",
            _hosts(hosts, 26379),
            unquote(service),
        )
    raise ValueError(f"unknown store URL scheme {scheme!r} (+cluster or +sentinel)")


def sync_client(parsed: RedisUrl, options: dict[str, Any]) -> Any:
    """The sync redis-py client of ``parsed``; ``options``: socket timeouts and ``retry``."""
    import redis
    import redis.cluster
    import redis.sentinel

    if parsed.kind == "single":
        return redis.Redis.from_url(parsed.url, **options)
    if parsed.kind == "cluster":
        node: Any = redis.cluster.ClusterNode  # (redis-py leaves these untyped)
        return redis.cluster.RedisCluster.from_url(
            parsed.url, startup_nodes=[node(h, p) for h, p in parsed.nodes[1:]], **_cluster_options(options)
        )
    sentinel: Any = redis.sentinel.Sentinel
    return _master(sentinel, parsed, options)


def async_client(parsed: RedisUrl, options: dict[str, Any], max_connections: int, timeout: float) -> Any:
    """The ``redis.asyncio`` client of ``parsed`` (made inside the event loop that uses it).

    A single server gets a blocking pool of ``max_connections`` (a call waits up to ``timeout`` for
    a free connection); a cluster client keeps up to ``max_connections`` per node.
    """
    import redis.asyncio
    import redis.asyncio.cluster
    import redis.asyncio.sentinel

    if parsed.kind == "single":
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            parsed.url, max_connections=max_connections, timeout=timeout, **options
        )
        return redis.asyncio.Redis.from_pool(pool)  # owns the pool: aclose() closes it
    if parsed.kind == "cluster":
        node: Any = redis.asyncio.cluster.ClusterNode
        return redis.asyncio.cluster.RedisCluster.from_url(
            parsed.url,
            startup_nodes=[node(h, p) for h, p in parsed.nodes[1:]],
            max_connections=max_connections,
            **_cluster_options(options),
        )
    sentinel: Any = redis.asyncio.sentinel.Sentinel
    return _master(sentinel, parsed, options)


def _master(sentinel_type: Any, parsed: RedisUrl, options: dict[str, Any]) -> Any:
    """The client of the primary the sentinels name for ``parsed.service``. The primary's options
    come from the URL without its host, and TLS as ``ssl=True`` so the Sentinel pool keeps its own
    (sentinel-managed) connection class."""
    from redis.connection import parse_url

    primary: dict[str, Any] = parse_url(parsed.url)  # type: ignore[no-untyped-call]
    primary.pop("host", None)
    if primary.pop("connection_class", None) is not None:
        primary["ssl"] = True
    sentinel = sentinel_type(list(parsed.nodes), sentinel_kwargs=_timeouts(options))
    return sentinel.master_for(parsed.service, **options, **primary)


def _timeouts(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k in ("socket_timeout", "socket_connect_timeout")}


def _cluster_options(options: dict[str, Any]) -> dict[str, Any]:
    # redis-py's cluster clients take ``retry`` as their own (a retry refreshes the topology first)
    # and have no ``retry_on_timeout``.
    return {k: v for k, v in options.items() if k != "retry_on_timeout"}
