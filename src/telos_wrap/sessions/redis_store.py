"""``RedisStore``: session state shared by several workers or hosts (needs ``pip install telos-wrap[redis]``).

Layout, per session id ``S`` under a key prefix ``P`` (default ``"telos:"``):

* ``P session:S`` — a hash ``{rev: <int>, state: <JSON text>}``;
* ``P blobs:S`` — a hash of the session's blobs (pinned documents), content-addressed.

Updates are atomic compare-and-set in one Lua script (``EVALSHA``): the state is written only if
``rev`` is still the one the writer read, so two workers can never overwrite each other's turn —
the loser gets the current state back in the same round trip and recomputes. A session created
(or re-created after Redis lost it) starts at a random revision, so a revision is never reused for
one id. Both keys get the store's TTL again on every write, so an active session never expires and
an abandoned one disappears. JSON text only, never pickle.

Sync clients use ``redis.Redis``; async clients use ``redis.asyncio.Redis`` (one per event loop, made
from the same URL), so no Redis I/O runs on the event loop thread.
"""

from __future__ import annotations

import contextlib
import random
import weakref
from collections.abc import Iterator
from typing import Any

from telos_wrap.errors import StoreBusyError, StoreEntryError
from telos_wrap.sessions.breaker import StoreBreaker
from telos_wrap.sessions.store import Swapped, Versioned

__all__ = ["RedisStore"]

_SWAP = """
local current = redis.call('HGET', KEYS[1], 'rev')
if current and not tonumber(current) then
  current = false  -- a malformed entry: replaced like an absent one (docs/security.md)
end
if (current or '') ~= ARGV[1] then
  if current then
    return {0, current, redis.call('HGET', KEYS[1], 'state')}
  end
  return {0}
end
local revision = current and (tonumber(current) + 1) or tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'rev', revision, 'state', ARGV[2])
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('EXPIRE', KEYS[2], ttl)
  end
end
return {1, revision}
"""
#: First revisions are drawn below 2**48: exact in Lua's doubles for any realistic number of turns.
_FIRST_REVISION_LIMIT = 2**48


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _revision(session_id: str, value: Any) -> int:
    """A stored revision as a number; ``StoreEntryError`` for a malformed one (the entry is reset)."""
    try:
        return int(_text(value))
    except (TypeError, ValueError, UnicodeDecodeError):
        raise StoreEntryError(
            f"session {session_id!r}: the store's entry has a malformed revision; the session starts "
            "again from a fresh state and its next write replaces the entry"
        ) from None


def _swapped(result: Any) -> Swapped:
    if int(result[0]) == 1:
        return Swapped(int(result[1]))
    if len(result) >= 3:
        try:
            return Swapped(None, Versioned(int(_text(result[1])), _text(result[2])))
        except (TypeError, ValueError, UnicodeDecodeError):
            return Swapped(None)  # a malformed entry: the script replaces it like an absent one
    return Swapped(None)


class RedisStore:
    """A ``SessionStore`` (and ``AsyncSessionStore``) on Redis (``redis-py``).

    Args:
        client: a ``redis.Redis`` instance or a URL (``redis://host:6379/0``).
        prefix: prepended to every key.
        ttl: seconds a session (and its blobs) lives after its last write; ``None`` = forever.
        timeout: seconds to connect and per command, for clients built from a URL. The store sits
            in the path of every LLM call: a Redis that accepts connections but never answers
            must make the call go on without it quickly, not hang it (a client you pass keeps its
            own settings). A command is retried once on a connection error (a pooled connection
            that died when Redis restarted), never after a timeout.
        async_client: a ``redis.asyncio.Redis`` for async calls when ``client`` is an instance;
            without it (and without a URL) async calls run the sync client in a worker thread.
        backoff / max_backoff: the circuit breaker's first and longest window, in seconds: after
            a failure or timeout no session calls this store for that long (``breaker.py``).
        max_connections: connections of the async client's pool (per event loop); a call waits
            up to ``timeout`` for a free one.
    """

    def __init__(
        self,
        client: Any,
        *,
        prefix: str = "telos:",
        ttl: int | None = 7 * 24 * 3600,
        timeout: float = 1.0,
        async_client: Any = None,
        backoff: float = 5.0,
        max_backoff: float = 60.0,
        max_connections: int = 64,
    ) -> None:
        self.url: str | None = None
        self.timeout = timeout
        self.max_connections = max_connections
        self.breaker = StoreBreaker(backoff, max_backoff)
        if isinstance(client, str):
            import redis

            self.url = client
            client = redis.Redis.from_url(client, **self._client_options(redis.retry.Retry, redis))
        self.redis = client
        self.prefix = prefix
        self.ttl = ttl
        self._swap = client.register_script(_SWAP)
        self._async_given = async_client
        self._async: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()

    def _client_options(self, retry_type: Any, module: Any) -> dict[str, Any]:
        from redis.backoff import NoBackoff

        return {
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
            "retry": retry_type(NoBackoff(), 1, supported_errors=(module.exceptions.ConnectionError,)),
            "retry_on_timeout": False,
        }

    def _keys(self, session_id: str) -> tuple[str, str]:
        return f"{self.prefix}session:{session_id}", f"{self.prefix}blobs:{session_id}"

    def _args(self, expected: int, text: str) -> list[str]:
        first = random.randrange(1, _FIRST_REVISION_LIMIT)
        return ["" if expected == 0 else str(expected), text, str(self.ttl or 0), str(first)]

    # -- sync ---------------------------------------------------------------------------------------

    def load(self, session_id: str) -> Versioned | None:
        revision, text = self.redis.hmget(self._keys(session_id)[0], ["rev", "state"])
        if revision is None or text is None:
            return None
        return Versioned(_revision(session_id, revision), _text(text))

    def swap(self, session_id: str, expected: int, text: str) -> Swapped:
        """``compare_and_set`` that returns the current state when it loses (one round trip)."""
        return _swapped(self._swap(keys=list(self._keys(session_id)), args=self._args(expected, text)))

    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        return self.swap(session_id, expected, text).revision

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        blobs = self._keys(session_id)[1]
        pipe = self.redis.pipeline()
        pipe.hset(blobs, key, text)
        if self.ttl:
            pipe.expire(blobs, self.ttl)
        pipe.execute()

    def get_blob(self, session_id: str, key: str) -> str | None:
        value = self.redis.hget(self._keys(session_id)[1], key)
        return None if value is None else _text(value)

    def delete(self, session_id: str) -> None:
        self.redis.delete(*self._keys(session_id))

    # -- async --------------------------------------------------------------------------------------

    def _aclient(self) -> tuple[Any, Any]:
        """``(redis.asyncio client, swap script)`` for the running event loop."""
        import asyncio

        loop = asyncio.get_running_loop()
        found = self._async.get(loop)
        if found is None:
            import redis.asyncio

            if self._async_given is not None:
                client = self._async_given
            elif self.url is not None:
                # A blocking pool: with hundreds of concurrent sessions a call waits (up to
                # ``timeout``) for one of ``max_connections``, instead of failing at once.
                pool = redis.asyncio.BlockingConnectionPool.from_url(
                    self.url,
                    max_connections=self.max_connections,
                    timeout=self.timeout,
                    **self._client_options(redis.asyncio.retry.Retry, redis),
                )
                client = redis.asyncio.Redis.from_pool(pool)  # owns the pool: aclose() closes it
            else:
                raise TypeError("no async client: pass a URL or async_client=")
            found = self._async[loop] = (client, client.register_script(_SWAP))
        return found

    @property
    def has_async_client(self) -> bool:
        """Whether async calls use ``redis.asyncio`` (else they run the sync client in a thread)."""
        return self.url is not None or self._async_given is not None

    async def aload(self, session_id: str) -> Versioned | None:
        if not self.has_async_client:
            import asyncio

            return await asyncio.to_thread(self.load, session_id)
        client, _ = self._aclient()
        with _pool_waits():
            revision, text = await client.hmget(self._keys(session_id)[0], ["rev", "state"])
        if revision is None or text is None:
            return None
        return Versioned(_revision(session_id, revision), _text(text))

    async def aswap(self, session_id: str, expected: int, text: str) -> Swapped:
        if not self.has_async_client:
            import asyncio

            return await asyncio.to_thread(self.swap, session_id, expected, text)
        _, script = self._aclient()
        with _pool_waits():
            swapped = await script(keys=list(self._keys(session_id)), args=self._args(expected, text))
        return _swapped(swapped)

    async def acompare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        return (await self.aswap(session_id, expected, text)).revision

    async def aput_blob(self, session_id: str, key: str, text: str) -> None:
        if not self.has_async_client:
            import asyncio

            await asyncio.to_thread(self.put_blob, session_id, key, text)
            return
        client, _ = self._aclient()
        blobs = self._keys(session_id)[1]
        with _pool_waits():
            async with client.pipeline() as pipe:
                pipe.hset(blobs, key, text)
                if self.ttl:
                    pipe.expire(blobs, self.ttl)
                await pipe.execute()

    async def aget_blob(self, session_id: str, key: str) -> str | None:
        if not self.has_async_client:
            import asyncio

            return await asyncio.to_thread(self.get_blob, session_id, key)
        client, _ = self._aclient()
        with _pool_waits():
            value = await client.hget(self._keys(session_id)[1], key)
        return None if value is None else _text(value)

    async def adelete(self, session_id: str) -> None:
        if not self.has_async_client:
            import asyncio

            await asyncio.to_thread(self.delete, session_id)
            return
        client, _ = self._aclient()
        await client.delete(*self._keys(session_id))

    async def aclose(self) -> None:
        """Close the async client of the running loop (the sync client closes with ``close()``)."""
        import asyncio

        found = self._async.pop(asyncio.get_running_loop(), None)
        if found is not None and self._async_given is None:
            await found[0].aclose()

    def close(self) -> None:
        """Close the sync client's connections."""
        self.redis.close()


@contextlib.contextmanager
def _pool_waits() -> Iterator[None]:
    """Turn redis-py's "No connection available." (a ``BlockingConnectionPool`` wait that outlasted
    ``timeout``: every pooled connection stayed in use) into ``StoreBusyError``: the process is
    saturated, the store is not sick, so the circuit breaker must not open for it."""
    import asyncio

    import redis.exceptions

    try:
        yield
    except redis.exceptions.ConnectionError as exc:
        if isinstance(exc.__cause__, asyncio.TimeoutError) and "No connection available" in str(exc):
            raise StoreBusyError(
                "every pooled connection to the session store stayed in use for its timeout "
                "(raise RedisStore(max_connections=...) or lower the concurrency)"
            ) from exc
        raise
