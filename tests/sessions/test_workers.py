"""Issue 44's acceptance: the documented per-request pattern under real uvicorn workers and a real Redis
that restarts and runs out of memory.

Two uvicorn workers serve ``tests/sessions/_uvicorn_app.py``: every request is ``async with
telos_wrap.session(conv, store=RedisStore(...))`` around one ``AsyncAnthropic`` call to the emulator
(served by this process over HTTP, so every worker sees one vendor cache). Twelve conversations
whose turns land on either worker (a new connection per request) run through three phases:

* calm: turns 0-3;
* restart: Redis crashes (killed; its append-only file, synced on every write, keeps its data, as
  in production and in the issue's drill) for turns 4-5 and is started again for 6-7;
* out of memory: ``maxmemory`` so low that Redis refuses every write (reads still answer) for turns
  8-9; six conversations end there (their last turns never written while Redis refused them), the
  other six run turns 10-11 after ``maxmemory`` is lifted.

The hit ratio of the disturbed turns (4-11) must be at least 90% of the calm one (turns 1-3; turn 0
writes the cache); before issue 44 a new session object read nothing from the vendor's cache while
the store could not be read. Then, without another request, the stored stats of every conversation
(ended ones included) must be exact within a minute: the workers' background flush writes what they
held (uvicorn workers never run exit hooks).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, serve
from telos_wrap.sessions import RedisStore, Session
from telos_wrap.sessions.durable.state import SessionState
from tests.sdk_http import sdk_http as httpx  # the HTTP library both SDKs use

pytestmark = [pytest.mark.redis, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
CONVERSATIONS = 12


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OwnRedis:
    """A redis-server of the test's own (it is restarted and starved: never the shared one)."""

    def __init__(self, *options: str, data: Path | None = None) -> None:
        # With ``data``: an append-only file synced on every write, as in production (a restart
        # keeps the data; a Redis that loses it is the documented loss: docs/sessions.md).
        persistence = (
            ("--appendonly", "no")
            if data is None
            else ("--appendonly", "yes", "--appendfsync", "always", "--dir", str(data))
        )
        self.options = (*persistence, *options)
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (apt-get install redis-server)")
        self.binary = binary
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        import redis

        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                *self.options,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, socket_timeout=1)
        for _ in range(400):
            try:
                if client.ping():
                    client.close()
                    return
            except redis.exceptions.ConnectionError:
                time.sleep(0.025)
        pytest.fail("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()  # as a crash (what the append-only file holds is kept)
            self.process.wait(timeout=10)
            self.process = None

    def command(self, *args: Any) -> Any:
        import redis

        client = redis.Redis(port=self.port, socket_timeout=2)
        try:
            return client.execute_command(*args)
        finally:
            client.close()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    server = OwnRedis(data=tmp_path)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def workers(own_redis: OwnRedis) -> Iterator[tuple[str, str, str]]:
    """Two uvicorn workers of the app, the store prefix they use and the emulator's base URL their
    client calls: (base URL, prefix, emulator URL)."""
    pytest.importorskip("uvicorn")
    prefix = f"t44-{uuid.uuid4().hex[:8]}:"
    port = _free_port()
    with serve(Emulator()) as emulator_url:
        env = {
            **os.environ,
            "TELOS_APP_REDIS": own_redis.url,
            "TELOS_APP_PREFIX": prefix,
            "TELOS_APP_EMULATOR": emulator_url,
        }
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "_uvicorn_app:app",
                "--app-dir",
                str(HERE),
                "--workers",
                "2",
                "--port",
                str(port),
                "--log-level",
                "warning",
                "--no-access-log",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url)
            yield url, prefix, emulator_url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + 300  # two interpreters importing the SDK and telos, on a busy CI VM
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/memory", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    pytest.fail("the uvicorn workers did not start")


async def _turns(url: str, turn: int, convs: range) -> list[dict[str, Any]]:
    # A new connection per request: the workers share the listening socket, so turns of one
    # conversation land on either worker.
    limits = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        replies = await asyncio.gather(
            *(client.post(f"{url}/chat", json={"conv": f"conv-{c}", "turn": turn}) for c in convs)
        )
    for reply in replies:
        reply.raise_for_status()
    return [reply.json() for reply in replies]


def _ratio(answers: list[dict[str, Any]]) -> float:
    read = sum(a["read"] for a in answers)
    return read / sum(a["read"] + a["write"] + a["raw"] for a in answers)


def test_per_request_sessions_keep_the_cache_and_exact_stats_through_redis_trouble(
    own_redis: OwnRedis, workers: tuple[str, str, str]
) -> None:
    url, prefix, emulator_url = workers
    everyone = range(CONVERSATIONS)
    by_turn: dict[int, list[dict[str, Any]]] = {}

    def run(turn: int, convs: range = everyone) -> None:
        by_turn[turn] = asyncio.run(_turns(url, turn, convs))

    started = time.monotonic()
    for turn in range(4):  # calm
        run(turn)
    own_redis.stop()  # a crash: down for two turns, its data kept on disk
    for turn in (4, 5):
        run(turn)
    own_redis.start()
    for turn in (6, 7):
        run(turn)
    own_redis.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
    own_redis.command("CONFIG", "SET", "maxmemory", "1")  # every write refused: OOM
    for turn in (8, 9):
        run(turn)
    own_redis.command("CONFIG", "SET", "maxmemory", "0")
    back = time.monotonic()
    ending = range(CONVERSATIONS // 2, CONVERSATIONS)  # conversations 0-5 ended at turn 9
    for turn in (10, 11):
        run(turn, ending)

    calm = _ratio([a for t in (1, 2, 3) for a in by_turn[t]])
    disturbed = _ratio([a for t in range(4, 12) for a in by_turn[t]])
    pids = {a["pid"] for answers in by_turn.values() for a in answers}
    print(f"hit ratio: calm {calm:.3f}, through restart and OOM {disturbed:.3f}; workers {len(pids)}")
    assert len(pids) == 2, "every turn landed on one worker: the test would prove nothing"
    assert disturbed >= 0.9 * calm, (calm, disturbed)

    # Exact stored stats for every conversation, without another request, within a minute.
    expected = {f"conv-{c}": 12 if c in ending else 10 for c in everyone}
    store = RedisStore(own_redis.url, prefix=prefix)
    # Where the workers' sessions keep their state: within the app client's tenant (docs/sessions.md,
    # "Tenants"), read at the key a session bound to that client uses.
    import anthropic

    app_client = anthropic.Anthropic(api_key="app-key", base_url=emulator_url)
    keys = {conv: Session(conv, store=store).bind(app_client).store_key for conv in expected}
    app_client.close()
    seen: dict[str, tuple[int, int]] = {}
    while time.monotonic() - back < 60:
        for conv in expected:
            found = store.load(keys[conv])
            state = SessionState.loads(found.text) if found is not None else None
            seen[conv] = (
                (0, 0) if state is None else (state.requests, sum(u.responses for u in state.usage.values()))
            )
        if all(seen[conv] == (n, n) for conv, n in expected.items()):
            break
        time.sleep(0.5)
    store.close()
    print(
        f"stats exact {time.monotonic() - back:.1f} s after Redis took writes again; "
        f"test {time.monotonic() - started:.1f} s"
    )
    assert seen == {conv: (n, n) for conv, n in expected.items()}


@pytest.fixture
def sleepy_redis() -> Iterator[OwnRedis]:
    server = OwnRedis("--enable-debug-command", "yes")
    try:
        yield server
    finally:
        server.stop()


def _slowest_calls(store: RedisStore, sleep: Any, timeout: float) -> tuple[list[float], list[float]]:
    """Call durations of four per-request conversations on ``store``: a calm run of 2 s, then 5 s
    while ``sleep()`` (run in a thread 0.3 s in) keeps the store from answering."""
    import threading

    import anthropic

    from tests.sdk_http import AsyncEmulatorTransport

    from .convo import MODEL, messages_for, system_prompt

    emulator = Emulator()

    async def conversation(client: Any, conv: int, until: float, times: list[float]) -> None:
        turn = 0
        while time.monotonic() < until:
            start = time.monotonic()
            async with telos_wrap.session(f"sleepy-{conv}", store=store):
                await client.messages.create(
                    model=MODEL, max_tokens=8, system=system_prompt(turn), messages=messages_for(turn % 8)
                )
            times.append(time.monotonic() - start)
            turn += 1

    async def run(seconds: float) -> list[float]:
        times: list[float] = []
        client = anthropic.AsyncAnthropic(
            api_key="k",
            http_client=httpx.AsyncClient(transport=AsyncEmulatorTransport(emulator)),
            max_retries=0,
        )
        until = time.monotonic() + seconds
        await asyncio.gather(*(conversation(client, c, until, times) for c in range(4)))
        await client.close()
        await store.aclose()
        return times

    calm = asyncio.run(run(2.0))

    def sleeper() -> None:
        time.sleep(0.3)
        sleep()

    thread = threading.Thread(target=sleeper)
    thread.start()
    slow = asyncio.run(run(5.0))
    thread.join()
    print(f"slowest call: calm {max(calm):.3f} s, store asleep {max(slow):.3f} s (timeout {timeout} s)")
    print("slowest while asleep:", [round(t, 3) for t in sorted(slow)[-5:]])
    return calm, slow


@pytest.mark.timed  # a wall-clock bound: run alone (CI's first pass)
def test_the_store_timeout_bounds_an_async_call_while_redis_sleeps(
    sleepy_redis: OwnRedis, patched_lenient: None
) -> None:
    """``DEBUG SLEEP 2`` twice back to back (Redis answers nothing for 4 s): no call's store time
    outlasts the store's timeout plus 100 ms (before issue 44: 1.87 s, 2.45 s with two sleeps, for
    1 s). The vendor's own time is the calm run's slowest call (an in-process emulator)."""
    timeout = 0.5
    store = RedisStore(sleepy_redis.url, prefix=f"sleep-{uuid.uuid4().hex[:6]}:", timeout=timeout)

    def sleep_twice() -> None:
        for _ in range(2):
            sleepy_redis.command("DEBUG", "SLEEP", "2")

    calm, slow = _slowest_calls(store, sleep_twice, timeout)
    store.close()
    assert max(slow) < timeout + 0.1 + max(calm), (max(calm), max(slow))
    assert store.breaker.stats().trips >= 1  # the store was too slow: the breaker opened


@pytest.mark.timed  # a wall-clock bound: run alone (CI's first pass)
def test_the_store_timeout_bounds_an_async_call_while_cluster_primaries_sleep(
    redis_cluster_url: str, patched_lenient: None
) -> None:
    """The same bound on a Redis Cluster, whose client retries a timed-out command on a refreshed slot
    map: every primary sleeps 1.2 s twice back to back (``DEBUG SLEEP``; below the cluster's node
    timeout of 1.5 s, so no replica takes over: a slow cluster, not a failover)."""
    import redis

    timeout = 0.5
    store = RedisStore(redis_cluster_url, prefix=f"sleep-{uuid.uuid4().hex[:6]}:", timeout=timeout)
    assert store.cluster
    primaries = [(node.host, int(node.port)) for node in store.redis.get_primaries()]
    probe = redis.Redis(host=primaries[0][0], port=primaries[0][1], socket_timeout=2)
    try:
        probe.execute_command("DEBUG", "SLEEP", "0")
    except redis.exceptions.ResponseError as exc:
        pytest.skip(f"this cluster refuses DEBUG ({exc}): start it with --enable-debug-command")
    finally:
        probe.close()

    def sleep_twice() -> None:
        import threading

        def one(host: str, port: int) -> None:
            node = redis.Redis(host=host, port=port, socket_timeout=5)
            try:
                for _ in range(2):
                    node.execute_command("DEBUG", "SLEEP", "1.2")
            finally:
                node.close()

        threads = [threading.Thread(target=one, args=primary) for primary in primaries]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    calm, slow = _slowest_calls(store, sleep_twice, timeout)
    store.close()
    assert max(slow) < timeout + 0.1 + max(calm), (max(calm), max(slow))
