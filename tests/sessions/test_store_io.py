"""Store I/O of sessions: async clients use only the async store, one write per call, none when
nothing durable changed, and the circuit breaker (skip, probe, reconcile / drop / restore)."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import Counter
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, ManualClock
from telos_wrap.failopen import failure_counts, reset_failures
from telos_wrap.sessions import MemoryStore, RedisStore, Session, SessionState
from telos_wrap.sessions.stores.breaker import StoreBreaker
from telos_wrap.sessions.stores.store import Swapped, Versioned
from tests.sdk_http import AsyncEmulatorTransport, sdk_http

from .convo import MODEL, RecordingTransport, messages_for, system_prompt


class CountingStore:
    """A view of a shared ``MemoryStore`` that counts every call, can be taken down, and can forbid
    sync calls (to prove an async client never makes one)."""

    def __init__(self, backend: MemoryStore | None = None, *, forbid_sync: bool = False) -> None:
        self.backend = backend if backend is not None else MemoryStore()
        self.calls: Counter[str] = Counter()
        self.forbid_sync = forbid_sync
        self.down = False

    def _call(self, name: str) -> None:
        if self.forbid_sync and not name.startswith("a"):
            raise AssertionError(f"sync store call {name}() from an async client")
        if self.down:
            raise ConnectionError("store down")
        self.calls[name] += 1

    def load(self, session_id: str) -> Versioned | None:
        self._call("load")
        return self.backend.load(session_id)

    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        return self.swap(session_id, expected, text).revision

    def swap(self, session_id: str, expected: int, text: str) -> Swapped:
        self._call("swap")
        return self.backend.swap(session_id, expected, text)

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        self._call("put_blob")
        self.backend.put_blob(session_id, key, text)

    def get_blob(self, session_id: str, key: str) -> str | None:
        self._call("get_blob")
        return self.backend.get_blob(session_id, key)

    def delete(self, session_id: str) -> None:
        self.backend.delete(session_id)

    async def aload(self, session_id: str) -> Versioned | None:
        self._call("aload")
        return self.backend.load(session_id)

    async def acompare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        return (await self.aswap(session_id, expected, text)).revision

    async def aswap(self, session_id: str, expected: int, text: str) -> Swapped:
        self._call("aswap")
        return self.backend.swap(session_id, expected, text)

    async def aput_blob(self, session_id: str, key: str, text: str) -> None:
        self._call("aput_blob")
        self.backend.put_blob(session_id, key, text)

    async def aget_blob(self, session_id: str, key: str) -> str | None:
        self._call("aget_blob")
        return self.backend.get_blob(session_id, key)

    async def adelete(self, session_id: str) -> None:
        self.backend.delete(session_id)


def _ask(client: anthropic.Anthropic, turn: int) -> Any:
    return client.messages.create(
        model=MODEL, max_tokens=16, system=system_prompt(turn), messages=messages_for(turn)
    )


def _usage_total(sess: Session) -> int:
    return sum(u.responses for u in sess.state.usage.values())


# -- async I/O ---------------------------------------------------------------------------------------


def test_async_clients_use_only_the_async_store(patched: None) -> None:
    store = CountingStore(forbid_sync=True)
    sessions: list[Session] = []

    async def conversation(client: anthropic.AsyncAnthropic, n: int) -> None:
        # Fleet learning's own reads and writes (one per conversation, tests/sessions/test_fleet.py)
        # are left out: this counts the session's.
        async with telos_wrap.session(f"a-{n}", store=store, fleet_learning=False) as sess:
            sessions.append(sess)
            for turn in range(4):
                await client.messages.create(
                    model=MODEL, max_tokens=16, system=system_prompt(turn), messages=messages_for(turn)
                )
            await client.messages.count_tokens(model=MODEL, messages=messages_for(4))
            await sess.aflush()

    async def main() -> None:
        http = sdk_http.AsyncClient(transport=AsyncEmulatorTransport(Emulator()))
        client = anthropic.AsyncAnthropic(api_key="test", http_client=http, max_retries=0)
        await asyncio.gather(*(conversation(client, n) for n in range(5)))
        await client.close()

    asyncio.run(main())
    # One read per session (nothing known yet; at its tenant's key only: one layout), one
    # compare-and-set per turn, one flush of the last usage; the token counts used the state already
    # held (no I/O).
    assert store.calls == Counter(aload=5, aswap=5 * 4 + 5)
    store.forbid_sync = False
    for sess in sessions:
        assert sess.stats.requests == 4 and _usage_total(sess) == 4


@pytest.mark.redis
def test_async_clients_never_use_the_sync_redis_client(
    store_url: str, redis_prefix: str, patched: None
) -> None:
    store = RedisStore(store_url, prefix=redis_prefix)

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the sync Redis client was used by an async call")

    real = store.redis.execute_command
    store.redis.execute_command = forbidden

    async def main() -> Session:
        http = sdk_http.AsyncClient(transport=AsyncEmulatorTransport(Emulator()))
        client = anthropic.AsyncAnthropic(api_key="test", http_client=http, max_retries=0)
        async with telos_wrap.session("redis-async", store=store) as sess:
            for turn in range(3):
                await client.messages.create(
                    model=MODEL, max_tokens=16, system=system_prompt(turn), messages=messages_for(turn)
                )
            await sess.aflush()
        await client.close()
        await store.aclose()
        return sess

    sess = asyncio.run(main())
    store.redis.execute_command = real
    assert sess.stats.requests == 3 and _usage_total(sess) == 3


# -- one write per call -------------------------------------------------------------------------------


def test_one_store_write_per_call_and_none_when_nothing_changed(claude: anthropic.Anthropic) -> None:
    store = CountingStore()
    with telos_wrap.session("one-write", store=store) as sess:
        for turn in range(6):
            _ask(claude, turn)
        # Fleet learning (docs/sessions.md): at the first request one read of the application's
        # facts and, as the first conversation of its application, a read-then-write of its
        # prompt's shape (the per-line digests explain compares later conversations with); one read
        # and one write when the clock line is learned (request 1); and the first time the session
        # contributes to the application's entry, one read and one write of its own list of
        # contributions (what ``erase`` removes), one read at each later contribution.
        fleet = Counter(get_blob=5, put_blob=3)
        # One read at the first request, at the tenant's key (one layout: nothing else is read).
        assert store.calls == Counter(load=1, swap=6) + fleet, (
            "the usage rode along with the next turn's write"
        )
        claude.messages.count_tokens(model=MODEL, messages=messages_for(6))
        assert store.calls == Counter(load=1, swap=6) + fleet, "a token count changes nothing durable: no I/O"
        sess.flush()
        assert store.calls["swap"] == 7  # the last call's usage
        sess.flush()
        assert store.calls["swap"] == 7  # nothing pending: no round trip
    assert sess.stats.requests == 6 and _usage_total(sess) == 6


def test_a_dropped_session_object_still_gets_its_last_usage_written(claude: anthropic.Anthropic) -> None:
    store = CountingStore()
    sess = telos_wrap.session("dropped-object", store=store)
    with sess:
        _ask(claude, 0)
    del sess
    assert _usage_total(telos_wrap.session("dropped-object", store=store).bind(claude)) == 1


# -- the circuit breaker ------------------------------------------------------------------------------


def _broken(clock: ManualClock, backend: MemoryStore | None = None) -> CountingStore:
    store = CountingStore(backend)
    store.breaker = StoreBreaker(backoff=5.0, max_backoff=20.0, clock=clock.now)  # type: ignore[attr-defined]
    return store


def test_breaker_skips_the_store_for_a_window_then_probes_and_reconciles(
    lenient: anthropic.Anthropic,
    transport: RecordingTransport,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = _broken(clock)
    sess = telos_wrap.session("outage", store=store)
    with sess:
        _ask(lenient, 0)
        store.down = True
        for turn in (1, 2, 3):
            _ask(lenient, turn)
        calls_down = sum(store.calls.values())
        assert b'"cache_control"' in transport.bodies[-1], "still rewritten, on this process's state"
        stats = store.breaker.stats()  # type: ignore[attr-defined]
        assert (stats.state, stats.trips, stats.skipped) == ("open", 1, 2)
        warnings = [
            r for r in caplog.records if r.levelno >= logging.WARNING and "session.store" in r.getMessage()
        ]
        assert len(warnings) == 1, "one warning per window"
        assert failure_counts() == {"session.store": 3}, "every call that went without the store is counted"
        store.down = False
        clock.advance(2.0)
        _ask(lenient, 4)
        assert sum(store.calls.values()) == calls_down, "inside the window the store is left alone"
        clock.advance(3.0)
        _ask(lenient, 5)  # the probe: answers, so the breaker closes and the outage state is written
    stats = store.breaker.stats()  # type: ignore[attr-defined]
    assert (stats.state, stats.probes, stats.events) == ("closed", 1, Counter(reconciled=1))
    assert sess.stats.requests == 6 and _usage_total(sess) == 6, "nothing lost"


def test_a_call_already_waiting_when_the_window_opened_is_late_not_a_new_failure() -> None:
    """Calls in flight together all time out together: one opens the window, the others are late.

    A late failure is no failed probe (the window is not doubled) and, after the store answered a
    probe, no new outage (the breaker stays closed).
    """
    clock = ManualClock(100.0)
    breaker = StoreBreaker(backoff=5.0, max_backoff=20.0, clock=clock.now)
    waiting = [clock.now() + 0.001 * i for i in range(3)]  # three calls start their wait
    clock.advance(1.0)
    breaker.failure(TimeoutError(), started=waiting[0])  # the first timeout opens the window
    breaker.failure(TimeoutError(), started=waiting[1])
    stats = breaker.stats()
    assert (stats.state, stats.trips, stats.failures, stats.late) == ("open", 1, 2, 1)
    clock.advance(5.0)
    assert breaker.allow()  # the probe
    probe = clock.now()
    breaker.failure(TimeoutError(), started=waiting[2])  # a call from before the window, not the probe
    assert breaker.stats().late == 2 and breaker.stats().state == "half-open"
    clock.advance(0.5)
    breaker.failure(TimeoutError(), started=probe)  # the probe itself: a new window, twice as long
    assert (breaker.stats().trips, breaker.stats().state) == (2, "open")
    clock.advance(10.0)
    assert breaker.allow()
    breaker.success()
    breaker.failure(TimeoutError(), started=probe)  # began before the last window: stale news
    stats = breaker.stats()
    assert (stats.state, stats.trips, stats.failures, stats.late) == ("closed", 2, 5, 3)
    breaker.failure(TimeoutError(), started=clock.now())  # a call made after the store came back
    assert (breaker.stats().state, breaker.stats().trips) == ("open", 3)


def test_a_failed_probe_doubles_the_window(lenient: anthropic.Anthropic, clock: ManualClock) -> None:
    store = _broken(clock)
    # Without fleet learning, whose read at the first request would be the call that opens the window
    # (then the session's own read is a skipped one): the counts below are the session's.
    with telos_wrap.session("probe", store=store, fleet_learning=False):
        store.down = True
        _ask(lenient, 0)
        clock.advance(5.0)
        _ask(lenient, 1)  # probe fails: next window 10 s
        clock.advance(9.0)
        _ask(lenient, 2)
        stats = store.breaker.stats()  # type: ignore[attr-defined]
        assert (stats.trips, stats.probes, stats.skipped) == (2, 1, 1)
        clock.advance(1.0)
        store.down = False
        _ask(lenient, 3)
    assert store.breaker.stats().state == "closed"  # type: ignore[attr-defined]


def test_outage_work_is_added_to_what_another_worker_wrote_meanwhile(
    lenient: anthropic.Anthropic, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/sessions.md, "Outages and several workers: the invariant": the counters and usage of the
    calls a worker made while it could not write are added to the state another worker wrote
    meanwhile (nothing dropped, nothing counted twice); the conversation's view is the store's."""
    backend = MemoryStore()
    mine, theirs = _broken(clock, backend), _broken(clock, backend)
    a = Session("shared", store=mine)
    b = Session("shared", store=theirs)
    with a:
        _ask(lenient, 0)
    mine.down = True
    with a:
        _ask(lenient, 1)  # kept in this process only
    with b:
        _ask(lenient, 1)  # the other worker reaches the store
    stored_by_b = SessionState.loads(backend.load(a.store_key).text)
    assert stored_by_b.requests == 2  # worker a's outage call is not in the store yet
    mine.down = False
    clock.advance(5.0)
    with a:
        _ask(lenient, 2)
    event, written = mine.breaker.stats().recent  # type: ignore[attr-defined]
    # Merged onto b's state (2 requests) before turn 2 ran on it: 2 + a's 1 outage request; then
    # that state, with turn 2, was written.
    assert event.kind == "merged" and event.requests == 3
    assert written.kind == "reconciled" and written.requests == 4
    assert "another worker wrote the session" in event.reason
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "dropped" in r.getMessage()]
    assert mine.breaker.stats().events["dropped"] == 0  # type: ignore[attr-defined]
    a.flush()
    b.flush()  # usage rides with a worker's next write
    # Every call counted once, each with its usage: a's turns 0, 1 (outage), 2 and b's turn 1.
    stored = SessionState.loads(backend.load(a.store_key).text)
    assert stored.requests == 4 and sum(u.responses for u in stored.usage.values()) == 4
    assert sum(stored.by_engine.values()) == 4
    assert a.stats.requests == 4 and _usage_total(a) == 4
    assert b.stats.requests == 4 and _usage_total(b) == 4


def test_a_session_the_store_lost_is_restored_from_this_process(
    lenient: anthropic.Anthropic, clock: ManualClock
) -> None:
    store = _broken(clock)
    with telos_wrap.session("lost", store=store) as sess:
        for turn in range(3):
            _ask(lenient, turn)
        store.backend.delete(sess.store_key)  # e.g. Redis restarted without persistence
        _ask(lenient, 3)
    (event,) = store.breaker.stats().recent  # type: ignore[attr-defined]
    assert event.kind == "restored"
    assert sess.stats.requests == 4 and _usage_total(sess) == 4


class _LostAnswers(CountingStore):
    """Writes land, but their answers are lost (a timeout after the server applied the command)."""

    lose_answers = False

    def swap(self, session_id: str, expected: int, text: str) -> Swapped:
        swapped = super().swap(session_id, expected, text)
        if self.lose_answers:
            raise TimeoutError("Timeout reading from socket")
        return swapped


def test_a_write_whose_answer_was_lost_is_recognized_not_dropped(
    lenient: anthropic.Anthropic, clock: ManualClock
) -> None:
    store = _LostAnswers()
    store.breaker = StoreBreaker(backoff=5.0, clock=clock.now)  # type: ignore[attr-defined]
    with telos_wrap.session("lost-answer", store=store) as sess:
        _ask(lenient, 0)
        store.lose_answers = True
        _ask(lenient, 1)  # written, but this process cannot know
        store.lose_answers = False
        _ask(lenient, 2)  # inside the window: kept here
        clock.advance(5.0)
        _ask(lenient, 3)  # the probe finds its own write of turn 1 and builds on it
    assert store.breaker.stats().events == Counter(reconciled=1)  # type: ignore[attr-defined]
    assert sess.stats.requests == 4 and _usage_total(sess) == 4


# -- a hung Redis under asyncio ---------------------------------------------------------------------


@pytest.mark.timed
def test_a_hung_redis_costs_async_calls_one_timeout_per_window() -> None:
    """50 concurrent async calls, a Redis that accepts connections and never answers: every call
    completes, the breaker trips once, and the next 50 calls do not touch the store at all."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(128)
        port = server.getsockname()[1]
        store = RedisStore(f"redis://127.0.0.1:{port}/0", timeout=0.3)
        telos_wrap.patch()
        reset_failures()
        try:

            async def main() -> tuple[float, float]:
                http = sdk_http.AsyncClient(transport=AsyncEmulatorTransport(Emulator()))
                client = anthropic.AsyncAnthropic(api_key="test", http_client=http, max_retries=0)

                async def call(n: int) -> None:
                    async with telos_wrap.session(f"hung-{n}", store=store):
                        await client.messages.create(model=MODEL, max_tokens=8, messages=messages_for(0))

                started = time.perf_counter()
                await asyncio.gather(*(call(n) for n in range(50)))
                first = time.perf_counter() - started
                started = time.perf_counter()
                await asyncio.gather(*(call(n) for n in range(50, 100)))
                second = time.perf_counter() - started
                await client.close()
                await store.aclose()
                return first, second

            first, second = asyncio.run(main())
        finally:
            telos_wrap.unpatch()
    stats = store.breaker.stats()
    assert stats.trips == 1 and stats.skipped >= 50
    # The 50 first reads were all in flight when the first timed out: each either timed out in that
    # same moment or was cut short by the trip; none started after it.
    assert stats.failures + stats.abandoned == 50, stats
    # One of them opened the window; any other that timed out was already waiting alongside it.
    assert stats.failures - stats.late == 1, stats
    # Bounds with room for a loaded CI machine: 50 calls waiting out 0.3 s one after another is 15 s.
    assert first < 6.0 and second < 3.0, (first, second)
    assert failure_counts() == {"session.store": 100}


@pytest.mark.redis
def test_a_saturated_pool_is_not_an_outage(redis_url: str, redis_prefix: str) -> None:
    """Every pooled connection in use for the store's timeout: the process is saturated, Redis is
    fine. The call goes on with in-process state and is counted, but the breaker stays closed (no
    window in which every other session skips a healthy store); the next call writes it all."""
    store = RedisStore(redis_url, prefix=redis_prefix, timeout=0.2, max_connections=1)
    telos_wrap.patch()
    reset_failures()
    try:

        async def main() -> Session:
            http = sdk_http.AsyncClient(transport=AsyncEmulatorTransport(Emulator()))
            client = anthropic.AsyncAnthropic(api_key="test", http_client=http, max_retries=0)
            pool = store._aclient()[0].connection_pool
            held = await pool.get_connection()  # the pool's only connection, busy elsewhere
            async with telos_wrap.session("saturated", store=store) as sess:
                await client.messages.create(model=MODEL, max_tokens=8, messages=messages_for(0))
                assert store.breaker.stats().busy >= 1 and not store.breaker.is_open
                await pool.release(held)
                await client.messages.create(model=MODEL, max_tokens=8, messages=messages_for(1))
                await sess.aflush()
            await client.close()
            await store.aclose()
            return sess

        sess = asyncio.run(main())
    finally:
        telos_wrap.unpatch()
    stats = store.breaker.stats()
    assert stats.trips == 0 and stats.failures == 0 and stats.busy >= 1, stats
    assert failure_counts() == {"session.store": stats.busy}
    stored = store.load(sess.store_key)
    assert stored is not None
    assert telos_wrap.sessions.SessionState.loads(stored.text).requests == 2 == sess.stats.requests
