"""A telos failure never breaks the call: every stage, every entry point, sync/async, streaming.

For each injected fault (``faults.py``) and each public entry point of both SDKs (``harness.ENTRIES``)
the call is made twice from one call site through a patched client, in production (fail-open) mode:

* the call succeeds and the caller sees exactly what the unpatched SDK gives (every stream event);
* a fault on the request side sends the *original* request — byte for byte the JSON the unpatched SDK
  sends — and a fault on the response side leaves telos' rewrite on the wire;
* telos' private hint header never reaches the wire;
* ``failure_counts()`` counts the stage once per call, and one warning names it (per call site);
* with ``strict=True`` the same fault raises ``TelosStageError`` naming the stage, before anything
  is sent when the fault is on the request side.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import telos_wrap
from telos_wrap import TelosStageError, pipeline
from telos_wrap.ir.model import UsageReport
from telos_wrap.patch.calls import HINT_HEADER
from telos_wrap.sessions import MemoryStore, set_default_store
from telos_wrap.sessions.stores.redis_store import RedisStore

from ..stores import default_store
from .faults import FAULT_IDS, FAULTS, PIPELINE_STAGES, STORE_FAULTS, Fault, fault
from .harness import ENTRIES, Entry, Outcome, Wire, client_for, entry, kwargs_for

_REFERENCE: dict[str, tuple[list[Any], list[Any], Outcome]] = {}
_STAGES_RUN: dict[str, set[str]] = {}


def reference(e: Entry) -> tuple[list[Any], list[Any], Outcome]:
    """``(bodies the unpatched SDK sends, bodies telos sends, what the unpatched caller sees)``."""
    if e.id not in _REFERENCE:
        plain = Wire()
        outcome = e.run(client_for(e.sdk, plain, is_async=e.is_async), kwargs_for(e.sdk))
        rewritten = Wire()
        ran: set[str] = set()
        telos_wrap.patch(strict=True)
        pipeline._stage_hook = ran.add
        try:
            with default_store(MemoryStore()):
                e.run(client_for(e.sdk, rewritten, is_async=e.is_async), kwargs_for(e.sdk))
        finally:
            pipeline._stage_hook = None
            telos_wrap.unpatch()
        _STAGES_RUN[e.id] = ran
        assert plain.bodies != rewritten.bodies, "the reference request must be one telos rewrites"
        _REFERENCE[e.id] = (plain.bodies, rewritten.bodies, outcome)
    return _REFERENCE[e.id]


def telos_records(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("telos_wrap") and r.levelno >= level]


def run_twice(e: Entry, fault_: Fault, monkeypatch: pytest.MonkeyPatch) -> tuple[Wire, list[Outcome]]:
    wire = Wire()
    client = client_for(e.sdk, wire, is_async=e.is_async)
    telos_wrap.patch()
    fault_.install(monkeypatch)
    outcomes = []
    for _ in range(2):  # one call site, two calls
        outcomes.append(e.run(client, kwargs_for(e.sdk)))
    return wire, outcomes


def _matrix() -> list[Any]:
    return [pytest.param(e.id, f.name, id=f"{e.id}-{f.name}") for e in ENTRIES for f in FAULTS]


@pytest.mark.parametrize(("entry_id", "fault_name"), _matrix())
def test_fault_fails_open(
    entry_id: str, fault_name: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    e, f = entry(entry_id), fault(fault_name)
    original, rewritten, plain = reference(e)
    caplog.set_level(logging.DEBUG, logger="telos_wrap")
    wire, outcomes = run_twice(e, f, monkeypatch)

    fires = f.fires(e)
    stages_run = {stage for stage in PIPELINE_STAGES if fault(stage).fires(e)}
    assert _STAGES_RUN[e.id] == stages_run, "the pipeline's stages are the ones this matrix injects into"
    expected = original if fires and f.side == "request" and not f.rewrites_anyway(e) else rewritten
    assert wire.bodies == expected * 2, "the original request (or the rewrite, if it was made) went out"
    assert all(not name.startswith(HINT_HEADER) for sent in wire.sent for name in sent.headers)
    for outcome in outcomes:
        assert outcome.events == plain.events, "the caller saw every event the unpatched SDK yields"
        assert outcome.extra.keys() == plain.extra.keys()
        if e.sdk == "anthropic" and "text" in plain.extra:
            assert outcome.extra["text"] == plain.extra["text"]
        if outcome.holder is not None and not e.streaming:
            assert isinstance(telos_wrap.usage_of(outcome.holder), UsageReport)
    stage = f.stage_for(e)
    if fires:
        assert telos_wrap.failure_counts() == {stage: 2}
        named = [r for r in telos_records(caplog) if repr(stage) in r.getMessage()]
        assert len(named) == 1, "one warning per call site, not one per call"
        if f.name not in STORE_FAULTS:  # see test_store_outage_logs_once_per_call_site
            assert len(telos_records(caplog)) == 1
    else:
        assert telos_wrap.failure_counts() == {}
        if f.name not in STORE_FAULTS:  # a token count with the store down: see the same test
            assert telos_records(caplog) == []
    if e.streaming and fires and f.name in ("hint", "route", "stream-usage"):
        return  # telos never saw (or could not read) the stream: no usage to promise
    if e.streaming and fires and f.side == "request" and e.sdk == "openai":
        return  # the original request did not ask for stream usage, so the stream carries none
    if e.streaming:
        assert isinstance(telos_wrap.usage_of(outcomes[-1].holder), UsageReport)


STRICT_ENTRIES = [
    "anthropic-sync-create",
    "anthropic-async-create",
    "anthropic-sync-create_stream",
    "anthropic-async-stream_helper",
    "anthropic-sync-count_tokens",
    "openai-sync-create",
    "openai-async-create",
    "openai-sync-create_stream",
    "openai-async-stream_helper",
]
STRICT_CASES = [
    pytest.param(
        e_id,
        f.name,
        id=f"{e_id}-{f.name}",
    )
    for e_id in STRICT_ENTRIES
    for f in FAULTS
    if f.fires(entry(e_id)) and not (f.name == "session.record-usage" and entry(e_id).streaming)
]


@pytest.mark.parametrize(("entry_id", "fault_name"), STRICT_CASES)
def test_strict_mode_raises_naming_the_stage(
    entry_id: str, fault_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    e, f = entry(entry_id), fault(fault_name)
    wire = Wire()
    client = client_for(e.sdk, wire, is_async=e.is_async)
    telos_wrap.patch(strict=True)
    f.install(monkeypatch)
    with pytest.raises(TelosStageError) as info:
        e.run(client, kwargs_for(e.sdk))
    assert info.value.stage == f.stage_for(e)
    assert f"stage {f.stage_for(e)!r} failed" in str(info.value)
    assert f.cause.__name__ in str(info.value), "the message says what failed"
    if f.side in ("request", "store"):
        assert wire.sent == [], "strict mode raises before anything is sent"


@pytest.mark.parametrize("fault_name", FAULT_IDS)
def test_strict_error_chains_the_original_exception(fault_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    f = fault(fault_name)
    e = entry("anthropic-sync-create_stream" if f.name == "stream-usage" else "anthropic-sync-create")
    telos_wrap.patch(strict=True)
    f.install(monkeypatch)
    with pytest.raises(TelosStageError) as info:
        e.run(client_for(e.sdk, Wire(), is_async=e.is_async), kwargs_for(e.sdk))
    cause = info.value.__cause__
    while isinstance(cause, TelosStageError):  # a store failure inside "usage" chains its own stage
        cause = cause.__cause__
    assert isinstance(cause, f.cause)


@pytest.mark.parametrize("entry_id", ["anthropic-sync-create_stream", "openai-async-create_stream"])
def test_strict_mode_raises_for_a_failure_at_stream_end(
    entry_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: recording a stream's usage at its end reported with strict=False."""
    e = entry(entry_id)
    telos_wrap.patch(strict=True)
    fault("session.record-usage").install(monkeypatch)
    with pytest.raises(TelosStageError) as info:
        e.run(client_for(e.sdk, Wire(), is_async=e.is_async), kwargs_for(e.sdk))
    assert info.value.stage == "stream-usage"


@pytest.mark.parametrize(
    ("entry_id", "fault_name"),
    [
        (e_id, name)
        for e_id in ("anthropic-sync-create", "openai-sync-create", "anthropic-sync-count_tokens")
        for name in sorted(STORE_FAULTS)
        if fault(name).fires(entry(e_id))
    ],
)
def test_store_outage_logs_once_per_call_site(
    entry_id: str, fault_name: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: a store outage logged an ERROR with traceback on every call (pass-through
    bookkeeping), and a token count warned on every call without counting the failure."""
    e = entry(entry_id)
    caplog.set_level(logging.DEBUG, logger="telos_wrap")
    run_twice(e, fault(fault_name), monkeypatch)
    assert len(telos_records(caplog)) == 1, [r.getMessage() for r in telos_records(caplog)]
    assert telos_wrap.failure_counts() == {"session.store": 2}


def test_store_outage_on_a_token_count_still_counts_what_would_be_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A token count only reads the session: with the store down it counts the stateless rewrite."""
    e = entry("anthropic-sync-count_tokens")
    _, rewritten, _ = reference(e)
    wire, _ = run_twice(e, fault("store.read"), monkeypatch)
    assert wire.bodies == rewritten * 2


@contextmanager
def _silent_redis() -> Iterator[int]:
    """A port that accepts TCP connections and never answers (a hung Redis)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield int(server.getsockname()[1])


def _call_in_thread(budget: float) -> tuple[bool, list[Any]]:
    wire = Wire()
    client = client_for("anthropic", wire)
    done: list[Any] = []

    def call() -> None:
        done.append(client.messages.create(**kwargs_for("anthropic")))

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(budget)
    return not thread.is_alive(), done


@pytest.mark.timed
def test_a_hung_redis_with_timeouts_fails_open_quickly() -> None:
    """With socket timeouts and no retries on the client, a Redis that never answers costs one timeout
    (the turn's read); the store's circuit breaker then leaves it alone and the call goes out,
    rewritten on the state this process holds."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    with _silent_redis() as port:
        client = redis.Redis(
            host="127.0.0.1",
            port=port,
            socket_timeout=0.2,
            socket_connect_timeout=0.2,
            retry=Retry(NoBackoff(), 0),
        )
        set_default_store(RedisStore(client))
        telos_wrap.patch()
        started = time.perf_counter()
        finished, done = _call_in_thread(budget=5.0)
    assert finished and done and done[0].content[0].text == "[req:r]"
    assert time.perf_counter() - started < 2.0
    assert telos_wrap.failure_counts() == {"session.store": 1}


def test_a_hung_redis_given_by_url_does_not_hang_the_call() -> None:
    """Regression: ``RedisStore(url)`` had no socket timeout, so a Redis that accepts connections but
    never answers blocked every LLM call forever. It now defaults to 1 s per command."""
    with _silent_redis() as port:
        set_default_store(RedisStore(f"redis://127.0.0.1:{port}/0"))
        telos_wrap.patch()
        finished, _ = _call_in_thread(budget=3.0)
        assert finished, "the LLM call is still blocked on the store after 3 s"


class _CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    def load(self, session_id: str) -> Any:
        self.loads += 1
        raise ConnectionError("store unreachable")


def test_a_store_outage_costs_one_store_access_per_call() -> None:
    store = _CountingStore()
    set_default_store(store)
    telos_wrap.patch()
    client_for("anthropic", Wire()).messages.create(**kwargs_for("anthropic"))
    assert telos_wrap.failure_counts() == {"session.store": 1}
    assert store.loads == 1
