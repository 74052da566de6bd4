"""The Redis store: atomic compare-and-set, TTL, JSON only — and two OS processes sharing a session."""

from __future__ import annotations

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
from telos_wrap.sessions.redis_store import RedisStore
from telos_wrap.sessions.store import Swapped, Versioned
from tests.sdk_http import sdk_http

from .conftest import RedisServer
from .convo import RecordingTransport, run_shared_turn

pytestmark = pytest.mark.redis
TURNS = 12


def test_compare_and_set_is_atomic_and_json(redis_url: str, redis_prefix: str) -> None:
    store = RedisStore(redis_url, prefix=redis_prefix, ttl=120)
    assert store.load("s") is None
    first = store.compare_and_set("s", 0, '{"a":1}')
    assert first is not None and first > 0
    assert store.compare_and_set("s", 0, '{"a":2}') is None  # someone else created it first
    assert store.compare_and_set("s", first, '{"a":3}') == first + 1
    assert store.compare_and_set("s", first, '{"a":4}') is None  # stale revision
    loaded = store.load("s")
    assert loaded is not None and (loaded.revision, loaded.text) == (first + 1, '{"a":3}')
    # A lost swap returns the current state in the same round trip.
    assert store.swap("s", first, '{"a":5}') == Swapped(None, Versioned(first + 1, '{"a":3}'))
    assert store.swap("s-absent", 7, "{}") == Swapped(None, None)
    store.put_blob("s", "k", "blob text")
    assert store.get_blob("s", "k") == "blob text"
    raw = store.redis
    assert raw.hget(f"{redis_prefix}session:s", "state") == b'{"a":3}'  # plain JSON text, not pickle
    assert 0 < raw.ttl(f"{redis_prefix}session:s") <= 120
    assert 0 < raw.ttl(f"{redis_prefix}blobs:s") <= 120
    store.delete("s")
    assert store.load("s") is None and store.get_blob("s", "k") is None
    # Created again (as after a Redis restart without persistence): a fresh revision, never ``first``.
    again = store.compare_and_set("s", 0, '{"a":6}')
    assert again is not None and again not in (first, first + 1)


def test_concurrent_increments_never_lose_an_update(redis_url: str, redis_prefix: str) -> None:
    store = RedisStore(redis_url, prefix=redis_prefix)
    sessions = [telos_wrap.session("counter", store=store) for _ in range(8)]

    def bump(sess: telos_wrap.Session) -> None:
        for _ in range(25):
            sess.note_passthrough("anthropic", "anthropic", {"messages": []})

    threads = [threading.Thread(target=bump, args=(s,)) for s in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sessions[0].stats.requests == 200
    assert SessionState.loads(store.load("counter").text).requests == 200  # type: ignore[union-attr]


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
    state = RedisStore(store_url, prefix=prefix).load("shared")
    assert state is not None
    shared_state = SessionState.loads(state.text)
    assert shared_state.requests == TURNS
    assert sum(u.responses for u in shared_state.usage.values()) == TURNS  # no usage lost either
    assert [f.slug for f in shared_state.slug_folds] == ["handbook"]
    assert [(f.start, f.end) for f in shared_state.range_folds] == [(0, 4)]
    assert len(shared_state.volatile) == 1
    assert b"<conversation-summary" in shared[-1] and b"Handbook: refunds within fourteen days." in shared[-1]


def test_two_processes_alternating_turns_emit_the_bytes_of_one_process(
    redis_url: str, redis_prefix: str, tmp_path: Path, patched: None
) -> None:
    """One worker uses the sync client and the store's sync Redis client, the other the async client
    and ``redis.asyncio``: the same compare-and-set, the same bytes."""
    import redis

    processes = _run_workers(redis_url, redis_prefix, tmp_path, ("sync", "async"))
    redis.Redis.from_url(redis_url).rpush(f"{redis_prefix}go:0", 0)
    _check_shared(processes, tmp_path, redis_url, redis_prefix, patched)


RESTART_BEFORE = 5


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
