"""One worker process of the failover test (tests/sessions/test_failover.py).

Usage: python _failover_worker.py CONFIG_JSON

CONFIG_JSON (waited for: the worker imports while the test starts the cluster) holds ``url`` (the
cluster), ``prefix``, ``mode`` (``sync``: one thread per session, the store's sync client;
``async``: one asyncio task per session, its ``redis.asyncio`` client), ``sessions`` (the ids this
worker calls: its own, and ids another worker calls too), ``pace`` (seconds between two calls of a
session), ``ready`` (a file written once every session made its first call), ``stop`` (a file
whose existence ends the load) and ``out`` (where the report goes).

Every call is the real Anthropic SDK (patched, fail-open) against the emulator. The report: per
session the calls made; per call its session, start (``time.monotonic``, the same clock in every
process of the machine), duration and whether it skipped the store (the session held its state in
this process after the call: the write was skipped by an open breaker or failed); the exceptions
raised by calls; each node breaker's counters; the store's events; asyncio's log records.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.sdk_http

import anthropic
from convo import MODEL, messages_for, system_prompt  # type: ignore[import-not-found]

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.failopen import failure_counts
from telos_wrap.sessions import RedisStore, Session
from telos_wrap.sessions.core import runtime_of
from tests.sdk_http import AsyncEmulatorTransport, EmulatorTransport, sdk_http


def _kwargs(turn: int) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 16,
        "system": system_prompt(turn),
        "messages": messages_for(turn % 12),
    }


class _Records(logging.Handler):
    """Keeps a logger's records: asyncio's (a store call given up must leave nothing for asyncio to
    report) and the sessions' warnings (which failure opened which window, when)."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append((time.monotonic(), record.getMessage()))


def _held(sess: Session) -> bool:
    """Whether the session holds state the store does not have (this call's write did not land)."""
    return runtime_of(sess)._sync.dirty is not None


def main(config: dict[str, Any]) -> None:
    asyncio_records, warnings = _Records(), _Records()
    logging.getLogger("asyncio").addHandler(asyncio_records)
    sessions_log = logging.getLogger("telos_wrap.sessions")
    sessions_log.addHandler(warnings)
    sessions_log.setLevel(logging.WARNING)
    telos_wrap.patch(strict=False)
    store = RedisStore(config["url"], prefix=config["prefix"], timeout=0.5, backoff=0.25, max_backoff=1.0)
    ids: list[str] = config["sessions"]
    pace: float = config["pace"]
    stop = Path(config["stop"])
    sessions = {sid: telos_wrap.session(sid, store=store) for sid in ids}
    calls = dict.fromkeys(ids, 0)
    records: list[tuple[str, float, float, bool, str | None]] = []
    errors: list[str] = []
    started_all = threading.Barrier(len(ids) + 1) if config["mode"] == "sync" else None
    unwritten: list[str] = []

    def record(sid: str, started: float, sess: Session) -> None:
        node = store._node_of(sess.store_key)  # the key of the calls' tenant
        records.append((sid, started, time.monotonic() - started, _held(sess), node))
        calls[sid] += 1

    if config["mode"] == "sync":

        def in_thread(sid: str) -> None:
            client = anthropic.Anthropic(
                api_key="test",
                http_client=sdk_http.Client(transport=EmulatorTransport(Emulator())),
                max_retries=0,
            )
            sess = sessions[sid]
            first = True
            try:
                with sess:
                    while first or not stop.exists():
                        started = time.monotonic()
                        client.messages.create(**_kwargs(calls[sid]))
                        record(sid, started, sess)
                        if first:
                            first = False
                            assert started_all is not None
                            started_all.wait(timeout=120)
                        time.sleep(pace)
                # Write what the session holds (pending usage, outage state): a breaker still open
                # skips a flush, so it is tried again until it lands or 10 s passed.
                for _ in range(50):
                    sess.flush()
                    if not runtime_of(sess)._sync.pending and runtime_of(sess)._sync.dirty is None:
                        break
                    time.sleep(0.2)
                else:
                    unwritten.append(sid)
            except BaseException as exc:
                errors.append(repr(exc))
            finally:
                client.close()

        threads = [threading.Thread(target=in_thread, args=(sid,)) for sid in ids]
        for thread in threads:
            thread.start()
        assert started_all is not None
        started_all.wait(timeout=120)
        Path(config["ready"]).write_text("ready")
        for thread in threads:
            thread.join()
    else:

        async def run() -> None:
            http = sdk_http.AsyncClient(transport=AsyncEmulatorTransport(Emulator()))
            client = anthropic.AsyncAnthropic(api_key="test", http_client=http, max_retries=0)
            first_done = asyncio.Event()
            firsts = [0]

            async def conversation(sid: str) -> None:
                sess = sessions[sid]
                first = True
                async with sess:
                    while first or not stop.exists():
                        started = time.monotonic()
                        await client.messages.create(**_kwargs(calls[sid]))
                        record(sid, started, sess)
                        if first:
                            first = False
                            firsts[0] += 1
                            if firsts[0] == len(ids):
                                first_done.set()
                        await asyncio.sleep(pace)
                for _ in range(50):
                    await sess.aflush()
                    if not runtime_of(sess)._sync.pending and runtime_of(sess)._sync.dirty is None:
                        break
                    await asyncio.sleep(0.2)
                else:
                    unwritten.append(sid)

            async def ready() -> None:
                await first_done.wait()
                Path(config["ready"]).write_text("ready")

            try:
                results = await asyncio.gather(
                    ready(), *(conversation(sid) for sid in ids), return_exceptions=True
                )
                errors.extend(repr(r) for r in results if isinstance(r, BaseException))
            finally:
                await client.close()
                await store.aclose()

        asyncio.run(run())

    routed = {sid: store._node_of(sessions[sid].store_key) for sid in ids} if config["mode"] == "sync" else {}
    report = {
        "calls": calls,
        "records": records,
        "errors": errors,
        "unwritten": unwritten,
        "nodes": {
            name: {"trips": s.trips, "skipped": s.skipped, "failures": s.failures, "state": s.state}
            for name, s in store.node_breakers.stats().items()
        },
        "store_breaker": {"trips": store.breaker.stats().trips, "skipped": store.breaker.stats().skipped},
        "events": dict(store.breaker.stats().events),
        "recent": [(e.kind, e.session_id, e.requests, e.reason) for e in store.breaker.stats().recent],
        "routed": routed,
        "failure_counts": failure_counts(),
        "asyncio": asyncio_records.messages,
        "warnings": warnings.messages,
    }
    store.close()
    Path(config["out"]).write_text(json.dumps(report))


if __name__ == "__main__":
    # The test starts the workers first (importing takes seconds) and the cluster meanwhile: the
    # configuration, with the cluster's URL, is written once it is up.
    config = Path(sys.argv[1])
    deadline = time.monotonic() + 120
    while not config.exists():
        if time.monotonic() > deadline:
            raise SystemExit("no configuration within 120 s")
        time.sleep(0.05)
    main(json.loads(config.read_text()))
