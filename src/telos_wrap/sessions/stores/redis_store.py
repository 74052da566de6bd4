"""``RedisStore``: session state shared by several workers or hosts (needs ``pip install telos-wrap[redis]``).

Layout, per session id ``S`` under a key prefix ``P`` (default ``"telos:"``):

* ``P{S}:session`` — a hash ``{rev: <int>, state: <JSON text>}``;
* ``P{S}:blobs`` — a hash of the session's blobs (pinned documents), content-addressed.

``{S}`` is a Redis Cluster *hash tag*: only the text between the braces picks a key's slot, so both
keys of a session live on one node and the compare-and-set script may touch both (docs/sessions.md,
"Running at scale"). An id that would make the tag empty (``""``, or one that starts with ``}``),
or that starts with ``=``, is written with one more ``=`` in front, so keys stay one-to-one with ids.

Updates are atomic compare-and-set in one Lua script (``EVALSHA``): the state is written only if
``rev`` is still the one the writer read, so two workers can never overwrite each other's turn —
the loser gets the current state back in the same round trip and recomputes. Every write draws a
fresh random revision (below 2**48), never ``rev + 1``: a replica promoted after a failover may
hold an older revision than the one a worker last wrote, and a sequential counter would hand that
worker's number to the next writer's different state. Both keys get the store's TTL again on every
write, so an active session never expires and an abandoned one disappears. JSON text only, never
pickle.

Clients: a URL (``redis_urls``: single server, ``+cluster``, ``+sentinel``, Valkey) or instances
(``redis.Redis``, ``redis.cluster.RedisCluster``, a Sentinel's ``master_for`` client, and their
``redis.asyncio`` twins as ``async_client``). Async clients use ``redis.asyncio`` (one client per
event loop, made from the same URL), so no Redis I/O runs on the event loop thread.

Why one module of ~500 lines: ``RedisStore`` is one ``SessionStore`` implementation whose sync and
async halves run the same Lua compare-and-set on the same key layout; keeping them together keeps
them in step. URL parsing and client construction are already ``redis_urls``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from telos_wrap.errors import StoreBusyError, StoreEntryError
from telos_wrap.sessions.stores import redis_urls
from telos_wrap.sessions.stores.breaker import StoreBreaker
from telos_wrap.sessions.stores.node_breakers import DEFAULT_BREAKER_BYTES, NodeBreakers
from telos_wrap.sessions.stores.store import Swapped, Versioned

__all__ = ["RedisStore"]

logger = logging.getLogger("telos_wrap.sessions")
T = TypeVar("T")

# KEYS: session, blobs; ARGV: expected revision ('' = absent), text,
# ttl (0 = none), the new revision.
#
# A write is idempotent: redis-py sends a command again when its connection drops before the answer
# (a cluster client after re-reading the slots, during a failover), so the script may run twice with
# the same arguments. If the first run landed, the second finds the store at the revision this write
# drew, holding its text, and answers as the first did. Treated as a lost race instead, the session
# recomputed its step on its own write and counted the request twice (docs/sessions.md, "Running at
# scale").
_SWAP = """
local current = redis.call('HGET', KEYS[1], 'rev')
if current and not tonumber(current) then
  current = false  -- a malformed entry: replaced like an absent one (docs/security.md)
end
if (current or '') ~= ARGV[1] then
  if current then
    local state = redis.call('HGET', KEYS[1], 'state')
    local mine = tonumber(ARGV[4])
    if (tonumber(current) == mine or tonumber(current) == mine + 1) and state == ARGV[2] then
      return {1, tonumber(current)}  -- this very write, sent again by the client after it landed
    end
    return {0, current, state}
  end
  return {0}
end
local revision = tonumber(ARGV[4])
if current and tonumber(current) == revision then
  revision = revision + 1
end
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
#: Revisions are drawn below 2**48: exact in Lua's doubles.
_REVISION_LIMIT = 2**48
#: Revisions are drawn from the OS (``SystemRandom``: no state, so forked workers never repeat each
#: other's draws), never from the process's ``random`` state: the background flush writes from its
#: own thread, and an application's seeded ``random`` (or a hypothesis test, which checks that
#: nothing moves it while it draws) must not see telos use it.
_revisions = random.SystemRandom()


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


def _tag(session_id: str) -> str:
    """The hash tag of a session id (see the module docstring: never empty, one-to-one)."""
    if not session_id or session_id[0] in "}=":
        return "=" + session_id
    return session_id


def hash_tag(key: str) -> str:
    """What Redis Cluster hashes to place ``key``: the text between its first ``{`` and the next
    ``}`` if that is not empty, else the whole key (docs/sessions.md, "Running at scale")."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


def _is_cluster(client: Any) -> bool:
    """A redis-py (or valkey-py) cluster client, sync or asyncio: it routes keys to nodes."""
    return client is not None and hasattr(client, "nodes_manager")


class RedisStore:
    """A ``SessionStore`` (and ``AsyncSessionStore``) on Redis (``redis-py``).

    Args:
        client: a URL (``redis://host:6379/0``, ``redis+cluster://h1:p1,h2:p2``,
            ``redis+sentinel://s1:26379/SERVICE``, ``valkey://…``: ``redis_urls``) or a client:
            ``redis.Redis``, ``redis.cluster.RedisCluster``, a Sentinel's ``master_for`` client.
        prefix: prepended to every key (it must not hold an empty hash tag ``{}``).
        ttl: seconds a session (and its blobs) lives after its last write; ``None`` = forever.
        timeout: seconds to connect and per command, for clients built from a URL. The store sits
            in the path of every LLM call: a Redis that accepts connections but never answers
            must make the call go on without it quickly, not hang it (a client you pass keeps its
            own settings). A command is retried once on a connection error (a pooled connection
            that died when Redis restarted), never after a timeout — except by a cluster client,
            which retries once after either, on a refreshed view of the cluster.
        async_client: a ``redis.asyncio`` client (``Redis``, ``cluster.RedisCluster``, a
            Sentinel's) for async calls when ``client`` is an instance; without it (and without a
            URL) async calls run the sync client in a worker thread.
        backoff / max_backoff: the circuit breaker's first and longest window, in seconds: after
            a failure or timeout no session calls this store for that long (``breaker.py``) — on
            a cluster, no session whose slot the failed node serves (``breaker_for``).
        breaker_bytes: bytes the table of per-node breakers may hold, about (``node_breakers``).
        max_connections: connections of the async client's pool (per event loop; on a cluster,
            per node); a call waits up to ``timeout`` for a free one (single server).
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
        breaker_bytes: int = DEFAULT_BREAKER_BYTES,
    ) -> None:
        self.url: str | None = None
        self._url: redis_urls.RedisUrl | None = None
        self.timeout = timeout
        self.max_connections = max_connections
        #: The store's breaker: a single server's, and a cluster's until its slot map is read (the
        #: sessions' events are recorded here in either case).
        self.breaker = StoreBreaker(backoff, max_backoff)
        #: On a cluster: one breaker per node, for the sessions whose slots it serves (``breaker_for``).
        self.node_breakers = NodeBreakers(
            lambda: StoreBreaker(backoff, max_backoff, clock=self.breaker.clock), breaker_bytes
        )
        if isinstance(client, str):
            self.url, self._url, client = client, redis_urls.parse(client), None
        #: Whether the store runs on a Redis Cluster (keys are routed by their hash tag).
        self.cluster = (
            (self._url is not None and self._url.kind == "cluster")
            or _is_cluster(client)
            or _is_cluster(async_client)
        )
        if hash_tag(f"{prefix}{{x}}:session") != hash_tag(f"{prefix}{{x}}:blobs"):
            raise ValueError(
                f"prefix {prefix!r} holds an empty hash tag '{{}}': a session's keys would span slots"
            )
        self.prefix = prefix
        self.ttl = ttl
        self._sync: tuple[Any, Any] | None = (
            None if client is None else (client, client.register_script(_SWAP))
        )
        self._sync_lock = threading.Lock()
        self._async_given = async_client
        self._async: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()
        #: Event loops whose cluster client answered a call (past its cold start).
        self._answered: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()

    def _client_options(self, retry_type: Any, module: Any) -> dict[str, Any]:
        from redis.backoff import NoBackoff

        return {
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
            "retry": retry_type(NoBackoff(), 1, supported_errors=(module.exceptions.ConnectionError,)),
            "retry_on_timeout": False,
        }

    def _client(self) -> tuple[Any, Any]:
        """``(sync client, swap script)``; a client from a URL is made on first use (a cluster
        client reads the cluster's topology when it is made: that belongs inside a store call)."""
        found = self._sync
        if found is None:
            with self._sync_lock:
                found = self._sync
                if found is None:
                    import redis

                    assert self._url is not None
                    client = redis_urls.sync_client(self._url, self._client_options(redis.retry.Retry, redis))
                    found = self._sync = (client, client.register_script(_SWAP))
        return found

    @property
    def redis(self) -> Any:
        """The sync redis-py client (made from the URL on first use)."""
        return self._client()[0]

    def _keys(self, session_id: str) -> list[str]:
        """The session's keys: its state and its blobs."""
        return list(self.keys_of(session_id))

    def keys_of(self, session_id: str) -> tuple[str, str]:
        """The keys ``(state, blobs)`` a session is written to."""
        tagged = f"{self.prefix}{{{_tag(session_id)}}}"
        return f"{tagged}:session", f"{tagged}:blobs"

    # -- circuit breakers ---------------------------------------------------------------------------

    def breaker_for(self, session_id: str) -> StoreBreaker:
        """The circuit breaker of ``session_id``'s store calls.

        On a cluster: the breaker of the primary that serves the session's slot in redis-py's slot
        map as it is now (``node_breakers``), so a failed node's window skips only its own sessions
        and, once redis-py has re-read the map after a failover, the promoted replica's sessions use
        the new primary's breaker (docs/sessions.md, "Failover"). A single server, and a cluster
        whose map was not read yet (no store call made), use the store's one ``breaker``.
        """
        if not self.cluster:
            return self.breaker
        node = self._node_of(session_id)
        return self.breaker if node is None else self.node_breakers.get(node)

    def _node_of(self, session_id: str) -> str | None:
        """The name (``host:port``) of the primary serving ``session_id``'s slot in the slot map of
        the client its calls use now (the running loop's async client, else the sync one); ``None``
        if no map was read yet."""
        client = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            found = self._async.get(loop)
            client = None if found is None else found[0]
        if client is None and self._sync is not None:
            client = self._sync[0]
        if client is None:
            return None
        try:
            from redis.crc import key_slot

            nodes = client.nodes_manager.slots_cache.get(key_slot(self.keys_of(session_id)[0].encode()))
            return str(nodes[0].name) if nodes else None
        except Exception:  # a client of another shape: the store's own breaker
            logger.debug("telos_wrap: no slot map to route a breaker by", exc_info=True)
            return None

    def _args(self, expected: int, text: str) -> list[str]:
        revision = _revisions.randrange(1, _REVISION_LIMIT)
        return ["" if expected == 0 else str(expected), text, str(self.ttl or 0), str(revision)]

    # -- sync ---------------------------------------------------------------------------------------

    def load(self, session_id: str) -> Versioned | None:
        """The session's state from one ``HMGET`` of its ``session`` hash (``None``: absent or expired).
        ``StoreEntryError`` for a malformed stored revision (the plan resets the session; the breaker stays
        closed); redis-py's errors pass through."""
        found = self.redis.hmget(self._keys(session_id)[0], ["rev", "state"])
        return _versioned(session_id, found)

    def swap(self, session_id: str, expected: int, text: str) -> Swapped:
        """``compare_and_set`` that returns the current state when it loses (one round trip)."""
        _, script = self._client()
        return _swapped(script(keys=self._keys(session_id), args=self._args(expected, text)))

    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        """The revision of ``swap``: the new one, or ``None`` when the stored revision is no longer
        ``expected`` (0: absent); the current state it also fetched is dropped."""
        return self.swap(session_id, expected, text).revision

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        """Set ``key`` in the session's ``blobs`` hash and give it the store's TTL again, in one pipeline;
        every later write of the state renews it too (``_SWAP``), so a blob lives as long as its session."""
        blobs = self._keys(session_id)[1]
        pipe = self.redis.pipeline()
        pipe.hset(blobs, key, text)
        if self.ttl:
            pipe.expire(blobs, self.ttl)
        pipe.execute()

    def get_blob(self, session_id: str, key: str) -> str | None:
        """The blob ``key`` from one ``HGET`` of the session's ``blobs`` hash, or ``None``; redis-py's errors
        pass through."""
        value = self.redis.hget(self._keys(session_id)[1], key)
        return None if value is None else _text(value)

    def delete(self, session_id: str) -> None:
        """Delete both keys of the session (state and blobs) in one ``DEL``: the hash tag keeps them in one
        slot, so this holds on a cluster too."""
        self.redis.delete(*self._keys(session_id))

    # -- async ---------------------------------------------------------------------------------------

    def _aclient(self) -> tuple[Any, Any]:
        """``(redis.asyncio client, swap script)`` for the running event loop."""
        loop = asyncio.get_running_loop()
        found = self._async.get(loop)
        if found is None:
            import redis.asyncio

            if self._async_given is not None:
                client = self._async_given
            elif self._url is not None:
                # A single server's pool blocks: with hundreds of concurrent sessions a call waits
                # (up to ``timeout``) for one of ``max_connections``, instead of failing at once.
                client = redis_urls.async_client(
                    self._url,
                    self._client_options(redis.asyncio.retry.Retry, redis),
                    self.max_connections,
                    self.timeout,
                )
            else:
                raise TypeError("no async client: pass a URL or async_client=")
            found = self._async[loop] = (client, client.register_script(_SWAP))
        return found

    @property
    def has_async_client(self) -> bool:
        """Whether async calls use ``redis.asyncio`` (else they run the sync client in a thread)."""
        return self.url is not None or self._async_given is not None

    async def _cold_retried(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``; on a cluster whose client of this loop never answered yet, once more after a
        redis-py cold-start failure (an ``AttributeError`` such as "'NoneType' object has no
        attribute 'writelines'" from a connection torn down under the first concurrent burst, or a
        connection closed while the slot map is read), before the breaker hears of it. Once the
        cluster answers, the store's own breaker (the one used before the slot map was read) is
        closed if that burst opened it: its reported state is true (``breaker.stats()``)."""
        if not self.cluster:
            return await call()
        loop = asyncio.get_running_loop()
        try:
            result = await call()
        except (AttributeError, _connection_error()) as exc:
            if self._answered.get(loop):
                raise
            logger.debug(
                "telos_wrap: cluster client cold-start failure (%s); retried once", type(exc).__name__
            )
            result = await call()
        self._answered[loop] = True
        if self.breaker.is_open:
            self.breaker.close()
        return result

    async def aload(self, session_id: str) -> Versioned | None:
        """The async form of ``load`` on the running loop's ``redis.asyncio`` client (without one: ``load`` in
        a worker thread). ``StoreBusyError`` when no pooled connection came free within ``timeout`` (no
        breaker window); a cluster client's cold-start failure is retried once (``_cold_retried``)."""
        if not self.has_async_client:
            return await asyncio.to_thread(self.load, session_id)
        client, _ = self._aclient()

        async def load() -> Any:
            with _pool_waits():
                return await client.hmget(self._keys(session_id)[0], ["rev", "state"])

        return _versioned(session_id, await self._cold_retried(load))

    async def aswap(self, session_id: str, expected: int, text: str) -> Swapped:
        """The async form of ``swap``, like ``aload``; a retry after a cold start sends the same drawn
        revision, so a first try that landed is answered as written (``_SWAP``), not as a lost race."""
        if not self.has_async_client:
            return await asyncio.to_thread(self.swap, session_id, expected, text)
        _, script = self._aclient()
        args = self._args(expected, text)  # one revision for both tries: a landed write is recognized

        async def swap() -> Any:
            with _pool_waits():
                return await script(keys=self._keys(session_id), args=args)

        return _swapped(await self._cold_retried(swap))

    async def acompare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        """The revision of ``aswap``: the new one, or ``None`` when the stored revision is no longer
        ``expected``."""
        return (await self.aswap(session_id, expected, text)).revision

    async def aput_blob(self, session_id: str, key: str, text: str) -> None:
        """The async form of ``put_blob``: one pipeline on the running loop's client (without one:
        ``put_blob`` in a worker thread); ``StoreBusyError`` when no pooled connection came free within
        ``timeout``."""
        if not self.has_async_client:
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
        """The async form of ``get_blob`` on the running loop's client (without one: ``get_blob`` in a worker
        thread); ``StoreBusyError`` when no pooled connection came free within ``timeout``."""
        if not self.has_async_client:
            return await asyncio.to_thread(self.get_blob, session_id, key)
        client, _ = self._aclient()
        with _pool_waits():
            value = await client.hget(self._keys(session_id)[1], key)
        return None if value is None else _text(value)

    async def adelete(self, session_id: str) -> None:
        """The async form of ``delete`` on the running loop's client (without one: ``delete`` in a worker
        thread)."""
        if not self.has_async_client:
            await asyncio.to_thread(self.delete, session_id)
            return
        client, _ = self._aclient()
        await client.delete(*self._keys(session_id))

    async def aclose(self) -> None:
        """Close the async client of the running loop (the sync client closes with ``close()``)."""
        found = self._async.pop(asyncio.get_running_loop(), None)
        if found is not None and self._async_given is None:
            await found[0].aclose()
            for sentinel in _sentinels_of(found[0]):
                await sentinel.aclose()

    def close(self) -> None:
        """Close the sync client's connections (if it was ever made)."""
        if self._sync is not None:
            self._sync[0].close()
            if self._url is not None:
                for sentinel in _sentinels_of(self._sync[0]):
                    sentinel.close()


def _sentinels_of(client: Any) -> list[Any]:
    """The clients a Sentinel-managed client made from a URL asks for its primary (closed with it)."""
    manager = getattr(getattr(client, "connection_pool", None), "sentinel_manager", None)
    return list(getattr(manager, "sentinels", ()))


def _connection_error() -> type[Exception]:
    import redis.exceptions

    return redis.exceptions.ConnectionError


def _versioned(session_id: str, found: Any) -> Versioned | None:
    revision, text = found
    if revision is None or text is None:
        return None
    return Versioned(_revision(session_id, revision), _text(text))


@contextlib.contextmanager
def _pool_waits() -> Iterator[None]:
    """Turn redis-py's "No connection available." (a ``BlockingConnectionPool`` wait that outlasted
    ``timeout``: every pooled connection stayed in use) into ``StoreBusyError``: the process is
    saturated, the store is not sick, so the circuit breaker must not open for it."""
    import redis.exceptions

    try:
        yield
    except redis.exceptions.ConnectionError as exc:
        # A cluster client's node pool that is full raises ``MaxConnectionsError`` at once.
        full = isinstance(exc, redis.exceptions.MaxConnectionsError)
        if full or (
            isinstance(exc.__cause__, asyncio.TimeoutError) and "No connection available" in str(exc)
        ):
            raise StoreBusyError(
                "every pooled connection to the session store stayed in use for its timeout "
                "(raise RedisStore(max_connections=...) or lower the concurrency)"
            ) from exc
        raise
