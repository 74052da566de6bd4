"""The Redis store: atomic compare-and-set, TTL, JSON only — and two OS processes sharing a session.

``store_url`` runs each store test on a single ``redis-server`` and on a real Redis Cluster (3
primaries, 3 replicas: ``TELOS_REDIS_CLUSTER_URL``, or one started by ``.ci/redis-cluster.sh``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import threading
from pathlib import Path

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.sessions import SessionState
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.stores.redis_store import RedisStore
from telos_wrap.sessions.stores.store import Swapped, Versioned
from tests.sdk_http import sdk_http
from tests.stores import key_of

from .conftest import RedisServer
from .convo import RecordingTransport, run_shared_turn

pytestmark = pytest.mark.redis
TURNS = 12


def test_compare_and_set_is_atomic_and_json(store_url: str, redis_prefix: str) -> None:
    store = RedisStore(store_url, prefix=redis_prefix, ttl=120)
    assert store.load("s") is None
    first = store.compare_and_set("s", 0, '{"a":1}')
    assert first is not None and first > 0
    assert store.compare_and_set("s", 0, '{"a":2}') is None  # someone else created it first
    second = store.compare_and_set("s", first, '{"a":3}')
    assert second is not None and second != first
    assert store.compare_and_set("s", first, '{"a":4}') is None  # stale revision
    loaded = store.load("s")
    assert loaded is not None and (loaded.revision, loaded.text) == (second, '{"a":3}')
    # A lost swap returns the current state in the same round trip.
    assert store.swap("s", first, '{"a":5}') == Swapped(None, Versioned(second, '{"a":3}'))
    assert store.swap("s-absent", 7, "{}") == Swapped(None, None)
    store.put_blob("s", "k", "blob text")
    assert store.get_blob("s", "k") == "blob text"
    raw = store.redis
    state_key, blobs_key = store.keys_of("s")
    assert (state_key, blobs_key) == (f"{redis_prefix}{{s}}:session", f"{redis_prefix}{{s}}:blobs")
    assert raw.hget(state_key, "state") == b'{"a":3}'  # plain JSON text, not pickle
    assert 0 < raw.ttl(state_key) <= 120
    assert 0 < raw.ttl(blobs_key) <= 120
    store.delete("s")
    assert store.load("s") is None and store.get_blob("s", "k") is None
    # Created again (as after a Redis restart without persistence): a fresh revision, never one
    # the session had before.
    again = store.compare_and_set("s", 0, '{"a":6}')
    assert again is not None and again not in (first, second)
    store.close()


def test_a_revision_is_never_handed_to_another_state(store_url: str, redis_prefix: str) -> None:
    """A failover can put back an older copy of a session (the replica had not received the last
    write the primary acknowledged). A worker still holding that last write's revision must not
    compare-and-set over what another worker writes next on the older copy: every write draws a
    fresh revision, so the stale worker loses and gets the newer state back."""
    store = RedisStore(store_url, prefix=redis_prefix)
    base = store.compare_and_set("s", 0, '{"turn":1}')
    assert base is not None
    acknowledged = store.compare_and_set("s", base, '{"turn":2,"by":"a"}')  # then lost in the failover
    assert acknowledged is not None
    state_key = store.keys_of("s")[0]
    store.redis.hset(state_key, mapping={"rev": base, "state": '{"turn":1}'})  # the promoted replica's copy
    by_b = store.compare_and_set("s", base, '{"turn":2,"by":"b"}')
    assert by_b is not None and by_b != acknowledged
    assert store.swap("s", acknowledged, '{"turn":3,"by":"a"}') == Swapped(
        None, Versioned(by_b, '{"turn":2,"by":"b"}')
    )
    store.close()


ODD_IDS = ["", "}x", "=", "=}x", "x}", "{a}", "plain"]


@pytest.mark.parametrize("session_id", ODD_IDS)
def test_every_session_id_keeps_its_keys_in_one_slot(
    store_url: str, redis_prefix: str, session_id: str
) -> None:
    """Both keys of any id share a hash tag (the compare-and-set script touches both, which a
    cluster allows only within one slot), and ids never share keys."""
    from redis.crc import key_slot

    from telos_wrap.sessions.stores.redis_store import hash_tag

    store = RedisStore(store_url, prefix=redis_prefix)
    state_key, blobs_key = store.keys_of(session_id)
    assert hash_tag(state_key) == hash_tag(blobs_key) != state_key
    assert key_slot(state_key.encode()) == key_slot(blobs_key.encode())
    others = {store.keys_of(other) for other in ODD_IDS if other != session_id}
    assert (state_key, blobs_key) not in others
    store.put_blob(session_id, "k", "v")
    revision = store.compare_and_set(session_id, 0, '{"id":1}')
    assert revision is not None and store.get_blob(session_id, "k") == "v"
    loaded = store.load(session_id)
    assert loaded is not None and loaded.text == '{"id":1}'
    store.delete(session_id)
    store.close()


def test_a_prefix_with_an_empty_hash_tag_is_refused() -> None:
    with pytest.raises(ValueError, match="empty hash tag"):
        RedisStore("redis://127.0.0.1:1/0", prefix="app{}:")
    assert RedisStore("redis://127.0.0.1:1/0", prefix="{app}:").keys_of("s")[0] == "{app}:{s}:session"


def test_concurrent_increments_never_lose_an_update(store_url: str, redis_prefix: str) -> None:
    store = RedisStore(store_url, prefix=redis_prefix)
    sessions = [telos_wrap.session("counter", store=store) for _ in range(8)]

    def bump(sess: telos_wrap.Session) -> None:
        for _ in range(25):
            runtime_of(sess).note_passthrough("anthropic", "anthropic", {"messages": []})

    threads = [threading.Thread(target=bump, args=(s,)) for s in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sessions[0].stats.requests == 200
    assert SessionState.loads(store.load("counter").text).requests == 200


def _single_process(patched: None) -> list[bytes]:
    transport = RecordingTransport(Emulator())
    client = anthropic.Anthropic(
        api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0
    )
    sess = telos_wrap.session("alone")
    for turn in range(TURNS):
        run_shared_turn(client, sess, turn)
    assert sess.stats.requests == TURNS
    return transport.bodies


def _run_workers(
    store_url: str, prefix: str, tmp_path: Path, modes: tuple[str, str], control_url: str | None = None
) -> list[subprocess.Popen[bytes]]:
    worker = Path(__file__).resolve().parent / "_worker.py"
    return [
        subprocess.Popen(
            [
                sys.executable,
                str(worker),
                store_url,
                prefix,
                "shared",
                str(p),
                str(TURNS),
                str(tmp_path / f"w{p}.json"),
                modes[p],
                control_url or store_url,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for p in (0, 1)
    ]


def _check_shared(
    processes: list[subprocess.Popen[bytes]], tmp_path: Path, store_url: str, prefix: str, patched: None
) -> None:
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()
    sent = sorted(
        (item for p in (0, 1) for item in json.loads((tmp_path / f"w{p}.json").read_text())),
        key=lambda item: int(item["turn"]),
    )
    assert [item["turn"] for item in sent] == list(range(TURNS))
    shared = [base64.b64decode(item["body"]) for item in sent]
    alone = _single_process(patched)
    assert len(shared) == len(alone) == TURNS
    for turn, (a, b) in enumerate(zip(shared, alone, strict=True)):
        assert a == b, f"turn {turn} differs"
    # The session really was shared: one state, every turn counted, primitives applied.
    state = RedisStore(store_url, prefix=prefix).load(key_of("shared"))  # the workers' tenant
    assert state is not None
    shared_state = SessionState.loads(state.text)
    assert shared_state.requests == TURNS
    assert sum(u.responses for u in shared_state.usage.values()) == TURNS  # no usage lost either
    assert [f.slug for f in shared_state.slug_folds] == ["handbook"]
    assert [(f.start, f.end) for f in shared_state.range_folds] == [(0, 4)]
    assert len(shared_state.volatile) == 1
    assert b"<conversation-summary" in shared[-1] and b"Handbook: refunds within fourteen days." in shared[-1]


def test_two_processes_alternating_turns_emit_the_bytes_of_one_process(
    store_url: str, redis_prefix: str, tmp_path: Path, patched: None
) -> None:
    """One worker uses the sync client and the store's sync Redis client, the other the async client
    and ``redis.asyncio`` (on a cluster: ``RedisCluster`` and its asyncio twin): the same
    compare-and-set, the same bytes."""
    from telos_wrap.sessions.stores import redis_urls

    processes = _run_workers(store_url, redis_prefix, tmp_path, ("sync", "async"))
    redis_urls.sync_client(redis_urls.parse(store_url), {}).rpush(f"{redis_prefix}go:0", 0)
    _check_shared(processes, tmp_path, store_url, redis_prefix, patched)


RESTART_BEFORE = 5


@pytest.mark.timed
def test_a_redis_restart_mid_session_loses_and_crosses_nothing(
    redis_url: str, redis_prefix: str, tmp_path: Path, patched: None
) -> None:
    """The session's Redis (append-only file on, as in production) is stopped and started again
    between turns 4 and 5; both workers' pooled connections die with it. Every turn still reaches
    the store, the bytes are those of one process, and every counter is exact."""
    import redis

    server = RedisServer(tmp_path / "data")
    try:
        processes = _run_workers(server.url, redis_prefix, tmp_path, ("async", "sync"), control_url=redis_url)
        control = redis.Redis.from_url(redis_url, socket_timeout=None)
        control.rpush(f"{redis_prefix}go:0", 0)
        for turn in range(1, TURNS):
            popped = control.blpop([f"{redis_prefix}done"], timeout=30)
            if popped is None:
                for process in processes:
                    process.kill()
                pytest.fail(
                    f"no turn {turn}: " + " | ".join(p.communicate()[1].decode()[-2000:] for p in processes)
                )
            assert int(popped[1]) == turn, popped
            if turn == RESTART_BEFORE:
                server.restart()
            control.rpush(f"{redis_prefix}go:{turn % 2}", turn)
        assert control.blpop([f"{redis_prefix}done"], timeout=60) is not None
        _check_shared(processes, tmp_path, server.url, redis_prefix, patched)
        assert server.restarts == 1
    finally:
        server.stop()


def _call(sess: telos_wrap.Session) -> None:
    runtime_of(sess).note_passthrough("anthropic", "anthropic", {"messages": []})


def _requests(store: RedisStore, session_id: str) -> int:
    stored = store.load(session_id)
    assert stored is not None
    return SessionState.loads(stored.text).requests


def test_a_write_lost_in_a_failover_is_written_back(store_url: str, redis_prefix: str) -> None:
    """The primary acknowledged a session's write, then died before its replica received it: the
    promoted replica holds the state that write replaced. The session's next call recognizes it
    (revision and text) and writes its own copy on top: nothing is lost, one ``restored`` event."""
    store = RedisStore(store_url, prefix=redis_prefix)
    sess = telos_wrap.session("rewind", store=store)
    for _ in range(3):
        _call(sess)
    state_key = store.keys_of("rewind")[0]
    replica_copy = store.redis.hgetall(state_key)
    _call(sess)  # acknowledged, never replicated
    store.redis.hset(state_key, mapping=replica_copy)  # the failover
    _call(sess)
    assert _requests(store, "rewind") == 5 == sess.stats.requests
    events = store.breaker.stats().recent
    assert [(e.kind, e.requests) for e in events] == [("restored", 5)]
    assert "failover" in events[0].reason
    store.close()


def test_a_lost_write_another_worker_built_on_stays_lost(store_url: str, redis_prefix: str) -> None:
    """Once another worker wrote on the replica's older copy, this worker's lost write is not put
    back over it (that would drop the other worker's turn): it adopts the store's state. The lost
    write stays lost (the documented loss of a failover) and nothing is mixed: the store counts the
    replica's 3 requests, the other worker's and this call. (No event: the other worker's write
    brought the count back to what this worker had seen, so nothing tells the two apart.)"""
    store = RedisStore(store_url, prefix=redis_prefix)
    # The other worker is another process: its own store client, so its own last-known state of the
    # session (``sync/known.py``: every ``Session`` object of one id on one store object in a process
    # shares what that process knows, as the objects of one worker do).
    other_worker = RedisStore(store_url, prefix=redis_prefix)
    first, second = telos_wrap.session("fork", store=store), telos_wrap.session("fork", store=other_worker)
    assert first is not second
    for _ in range(3):
        _call(first)
    state_key = store.keys_of("fork")[0]
    replica_copy = store.redis.hgetall(state_key)
    _call(first)  # lost in the failover
    store.redis.hset(state_key, mapping=replica_copy)
    _call(second)  # the other worker reads the replica's copy (3 requests) and writes the 4th
    _call(first)
    assert _requests(store, "fork") == 5
    assert store.breaker.stats().recent == ()
    store.close()
    other_worker.close()


def test_a_sentinel_managed_primary(tmp_path: Path, redis_prefix: str) -> None:
    """``redis+sentinel://SENTINEL/SERVICE``: the store asks a real Sentinel for the primary of
    SERVICE, sync and asyncio, and runs its compare-and-set there."""
    import shutil
    import time

    import redis

    from .conftest import _free_port

    primary = RedisServer(tmp_path / "primary")
    port = _free_port()
    config = tmp_path / "sentinel.conf"
    config.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor telos-primary 127.0.0.1 {primary.port} 1\n"
    )
    binary = shutil.which("redis-server")
    assert binary is not None
    sentinel = subprocess.Popen(
        [binary, str(config), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        asker = redis.Redis(port=port, socket_timeout=1)
        for _ in range(200):
            try:
                if asker.sentinel_get_master_addr_by_name("telos-primary"):
                    break
            except redis.exceptions.ConnectionError:
                pass
            time.sleep(0.025)
        store = RedisStore(f"redis+sentinel://127.0.0.1:{port}/telos-primary/0", prefix=redis_prefix)
        revision = store.compare_and_set("s", 0, '{"a":1}')
        assert revision is not None
        direct = redis.Redis.from_url(primary.url)
        assert direct.hget(store.keys_of("s")[0], "state") == b'{"a":1}'  # on the primary it named

        async def via_asyncio() -> Swapped:
            swapped = await store.aswap("s", revision, '{"a":2}')
            await store.aclose()
            return swapped

        assert asyncio.run(via_asyncio()).revision is not None
        assert store.load("s") == Versioned(int(direct.hget(store.keys_of("s")[0], "rev")), '{"a":2}')
        store.close()
        direct.close()
        asker.close()
    finally:
        sentinel.terminate()
        sentinel.wait(timeout=10)
        primary.stop()
