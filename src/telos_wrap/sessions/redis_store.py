"""``RedisStore``: session state shared by several workers or hosts (needs ``pip install telos-wrap[redis]``).

Layout, per session id ``S`` under a key prefix ``P`` (default ``"telos:"``):

* ``P session:S`` — a hash ``{rev: <int>, state: <JSON text>}``;
* ``P blobs:S`` — a hash of the session's blobs (pinned documents), content-addressed.

Updates are atomic compare-and-set in one Lua script (``EVALSHA``): the state is written only if
``rev`` is still the one the writer read, so two workers can never overwrite each other's turn —
the loser reloads and recomputes. Both keys get the store's TTL again on every write, so an active
session never expires and an abandoned one disappears. JSON text only, never pickle.
"""

from __future__ import annotations

from typing import Any

from telos_wrap.sessions.store import Versioned

__all__ = ["RedisStore"]

_CAS = """
local current = redis.call('HGET', KEYS[1], 'rev')
if (current or '') ~= ARGV[1] then
  return false
end
local revision = (tonumber(current) or 0) + 1
redis.call('HSET', KEYS[1], 'rev', revision, 'state', ARGV[2])
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('EXPIRE', KEYS[2], ttl)
  end
end
return revision
"""


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


class RedisStore:
    """A ``SessionStore`` on Redis (``redis-py``).

    Args:
        client: a ``redis.Redis`` instance or a URL (``redis://host:6379/0``).
        prefix: prepended to every key.
        ttl: seconds a session (and its blobs) lives after its last write; ``None`` = forever.
        timeout: seconds to connect and per command, for a client built from a URL. The store sits
            in the path of every LLM call: a Redis that accepts connections but never answers
            must make the call fail open quickly, not hang it (a client you pass keeps its own).
    """

    def __init__(
        self, client: Any, *, prefix: str = "telos:", ttl: int | None = 7 * 24 * 3600, timeout: float = 1.0
    ) -> None:
        if isinstance(client, str):
            import redis

            client = redis.Redis.from_url(client, socket_timeout=timeout, socket_connect_timeout=timeout)
        self.redis = client
        self.prefix = prefix
        self.ttl = ttl
        self._cas = client.register_script(_CAS)

    def _keys(self, session_id: str) -> tuple[str, str]:
        return f"{self.prefix}session:{session_id}", f"{self.prefix}blobs:{session_id}"

    def load(self, session_id: str) -> Versioned | None:
        revision, text = self.redis.hmget(self._keys(session_id)[0], ["rev", "state"])
        if revision is None or text is None:
            return None
        return Versioned(int(_text(revision)), _text(text))

    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        result = self._cas(
            keys=list(self._keys(session_id)),
            args=["" if expected == 0 else str(expected), text, str(self.ttl or 0)],
        )
        return None if result is None else int(result)

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
