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
from tests.sdk_http import sdk_http

from .convo import RecordingTransport, run_shared_turn

pytestmark = pytest.mark.redis
TURNS = 12


def test_compare_and_set_is_atomic_and_json(redis_url: str, redis_prefix: str) -> None:
    store = RedisStore(redis_url, prefix=redis_prefix, ttl=120)
    assert store.load("s") is None
    assert store.compare_and_set("s", 0, '{"a":1}') == 1
    assert store.compare_and_set("s", 0, '{"a":2}') is None  # someone else created it first
    assert store.compare_and_set("s", 1, '{"a":3}') == 2
    assert store.compare_and_set("s", 1, '{"a":4}') is None  # stale revision
    loaded = store.load("s")
    assert loaded is not None and (loaded.revision, loaded.text) == (2, '{"a":3}')
    store.put_blob("s", "k", "blob text")
    assert store.get_blob("s", "k") == "blob text"
    raw = store.redis
    assert raw.hget(f"{redis_prefix}session:s", "state") == b'{"a":3}'  # plain JSON text, not pickle
    assert 0 < raw.ttl(f"{redis_prefix}session:s") <= 120
    assert 0 < raw.ttl(f"{redis_prefix}blobs:s") <= 120
    store.delete("s")
    assert store.load("s") is None and store.get_blob("s", "k") is None


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


def test_two_processes_alternating_turns_emit_the_bytes_of_one_process(
    redis_url: str, redis_prefix: str, tmp_path: Path, patched: None
) -> None:
    import redis

    worker = Path(__file__).resolve().parent / "_worker.py"
    outs = [tmp_path / "w0.json", tmp_path / "w1.json"]
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                str(worker),
                redis_url,
                redis_prefix,
                "shared",
                str(p),
                str(TURNS),
                str(outs[p]),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for p in (0, 1)
    ]
    redis.Redis.from_url(redis_url).rpush(f"{redis_prefix}go:0", 0)
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()
    sent = sorted(
        (item for out in outs for item in json.loads(out.read_text())), key=lambda item: int(item["turn"])
    )
    assert [item["turn"] for item in sent] == list(range(TURNS))
    shared = [base64.b64decode(item["body"]) for item in sent]
    alone = _single_process(patched)
    assert len(shared) == len(alone) == TURNS
    for turn, (a, b) in enumerate(zip(shared, alone, strict=True)):
        assert a == b, f"turn {turn} differs"
    # The session really was shared: one state, every turn counted, primitives applied.
    state = RedisStore(redis_url, prefix=redis_prefix).load("shared")
    assert state is not None
    shared_state = SessionState.loads(state.text)
    assert shared_state.requests == TURNS
    assert [f.slug for f in shared_state.slug_folds] == ["handbook"]
    assert [(f.start, f.end) for f in shared_state.range_folds] == [(0, 4)]
    assert len(shared_state.volatile) == 1
    assert b"<conversation-summary" in shared[-1] and b"Handbook: refunds within fourteen days." in shared[-1]
