"""Circuit breakers that follow the failure: one per Redis Cluster node, routed by redis-py's slot map.

A failure opens the breaker of the node that serves the failing session's slot: sessions on other
nodes keep writing; once the slot map names a promoted replica, the failed node's sessions use the
new primary's breaker. A single server keeps one breaker. The table is bounded in bytes.
"""

from __future__ import annotations

import gc
import logging
import time
import tracemalloc
from collections import Counter
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import ManualClock
from telos_wrap.sessions import MemoryStore, RedisStore, SessionState
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.stores.breaker import StoreBreaker, breaker_of
from telos_wrap.sessions.stores.node_breakers import BREAKER_BYTES, NodeBreakers

from .test_store_io import CountingStore, _ask

# -- the table ----------------------------------------------------------------------------------------


def test_one_breaker_per_node_name() -> None:
    table = NodeBreakers(StoreBreaker)
    a, b = table.get("10.0.0.1:7000"), table.get("10.0.0.2:7000")
    assert a is not b and table.get("10.0.0.1:7000") is a and len(table) == 2


def test_the_table_is_bounded_in_bytes_least_recently_used_first_out() -> None:
    clock = ManualClock(0.0)
    table = NodeBreakers(lambda: StoreBreaker(clock=clock.now), max_bytes=10 * BREAKER_BYTES)
    kept = table.get("kept:1")
    kept.failure(ConnectionError("down"))
    first = table.get("node:0")
    first.failure(ConnectionError("down"))  # one trip, then the node is never asked for again
    for n in range(
        1, 1000
    ):  # nodes replaced over weeks (new addresses): the table never grows past its bound
        table.get(f"node:{n}")
        table.get("kept:1")  # asked for all along: never dropped
        assert table.bytes_held <= table.max_bytes
    assert len(table) < 10 and table.get("kept:1") is kept
    assert "node:0" not in table.stats()
    # The dropped breakers' counters stay in the totals (they never go backwards); a dropped
    # breaker is not an open one.
    total = table.total()
    assert (total.trips, total.failures) == (2, 2)
    clock.advance(60.0)
    assert kept.allow()
    kept.success()
    assert table.total().state == "closed"


def test_a_breaker_holds_at_most_its_counted_bytes() -> None:
    """``BREAKER_BYTES`` is what the byte bound counts per node: what a breaker holds, measured."""
    gc.collect()
    logging.disable(logging.WARNING)  # the warnings a trip writes are kept by pytest's log capture
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        breakers = [StoreBreaker() for _ in range(200)]
        for breaker in breakers:  # a breaker that has been used: tripped, probed, closed
            breaker.failure(ConnectionError("down"))
            breaker.busy()
        held = (tracemalloc.get_traced_memory()[0] - before) / len(breakers)
    finally:
        tracemalloc.stop()
        logging.disable(logging.NOTSET)
    assert held <= BREAKER_BYTES, held


# -- routing ------------------------------------------------------------------------------------------


class _Node:
    def __init__(self, name: str) -> None:
        self.name = name


class _ClusterClient:
    """What ``RedisStore`` reads of a redis-py cluster client to route breakers: its slot map."""

    def __init__(self, owner: dict[int, str]) -> None:
        self.nodes_manager = type("NodesManager", (), {})()
        self.nodes_manager.slots_cache = {slot: [_Node(name)] for slot, name in owner.items()}

    def register_script(self, script: str) -> object:
        return object()


def _slot(store: RedisStore, session_id: str) -> int:
    from redis.crc import key_slot

    return int(key_slot(store.keys_of(session_id)[0].encode()))


def test_a_cluster_session_uses_the_breaker_of_the_node_serving_its_slot() -> None:
    client = _ClusterClient({})
    store = RedisStore(client)
    assert store.cluster
    ids = [f"s{n}" for n in range(40)]
    # No slot map read yet: the store's one breaker.
    assert {id(store.breaker_for(sid)) for sid in ids} == {id(store.breaker)}
    owner = {_slot(store, sid): "a:1" if n % 2 else "b:1" for n, sid in enumerate(ids)}
    client.nodes_manager.slots_cache = {slot: [_Node(name)] for slot, name in owner.items()}
    on_a = [sid for sid in ids if owner[_slot(store, sid)] == "a:1"]
    on_b = [sid for sid in ids if owner[_slot(store, sid)] == "b:1"]
    breaker_a = store.breaker_for(on_a[0])
    assert all(store.breaker_for(sid) is breaker_a for sid in on_a)
    assert all(store.breaker_for(sid) is not breaker_a for sid in on_b)
    breaker_a.failure(ConnectionError("a died"))
    assert all(breaker_of(store, sid).is_open for sid in on_a)
    assert not any(breaker_of(store, sid).is_open for sid in on_b), "b's sessions keep the store"
    # The replica of a is promoted (c:1) and redis-py re-read the slot map: a's sessions are routed
    # to the new primary's breaker, closed.
    client.nodes_manager.slots_cache = {
        slot: [_Node("c:1" if name == "a:1" else name)] for slot, name in owner.items()
    }
    assert not any(store.breaker_for(sid).is_open for sid in on_a)
    assert set(store.node_breakers.stats()) == {"a:1", "b:1", "c:1"}
    assert breaker_of(store) is store.breaker  # events are recorded on the store's own breaker


def test_a_single_server_keeps_one_breaker() -> None:
    store = RedisStore("redis://127.0.0.1:1/0")
    assert not store.cluster
    assert all(store.breaker_for(f"s{n}") is store.breaker for n in range(20))
    assert len(store.node_breakers) == 0


class _RoutedStore(CountingStore):
    """A ``CountingStore`` with a breaker per "node": sessions whose id starts with ``a`` live on node
    a, which can fail on its own."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(MemoryStore())
        self.breaker = StoreBreaker(backoff=5.0, max_backoff=20.0, clock=clock.now)
        self.node_breakers = NodeBreakers(
            lambda: StoreBreaker(backoff=5.0, max_backoff=20.0, clock=clock.now)
        )
        self.a_down = False

    def breaker_for(self, session_id: str) -> StoreBreaker:
        return self.node_breakers.get(session_id[0])

    def _routed(self, session_id: str) -> None:
        if self.a_down and session_id.startswith("a"):
            raise ConnectionError("node a is down")

    def load(self, session_id: str) -> Any:
        self._routed(session_id)
        return super().load(session_id)

    def swap(self, session_id: str, expected: int, text: str) -> Any:
        self._routed(session_id)
        return super().swap(session_id, expected, text)

    def get_blob(self, session_id: str, key: str) -> str | None:
        self._routed(session_id)
        return super().get_blob(session_id, key)


def test_a_failed_node_skips_only_its_own_sessions(lenient: anthropic.Anthropic, clock: ManualClock) -> None:
    store = _RoutedStore(clock)
    names = ["a-1", "a-2", "b-1", "b-2"]
    sessions = {sid: telos_wrap.session(sid, store=store, fleet_learning=False) for sid in names}
    for turn in range(2):
        for sess in sessions.values():
            with sess:
                _ask(lenient, turn)
    store.a_down = True
    for turn in range(2, 5):
        for sess in sessions.values():
            with sess:
                _ask(lenient, turn)
    stats = store.node_breakers.stats()
    assert (stats["a"].state, stats["a"].trips, stats["a"].skipped) == ("open", 1, 5)
    assert (stats["b"].state, stats["b"].trips, stats["b"].skipped) == ("closed", 0, 0)
    for sid in ("b-1", "b-2"):  # written on every call
        assert SessionState.loads(store.backend.load(sessions[sid].store_key).text).requests == 5
    for sid in ("a-1", "a-2"):  # held in this process since the failure
        assert SessionState.loads(store.backend.load(sessions[sid].store_key).text).requests == 2
    store.a_down = False
    clock.advance(5.0)
    for sess in sessions.values():
        with sess:
            _ask(lenient, 5)
    for sid, sess in sessions.items():
        sess.flush()
        assert SessionState.loads(store.backend.load(sessions[sid].store_key).text).requests == 6, sid
    assert store.breaker.stats().events == Counter(reconciled=2)


@pytest.mark.timed
@pytest.mark.redis
def test_a_paused_cluster_node_skips_only_its_sessions(
    redis_cluster_url: str, redis_prefix: str, lenient: anthropic.Anthropic
) -> None:
    """A real cluster: one primary stops answering (``CLIENT PAUSE``, so no failover starts); the
    sessions on the two others keep writing, the paused node's skip the store until it answers."""
    import redis

    store = RedisStore(redis_cluster_url, prefix=redis_prefix, timeout=0.3, backoff=0.5, max_backoff=1.0)
    ids = [f"paused-{n}" for n in range(12)]
    sessions = {sid: telos_wrap.session(sid, store=store, fleet_learning=False) for sid in ids}
    try:
        for sess in sessions.values():
            with sess:
                _ask(lenient, 0)
        node = store._node_of(sessions[ids[0]].store_key)  # the key of the calls' tenant
        assert node is not None
        host, port = node.rsplit(":", 1)
        on_node = {sid for sid in ids if store._node_of(sessions[sid].store_key) == node}
        assert 0 < len(on_node) < len(ids)
        admin = redis.Redis(host=host, port=int(port))
        admin.execute_command("CLIENT", "PAUSE", 1500, "ALL")
        paused_at = time.monotonic()
        for sess in sessions.values():
            with sess:
                _ask(lenient, 1)
        held = {sid for sid, sess in sessions.items() if runtime_of(sess)._sync.dirty is not None}
        assert held == on_node, (held, on_node)
        stats = store.node_breakers.stats()
        assert stats[node].trips == 1
        assert all(s.trips == 0 for name, s in stats.items() if name != node), stats
        time.sleep(max(0.0, 1.6 - (time.monotonic() - paused_at)))
        for sess in sessions.values():
            with sess:
                _ask(lenient, 2)
            sess.flush()
        admin.close()
        for sid in ids:
            stored = SessionState.loads(store.load(sessions[sid].store_key).text)
            assert (stored.requests, sum(u.responses for u in stored.usage.values())) == (3, 3), sid
    finally:
        store.close()
