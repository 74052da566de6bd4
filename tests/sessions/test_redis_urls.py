"""The store URL forms (``telos_wrap.sessions.stores.redis_urls``): what each one parses to and which
client it makes (no I/O: redis-py's clients connect on first use, a sync cluster client excepted,
which ``RedisStore`` makes on first use)."""

from __future__ import annotations

from typing import Any

import pytest

from telos_wrap.sessions.stores import redis_urls
from telos_wrap.sessions.stores.redis_store import RedisStore
from telos_wrap.sessions.stores.redis_urls import RedisUrl, parse


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://h:6380/2", RedisUrl("single", "redis://h:6380/2")),
        ("rediss://u:p@h:6380/0", RedisUrl("single", "rediss://u:p@h:6380/0")),
        ("unix:///tmp/r.sock?db=1", RedisUrl("single", "unix:///tmp/r.sock?db=1")),
        ("valkey://h:6379/0", RedisUrl("single", "redis://h:6379/0")),
        ("valkeys://h:6379/0", RedisUrl("single", "rediss://h:6379/0")),
        (
            "redis+cluster://a:7000,b:7001,c",
            RedisUrl("cluster", "redis://a:7000", (("a", 7000), ("b", 7001), ("c", 6379))),
        ),
        (
            "rediss+cluster://u:p%40ss@a:7000/0?ssl_cert_reqs=none",
            RedisUrl("cluster", "rediss://u:p%40ss@a:7000?ssl_cert_reqs=none", (("a", 7000),)),
        ),
        ("valkey+cluster://a:7000", RedisUrl("cluster", "redis://a:7000", (("a", 7000),))),
        (
            "redis+sentinel://s1:26379,s2/mymaster/3",
            RedisUrl("sentinel", "redis://sentinel-primary/3", (("s1", 26379), ("s2", 26379)), "mymaster"),
        ),
        (
            "rediss+sentinel://:pw@s1:26380/svc?ssl_cert_reqs=none",
            RedisUrl(
                "sentinel", "rediss://:pw@sentinel-primary/0?ssl_cert_reqs=none", (("s1", 26380),), "svc"
            ),
        ),
    ],
)
def test_url_forms(url: str, expected: RedisUrl) -> None:
    assert parse(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "localhost:6379",
        "http://h",
        "unix+cluster:///x",
        "redis+cluster://a:1/2",
        "redis+sentinel://s1",
        "redis+x://a",
    ],
)
def test_unknown_forms_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        parse(url)


def test_each_form_makes_its_client_type() -> None:
    import redis
    import redis.asyncio
    import redis.asyncio.cluster

    store = RedisStore("redis+sentinel://127.0.0.1:1,127.0.0.1:2/svc/1", timeout=0.5)
    client = store.redis
    assert isinstance(client, redis.Redis) and not store.cluster
    pool: Any = client.connection_pool  # a SentinelConnectionPool, asserted below
    assert type(pool).__name__ == "SentinelConnectionPool" and pool.service_name == "svc"
    assert pool.connection_kwargs["db"] == 1 and pool.connection_kwargs["socket_timeout"] == 0.5
    assert [(s.connection_pool.connection_kwargs["port"]) for s in pool.sentinel_manager.sentinels] == [1, 2]
    cluster = RedisStore("redis+cluster://127.0.0.1:1,127.0.0.1:2")
    assert cluster.cluster
    async_cluster = redis_urls.async_client(parse("redis+cluster://127.0.0.1:1"), {}, 8, 1.0)
    assert isinstance(async_cluster, redis.asyncio.cluster.RedisCluster)
