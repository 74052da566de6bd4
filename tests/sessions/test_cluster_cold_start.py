"""A Redis Cluster client's cold start (issue 44): redis-py's asyncio cluster client may fail the first
burst of a fresh worker inside itself (``AttributeError: 'NoneType' object has no attribute
'writelines'`` from a connection torn down under it, a connection closed while the slot map is read).
Such a failure is retried once before the breaker hears of it, and once the cluster answers, the
store's own breaker (the one used before the slot map was read) reports what is true.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from telos_wrap.sessions import RedisStore

pytestmark = pytest.mark.redis


class _FailsFirst:
    """Wraps an awaitable client method: the first call raises ``error``, later ones pass through."""

    def __init__(self, method: Any, error: BaseException) -> None:
        self.method, self.error, self.calls = method, error, 0

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise self.error
        return await self.method(*args, **kwargs)


@pytest.mark.parametrize(
    "error",
    [
        AttributeError("'NoneType' object has no attribute 'writelines'"),
        "connection",  # redis.exceptions.ConnectionError("Connection closed by server.")
    ],
)
def test_a_cold_start_failure_is_retried_once_and_opens_no_window(redis_cluster_url: str, error: Any) -> None:
    import redis.exceptions

    if error == "connection":
        error = redis.exceptions.ConnectionError("Connection closed by server.")
    store = RedisStore(redis_cluster_url, prefix=f"cold-{uuid.uuid4().hex[:8]}:")
    assert store.cluster

    async def main() -> Any:
        client, _ = store._aclient()
        failing = _FailsFirst(client.hmget, error)
        client.hmget = failing
        try:
            found = await store.aload("cold-session")
        finally:
            del client.hmget
        await store.aclose()
        return found, failing.calls

    found, calls = asyncio.run(main())
    assert found is None and calls == 2  # retried once, and answered (the session is new)
    stats = store.breaker.stats()
    assert (stats.state, stats.failures, stats.trips) == ("closed", 0, 0), stats
    store.close()


def test_a_failure_after_the_first_answer_is_not_retried(redis_cluster_url: str) -> None:
    store = RedisStore(redis_cluster_url, prefix=f"cold-{uuid.uuid4().hex[:8]}:")

    async def main() -> int:
        assert await store.aload("warm-session") is None  # the loop's client answered once
        client, _ = store._aclient()
        failing = _FailsFirst(client.hmget, AttributeError("'NoneType' object has no attribute 'writelines'"))
        client.hmget = failing
        try:
            with pytest.raises(AttributeError):
                await store.aload("warm-session")
        finally:
            del client.hmget
        await store.aclose()
        return failing.calls

    assert asyncio.run(main()) == 1  # a warm client's failure is the store's: the breaker decides
    store.close()


def test_the_stores_breaker_is_closed_once_the_cluster_answers(redis_cluster_url: str) -> None:
    """A cold-start burst that failed before the slot map was read opened the store's own breaker;
    later calls go through the node breakers and never probe it. Once the cluster answers, it is
    closed: ``store.breaker.stats()`` does not say 'open' about a cluster that answers."""
    store = RedisStore(redis_cluster_url, prefix=f"cold-{uuid.uuid4().hex[:8]}:")
    store.breaker.failure(ConnectionError("the first burst failed"))
    assert store.breaker.stats().state == "open"

    async def main() -> None:
        assert await store.aload("after-the-burst") is None
        await store.aclose()

    asyncio.run(main())
    assert store.breaker.stats().state == "closed"
    store.close()
