"""The documented per-request pattern (issue 44): a new ``Session`` object around every request.

``with telos_wrap.session(conv_id, store=...)`` around each request must cost what one long-lived
object costs: no object kept alive by finished calls (counted with ``gc``), the last-known state
of the conversation used while the store cannot be read (no lost cache reads), usage written by a
background flush when nobody visits the conversation again, and stats that never read zeros
because of a back-off window.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.patch import calls
from telos_wrap.sessions import MemoryStore, Session, live
from telos_wrap.sessions.stores.breaker import breaker_of
from telos_wrap.sessions.sync import flusher, known
from tests.sdk_http import AsyncEmulatorTransport, EmulatorTransport, sdk_http

from .convo import MODEL, messages_for, system_prompt


class SwitchableStore(MemoryStore):
    """A ``MemoryStore`` that can be made to fail every call (down) or only its writes (Redis out of
    memory refusing writes, reads still answered)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.refuse_writes = False

    def load(self, session_id: str) -> Any:
        if self.down:
            raise ConnectionError("store down")
        return super().load(session_id)

    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        if self.down or self.refuse_writes:
            raise ConnectionError("OOM command not allowed when used memory > 'maxmemory'")
        return super().compare_and_set(session_id, expected, text)

    def swap_state(self, session_id: str, expected: int, state: Any) -> Any:
        if self.down or self.refuse_writes:
            raise ConnectionError("OOM command not allowed when used memory > 'maxmemory'")
        return super().swap_state(session_id, expected, state)


def _stored(store: Any, conv: str, client: anthropic.Anthropic) -> Any:
    """What ``store`` holds of ``conv`` for ``client``'s tenant (the key its calls bind the session to)."""
    return store.load(Session(conv, store=store).bind(client).store_key)


def _new_entries(before: set[str]) -> set[str]:
    """Entries of ``calls._pending`` (the per-call hint table) made since ``before`` was taken: a
    finished call leaves none (other tests run in this process may have left theirs)."""
    return set(calls._pending) - before


def _alive_sessions() -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if type(obj) is Session)


def _turn(client: anthropic.Anthropic, conv: str, turn: int, store: Any) -> Any:
    with telos_wrap.session(conv, store=store):
        return client.messages.create(
            model=MODEL, max_tokens=16, system=system_prompt(turn), messages=messages_for(turn % 4)
        )


def test_finished_per_request_calls_keep_no_session_alive(claude: anthropic.Anthropic) -> None:
    store = MemoryStore()
    before = _alive_sessions()
    pending_before = set(calls._pending)
    for i in range(1000):
        _turn(claude, f"conv-{i % 50}", i // 50, store)
    # Before issue 44: 1,000 session objects alive (every finished call's entry in calls._pending).
    assert not _new_entries(pending_before)
    assert _alive_sessions() - before <= 2
    # The last-known table holds one entry per conversation, not per request.
    assert sum(1 for key in known._table if key[0] == id(store)) == 50


def test_calls_that_fail_or_stream_keep_no_session_alive(patched: None) -> None:
    store = MemoryStore()

    def vendor_error(request: sdk_http.Request) -> sdk_http.Response:
        return sdk_http.Response(500, json={"type": "error", "error": {"type": "api_error", "message": "x"}})

    failing = anthropic.Anthropic(
        api_key="test",
        http_client=sdk_http.Client(transport=sdk_http.MockTransport(vendor_error)),
        max_retries=1,
    )
    working = anthropic.Anthropic(
        api_key="test", http_client=sdk_http.Client(transport=EmulatorTransport(Emulator())), max_retries=0
    )
    before = _alive_sessions()
    pending_before = set(calls._pending)
    for i in range(30):  # a vendor error is retried once (max_retries=1): the header is read once
        with telos_wrap.session(f"c-{i % 7}", store=store):
            with pytest.raises(anthropic.InternalServerError):
                failing.messages.create(model=MODEL, max_tokens=8, messages=messages_for(0))
            with pytest.raises(TypeError):  # refused by the SDK before any request is built
                working.messages.create(model=MODEL, messages=messages_for(0))
            with working.messages.stream(model=MODEL, max_tokens=8, messages=messages_for(i % 3)) as stream:
                stream.until_done()
    assert not _new_entries(pending_before)
    assert _alive_sessions() - before <= 2


def test_async_per_request_calls_keep_no_session_alive(patched: None) -> None:
    store = MemoryStore()

    async def main() -> None:
        client = anthropic.AsyncAnthropic(
            api_key="test",
            http_client=sdk_http.AsyncClient(transport=AsyncEmulatorTransport(Emulator())),
            max_retries=0,
        )
        for i in range(300):
            async with telos_wrap.session(f"a-{i % 10}", store=store):
                await client.messages.create(
                    model=MODEL, max_tokens=8, system=system_prompt(i), messages=messages_for(i % 3)
                )
        await client.close()

    before = _alive_sessions()
    pending_before = set(calls._pending)
    asyncio.run(main())
    assert not _new_entries(pending_before)
    assert _alive_sessions() - before <= 2


@pytest.fixture
def store() -> Iterator[SwitchableStore]:
    made = SwitchableStore()
    yield made
    made.down = made.refuse_writes = False


def _reads(transport: Any) -> int:
    return sum(1 for _ in transport.bodies)


@pytest.mark.parametrize("fault", ["down", "refuse_writes"])
def test_a_new_session_object_uses_the_last_known_state_while_the_store_cannot_be_read(
    lenient: anthropic.Anthropic, store: SwitchableStore, fault: str
) -> None:
    """Before issue 44 a new object per request ran on an empty state while the breaker was open:
    the clock line telos had learned was sent as a changed prefix (0 cache reads)."""
    reads: list[int] = []
    for turn in range(12):
        if turn == 4:
            setattr(store, fault, True)
        if turn == 8:
            setattr(store, fault, False)
            breaker_of(store)._open_until = 0.0  # the back-off window is over: the next call probes
        response = _turn(lenient, "conv-blip", turn, store)
        reads.append(response.usage.cache_read_input_tokens or 0)
    # From turn 2 on (the clock line is learned after it changed once) every turn reads the cache.
    assert all(r > 0 for r in reads[2:]), reads
    stats = telos_wrap.session("conv-blip", store=store).bind(lenient).stats
    assert stats.requests == 12 and stats.known
    assert stats.responses_with_usage == 12


def test_stats_of_a_fresh_object_never_read_zeros_in_a_back_off_window(
    lenient: anthropic.Anthropic, store: SwitchableStore
) -> None:
    for turn in range(3):
        _turn(lenient, "conv-stats", turn, store)
    store.down = True
    _turn(lenient, "conv-stats", 3, store)  # fails: the breaker opens
    assert breaker_of(store).is_open
    stats = telos_wrap.session("conv-stats", store=store).bind(lenient).stats
    assert (stats.requests, stats.known) == (4, True)
    # A conversation this process never saw: unknown, not zeros taken for its counters.
    other = telos_wrap.session("conv-never-seen", store=store).bind(lenient).stats
    assert other.known is False


def test_the_background_flush_writes_outage_state_and_usage_without_a_later_visit(
    lenient: anthropic.Anthropic, store: SwitchableStore
) -> None:
    for turn in range(2):
        _turn(lenient, "conv-ended", turn, store)
    store.refuse_writes = True
    for turn in range(2, 4):
        _turn(lenient, "conv-ended", turn, store)
    store.refuse_writes = False
    # The conversation ended: nobody visits it again. The store lacks turns 2-3 and their usage.
    assert _stored(store, "conv-ended", lenient) is not None
    breaker_of(store)._open_until = 0.0
    assert flusher.flush_due(delay=0.0) >= 1
    from telos_wrap.sessions.durable.state import SessionState

    stored = SessionState.loads(_stored(store, "conv-ended", lenient).text)
    assert stored.requests == 4
    assert sum(u.responses for u in stored.usage.values()) == 4
    assert not any(getattr(h, "id", None) == "conv-ended" for h in live.held())


def test_the_flush_thread_writes_on_its_own(lenient: anthropic.Anthropic, store: SwitchableStore) -> None:
    """The daemon thread, not a call of the test: usage of an ended conversation lands by itself."""
    previous = flusher.DELAY
    flusher.DELAY = 0.0
    try:
        _turn(lenient, "conv-thread", 0, store)
        deadline = time.monotonic() + 10
        from telos_wrap.sessions.durable.state import SessionState

        while time.monotonic() < deadline:
            stored = SessionState.loads(_stored(store, "conv-thread", lenient).text)
            if sum(u.responses for u in stored.usage.values()) == 1:
                break
            time.sleep(0.1)
        assert sum(u.responses for u in stored.usage.values()) == 1
    finally:
        flusher.DELAY = previous


def test_the_flush_probes_a_store_within_its_first_window_however_long_the_window_grew(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A window doubled during a long outage (up to a minute) would keep a store that answers again
    unused, and the outage state of ended conversations unwritten, for that long: the background
    flush cuts it short once it lasted the first window's length (``StoreBreaker.expedite``)."""
    from telos_wrap.sessions.stores.breaker import StoreBreaker

    now = [0.0]
    breaker = StoreBreaker(backoff=5.0, max_backoff=60.0, clock=lambda: now[0])
    breaker.failure(ConnectionError("down"))
    for _ in range(3):  # three failed probes: the window is 40 s now
        now[0] = breaker._open_until
        assert breaker.allow()
        breaker.failure(ConnectionError("still down"))
    assert breaker._open_until - now[0] == pytest.approx(40.0)
    now[0] += 4.9
    breaker.expedite()  # not yet the first window's length: nothing changes
    assert not breaker.ready() and not breaker.allow()
    now[0] += 0.2
    breaker.expedite()
    assert breaker.ready() and breaker.allow()  # the probe goes now, 35 s early
    caplog.clear()
    with caplog.at_level("DEBUG", logger="telos_wrap.sessions"):
        breaker.failure(ConnectionError("still down"))
    # A failed expedited probe neither doubles the window nor warns again.
    assert breaker._open_until - now[0] == pytest.approx(40.0)
    assert [r.levelname for r in caplog.records] == ["DEBUG"]
    assert not breaker.ready()
    now[0] += 5.0
    breaker.expedite()
    assert breaker.allow()
    breaker.success()
    stats = breaker.stats()
    assert stats.state == "closed" and breaker._window == 5.0


def test_the_flush_makes_no_task_on_a_loop_that_asyncio_run_is_ending() -> None:
    """A task made on a loop ``asyncio.run`` is shutting down may never run (destroyed pending, its
    coroutine never awaited: seen in test_concurrency's 500 tasks): the background flush asks
    ``_ending`` on the loop first, and flushes such a session from its thread once the loop closed."""
    seen: list[tuple[str, bool]] = []

    async def generator() -> Any:
        try:
            yield 1
        finally:  # closed by asyncio.run's shutdown_asyncgens
            seen.append(("closing generators", flusher._ending(asyncio.get_running_loop())))

    kept: list[Any] = []  # the straggler task and the generator live until asyncio.run ends them

    async def main() -> None:
        loop = asyncio.get_running_loop()
        seen.append(("main", flusher._ending(loop)))

        async def straggler() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:  # asyncio.run cancels what its main task left
                seen.append(("cancelling", flusher._ending(loop)))
                raise

        kept.append(asyncio.ensure_future(straggler()))
        kept.append(generator())
        await kept[-1].__anext__()
        await asyncio.sleep(0)
        seen.append(("main, other tasks", flusher._ending(loop)))

    asyncio.run(main())
    expected = {"main": False, "main, other tasks": False, "closing generators": True}
    if sys.version_info >= (3, 11):  # Task.cancelling
        expected["cancelling"] = True
    assert {k: v for k, v in seen if k in expected} == expected
    assert len(seen) == 4
