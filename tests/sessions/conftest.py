"""Fixtures for the session tests: a fresh default store, the emulator behind the real SDK, Redis."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anthropic
import pytest

from telos_wrap.emulator import Emulator, ManualClock
from tests.sdk_http import sdk_http
from tests.stores import fresh_store  # noqa: F401  (autouse: a fresh default store per test)

from .convo import RecordingTransport


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000.0)


@pytest.fixture
def emu(clock: ManualClock) -> Emulator:
    return Emulator(clock=clock)


@pytest.fixture
def transport(emu: Emulator) -> RecordingTransport:
    return RecordingTransport(emu)


def _sdk_client(transport: RecordingTransport) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(
        api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0
    )
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def claude(patched: None, transport: RecordingTransport) -> Iterator[anthropic.Anthropic]:
    """The real Anthropic SDK, patched strict, talking to the emulator (bodies recorded as bytes)."""
    yield from _sdk_client(transport)


@pytest.fixture
def lenient(patched_lenient: None, transport: RecordingTransport) -> Iterator[anthropic.Anthropic]:
    """``claude`` patched in the production (fail-open) mode: a failing store must not fail the call."""
    yield from _sdk_client(transport)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _xdist_worker() -> int:
    """The number of this pytest-xdist worker (``gw1`` is 1); 0 outside xdist (and on ``gw0``)."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0


def _worker_db(url: str) -> str:
    """``url`` with its database number moved up by the xdist worker's number: under
    ``pytest -n 2`` (``.ci/run``) each worker has a database of its own on the one server."""
    worker = _xdist_worker()
    if not worker:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{int(parts.path.strip('/') or 0) + worker}"))


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """``TELOS_REDIS_URL`` if set (under pytest-xdist, its database number plus the worker's), else
    a throwaway ``redis-server`` on a free port."""
    configured = os.environ.get("TELOS_REDIS_URL")
    if configured:
        yield _worker_db(configured)
        return
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(
            "redis-server is not installed (apt-get install redis-server) and TELOS_REDIS_URL is unset"
        )
    import redis

    port = _free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    try:
        for _ in range(200):
            try:
                if client.ping():
                    break
            except redis.exceptions.ConnectionError:
                time.sleep(0.025)
        else:
            pytest.fail("redis-server did not start")
        yield url
    finally:
        # Sessions still holding usage for this server write it now, while it is up: the
        # interpreter's at-exit flush would find it gone and warn after a green run.
        from telos_wrap.sessions import live

        live.flush_held()
        # What could not be written now never will be (this conftest's fixture is imported by other
        # directories too, each with a server of its own): nothing is left for the at-exit flush.
        live.drop_held()
        client.close()
        process.terminate()
        process.wait(timeout=10)


#: Starts and stops a local Redis Cluster (``start DIR`` / ``stop DIR``).
CLUSTER_SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "redis-cluster.sh"


class RedisClusterProcesses:
    """A real Redis Cluster of the test's own: 3 primaries and 3 replicas on free loopback ports,
    started and stopped by ``.ci/redis-cluster.sh`` (the script CI uses)."""

    def __init__(self, data: Path, node_timeout_ms: int = 1000, *, full_coverage: bool = True) -> None:
        for binary in ("redis-server", "redis-cli"):
            if shutil.which(binary) is None:
                pytest.skip(f"{binary} is not installed (apt-get install redis-server)")
        self.data = data
        self.env = {
            **os.environ,
            "REDIS_CLUSTER_NODE_TIMEOUT": str(node_timeout_ms),
            "REDIS_CLUSTER_FULL_COVERAGE": "yes" if full_coverage else "no",
        }
        started = subprocess.run(
            ["bash", str(CLUSTER_SCRIPT), "start", str(data)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if started.returncode != 0:
            pytest.fail(f"the Redis Cluster did not start: {started.stderr}")
        self.url = (data / "url").read_text().strip()
        self.ports = [int(port) for port in (data / "ports").read_text().split()]

    def client(self, port: int) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)

    def primary_of(self, key: str) -> int:
        """The port of the primary that serves ``key`` now."""
        for port in self.ports:
            try:
                node = self.client(port)
                slot = int(node.execute_command("CLUSTER", "KEYSLOT", key))
                for start, end, primary, *_ in node.execute_command("CLUSTER", "SLOTS"):
                    if start <= slot <= end:
                        return int(primary[1])
            except Exception:
                continue
        raise AssertionError("no node of the cluster answered")

    def kill(self, port: int) -> None:
        """SIGKILL the node on ``port`` (no shutdown, nothing flushed: as a crashed host)."""
        pidfile = self.data / f"node-{port}" / "redis.pid"
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
        pidfile.unlink()

    def restart(self, port: int) -> None:
        """Start the node on ``port`` again (it rejoins from its nodes.conf: a replica if replaced)."""
        subprocess.run(
            ["bash", str(CLUSTER_SCRIPT), "restart", str(self.data), str(port)],
            env=self.env,
            check=True,
            capture_output=True,
            timeout=60,
        )

    def stop(self) -> None:
        subprocess.run(["bash", str(CLUSTER_SCRIPT), "stop", str(self.data)], check=False, timeout=60)


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``TELOS_REDIS_CLUSTER_URL`` if set, else a throwaway cluster (``redis+cluster://…``).

    A cluster has one database: under pytest-xdist only the first worker uses the configured
    cluster, every other worker starts a throwaway cluster of its own."""
    configured = os.environ.get("TELOS_REDIS_CLUSTER_URL")
    if configured and not _xdist_worker():
        yield configured
        return
    cluster = RedisClusterProcesses(tmp_path_factory.mktemp("redis-cluster"))
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture(params=["single", "cluster"])
def store_url(request: pytest.FixtureRequest) -> str:
    """The store suite runs on both: a single ``redis-server`` and a real Redis Cluster."""
    return str(request.getfixturevalue("redis_url" if request.param == "single" else "redis_cluster_url"))


@pytest.fixture
def redis_prefix() -> str:
    """A key prefix unique to the test, so tests sharing one server never see each other's keys."""
    return f"telos-test:{uuid.uuid4().hex[:12]}:"


class RedisServer:
    """A ``redis-server`` of the test's own, with an append-only file, that can be restarted on its port."""

    def __init__(self, data: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (apt-get install redis-server)")
        data.mkdir(parents=True, exist_ok=True)
        self.binary, self.data, self.port = binary, data, _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.restarts = 0
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
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                str(self.data),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        try:
            for _ in range(400):
                try:
                    if client.ping():
                        return
                except redis.exceptions.ConnectionError:
                    time.sleep(0.025)
            pytest.fail("redis-server did not start")
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()  # SIGTERM: redis-server flushes its append-only file and exits
            self.process.wait(timeout=10)
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()
        self.restarts += 1


#: ``benchmarks/`` (its oracle bound is what the end-to-end efficiency tests measure against).
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
