"""Promise F1 (docs/security.md): a bad store entry fails open for that session only.

A malformed entry (a revision that is not a number, JSON that is not a session state, a state of
another session) resets that one session with a recorded reason; the store's circuit breaker never
trips, every other session on the store keeps using it, and the session's next write repairs the
entry. Real SDK over real HTTP to the emulator; real Redis.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import telos_wrap
from telos_wrap.failopen import failure_counts
from telos_wrap.sessions import MemoryStore, RedisStore, Session, SessionState
from telos_wrap.sessions.stores.breaker import breaker_of
from tests.over_http import Wire

SYSTEM = "\n".join(f"Rule {n}: answer precisely and politely, citing the policy." for n in range(150))
BAD_STATES = ["not json at all", "[1, 2, 3]", '{"id": "x", "requests": "many"}', "{}"]


def _call(wire: Wire, store: Any, session_id: str) -> None:
    client = wire.anthropic()
    with telos_wrap.session(session_id, store=store):
        client.messages.create(
            model="claude-opus-4-8",
            max_tokens=8,
            system=SYSTEM,
            messages=[{"role": "user", "content": f"hello from {session_id}"}],
        )
    client.close()


def _key(wire: Wire, session_id: str) -> str:
    """The key the session's state is kept under for ``_call``'s client (its tenant's: T2)."""
    client = wire.anthropic()
    client.close()
    return Session(session_id).bind(client).store_key


def _check_local(wire: Wire, store: Any) -> None:
    """After 'poisoned' was read once: reset recorded, no trip, others fine, entry repaired."""
    breaker = breaker_of(store)
    stats = breaker.stats()
    assert stats.trips == 0 and stats.failures == 0, "a bad entry tripped the whole store"
    assert stats.events.get("reset") == 1
    assert failure_counts() == {}, "the call was rewritten, on a fresh state"
    _call(wire, store, "healthy")
    _call(wire, store, "poisoned")  # the next write repaired the entry: no second reset
    assert breaker.stats().events.get("reset") == 1
    repaired = store.load(_key(wire, "poisoned"))
    assert repaired is not None and SessionState.loads(repaired.text).requests == 2
    assert all("system" in json.loads(body) for body in wire.bodies)


@pytest.mark.parametrize("bad", [*BAD_STATES, "other-session"])
def test_a_malformed_state_resets_one_session_in_memory(lenient_wire: Wire, bad: str) -> None:
    store = MemoryStore()
    _call(lenient_wire, store, "healthy")
    if bad == "other-session":
        bad = store.load(_key(lenient_wire, "healthy")).text
    store.swap(_key(lenient_wire, "poisoned"), 0, bad)
    _call(lenient_wire, store, "poisoned")
    _check_local(lenient_wire, store)


@pytest.mark.redis
@pytest.mark.parametrize("field, value", [("rev", "not-a-number"), ("state", "not json"), ("rev", "")])
def test_a_malformed_redis_entry_resets_one_session(
    lenient_wire: Wire, redis_url: str, redis_prefix: str, field: str, value: str
) -> None:
    store = RedisStore(redis_url, prefix=redis_prefix)
    _call(lenient_wire, store, "healthy")
    key = store.keys_of(_key(lenient_wire, "poisoned"))[0]  # the one key layout (docs/sessions.md)
    store.redis.hset(key, mapping={"rev": "7", "state": "{}"})
    store.redis.hset(key, field, value)
    _call(lenient_wire, store, "poisoned")
    _check_local(lenient_wire, store)
