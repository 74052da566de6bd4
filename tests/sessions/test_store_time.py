"""The store time of an async call is bounded (``stores/budget.py``), and no request is lost to it.

Issue 44 bounded the store time of an async call by the store's ``timeout``. A call whose budget ran
out before its session's plan took the session's lock (spent on fleet learning's lookup, or waiting
behind another plan of the session that waited on the store) raised ``TelosStageError("session.store")``;
the patch layer sends the request as built then, and did not record a pass-through after a store
failure (recording it would wait on the store a second time), so the request and its usage were
never counted: ``tests/sessions/test_failover.py`` stored 7 of 8 requests (h44r, reverted). Now
such a call is counted without the store and without the plan's lock
(``SessionRuntime.note_passthrough_deferred``: kept beside the usage not yet written, applied by the
session's next write), and the call keeps its bound.

The store here is a ``MemoryStore`` subclass (so sessions use its async twins, as with Redis) whose
async calls can be made slow: blob reads (fleet learning's lookup) that outlast the budget, writes
that land and answer late (the budget gives up on an answer Redis will never send in time: the
write landed all the same), and a plan of the session still waiting on the store when a request
comes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anthropic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.sessions import MemoryStore, SessionState
from telos_wrap.sessions.stores.breaker import StoreBreaker
from telos_wrap.sessions.stores.store import Swapped
from telos_wrap.sessions.sync import known
from tests.sdk_http import AsyncEmulatorTransport, sdk_http

from .convo import MODEL, messages_for, system_prompt

TIMEOUT = 0.05  # the store's timeout: the budget of a call's store time (plus budget.GRACE)


class SlowStore(MemoryStore):
    """A ``MemoryStore`` whose async twins take time: ``blob_delay`` before a blob read answers,
    ``late`` writes that land at once and answer ``answer_delay`` seconds later."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__()
        self.timeout = TIMEOUT
        self.breaker = StoreBreaker(backoff=5.0, max_backoff=60.0, clock=lambda: clock[0])
        self.blob_delay = 0.0
        self.late = 0
        self.answer_delay = 0.0
        self.writes = 0  # writes that landed

    async def aload(self, session_id: str) -> Any:
        return self.load(session_id)

    async def aswap(self, session_id: str, expected: int, text: str) -> Swapped:
        swapped = self.swap(session_id, expected, text)
        self.writes += swapped.revision is not None
        if self.late:
            self.late -= 1
            await asyncio.sleep(self.answer_delay)
        return swapped

    async def acompare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        return (await self.aswap(session_id, expected, text)).revision

    async def aget_blob(self, session_id: str, key: str) -> str | None:
        await asyncio.sleep(self.blob_delay)
        return self.get_blob(session_id, key)

    async def aput_blob(self, session_id: str, key: str, text: str) -> None:
        self.put_blob(session_id, key, text)

    def stored(self, session_id: str) -> tuple[int, int]:
        """The stored (requests, responses with usage) of ``session_id`` (its calls' tenant's)."""
        found = self.load(_bound(session_id, self).store_key)
        if found is None:
            return (0, 0)
        state = SessionState.loads(found.text)
        return state.requests, sum(u.responses for u in state.usage.values())


def _bound(conv: str, store: MemoryStore) -> telos_wrap.Session:
    """A session object of ``conv`` bound to the tenant of ``_client()``'s calls (its API key and
    base URL): where the calls' sessions keep their state (docs/sessions.md, "Tenants")."""
    with anthropic.Anthropic(api_key="test") as tenant:
        return telos_wrap.session(conv, store=store).bind(tenant)


def _client() -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key="test",
        http_client=sdk_http.AsyncClient(transport=AsyncEmulatorTransport(Emulator())),
        max_retries=0,
    )


async def _turn(client: anthropic.AsyncAnthropic, store: SlowStore, conv: str, turn: int) -> float:
    """One request of the documented per-request pattern; its duration."""
    started = time.monotonic()
    async with telos_wrap.session(conv, store=store):
        await client.messages.create(
            model=MODEL, max_tokens=8, system=system_prompt(turn), messages=messages_for(turn % 4)
        )
    return time.monotonic() - started


async def _written(store: SlowStore, clock: list[float], conv: str) -> None:
    """End any back-off window and write what this process holds of ``conv`` (as the background
    flush does once the store answers)."""
    clock[0] += 100.0
    for _ in range(3):
        await _bound(conv, store).aflush()


@pytest.fixture
def clock() -> list[float]:
    return [0.0]


@pytest.mark.timed  # a wall-clock bound: run alone (CI's first pass)
def test_a_call_whose_budget_ran_out_before_its_plan_is_still_counted(
    patched_lenient: None, clock: list[float]
) -> None:
    """Fleet learning's lookup (the first request of a conversation) outlasts the budget: the request
    goes out as built and is counted without the store, written with the session's next write."""
    store = SlowStore(clock)
    store.blob_delay = 4 * TIMEOUT

    async def main() -> list[float]:
        client = _client()
        times = [await _turn(client, store, "conv-fleet", 0)]
        store.blob_delay = 0.0
        times += [await _turn(client, store, "conv-fleet", turn) for turn in (1, 2)]
        await _written(store, clock, "conv-fleet")
        await client.close()
        return times

    times = asyncio.run(main())
    assert store.stored("conv-fleet") == (3, 3)
    assert max(times) < 10 * TIMEOUT, times  # the slow lookup cost one budget, not its own time


@pytest.mark.timed  # a wall-clock bound: run alone (CI's first pass)
def test_a_request_behind_a_plan_waiting_on_the_store_is_counted(
    patched_lenient: None, clock: list[float]
) -> None:
    """A plan of the conversation holds its lock while the store takes long to answer (the
    application's ``aflush``, or the background flush through the loop); a request comes meanwhile.
    Its budget runs out waiting for the lock: it goes out as built within its bound, and is counted."""
    store = SlowStore(clock)

    async def main() -> float:
        client = _client()
        await _turn(client, store, "conv-busy", 0)  # its usage waits for the next write
        store.late, store.answer_delay = 1, 20 * TIMEOUT  # the flush's write lands, answers late
        flushing = asyncio.ensure_future(telos_wrap.session("conv-busy", store=store).aflush())
        await asyncio.sleep(0)  # the flush holds the session's lock now
        took = await _turn(client, store, "conv-busy", 1)
        await flushing
        await _written(store, clock, "conv-busy")
        await client.close()
        return took

    took = asyncio.run(main())
    assert store.stored("conv-busy") == (2, 2)
    assert took < 10 * TIMEOUT, took


def test_a_write_that_landed_after_its_budget_ran_out_is_counted_once(
    patched_lenient: None, clock: list[float]
) -> None:
    """The budget gives up on a write whose answer is late, but the write landed: the session keeps
    its work (it cannot know), recognizes its own write on the next one, and counts nothing twice."""
    store = SlowStore(clock)

    async def main() -> None:
        client = _client()
        await _turn(client, store, "conv-late", 0)
        store.late, store.answer_delay = 1, 4 * TIMEOUT
        await _turn(client, store, "conv-late", 1)  # landed; the call gave up on its answer
        assert store.breaker.is_open
        clock[0] += 100.0  # the window is over: the next call probes
        await _turn(client, store, "conv-late", 2)
        await _written(store, clock, "conv-late")
        await client.close()

    asyncio.run(main())
    assert store.stored("conv-late") == (3, 3)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(
                ["turn", "slow_lookup", "late_write", "concurrent", "read_during", "flush", "window_over"]
            ),
            st.integers(0, 2),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_counts_are_exact_whatever_the_store_time_does(patched_lenient: None, steps: list[Any]) -> None:
    """A stateful run of per-request calls on three conversations, interleaved with slow lookups,
    writes that land and answer late, two requests of one conversation at once, ``.stats`` read while
    a request waits on the store, the application's flush and back-off windows ending: once the
    store answers and the process flushed, every conversation's stored requests and usage equal the
    calls made, each counted once."""
    clock = [0.0]
    store = SlowStore(clock)
    made = dict.fromkeys(range(3), 0)
    known.clear()

    async def main() -> None:
        client = _client()
        for action, conv in steps:
            sid = f"conv-{conv}"
            if action == "slow_lookup":
                store.blob_delay = 3 * TIMEOUT
                await _turn(client, store, sid, made[conv])
                store.blob_delay = 0.0
                made[conv] += 1
            elif action == "late_write":
                store.late, store.answer_delay = 1, 3 * TIMEOUT
                await _turn(client, store, sid, made[conv])
                made[conv] += 1
            elif action == "concurrent":
                store.late, store.answer_delay = 1, 3 * TIMEOUT
                await asyncio.gather(
                    _turn(client, store, sid, made[conv]), _turn(client, store, sid, made[conv] + 1)
                )
                made[conv] += 2
            elif action == "read_during":
                store.late, store.answer_delay = 1, 3 * TIMEOUT
                turn = asyncio.ensure_future(_turn(client, store, sid, made[conv]))
                await asyncio.sleep(TIMEOUT / 2)
                assert _bound(sid, store).stats.requests <= made[conv] + 1
                await turn
                made[conv] += 1
            elif action == "flush":
                store.late, store.answer_delay = 1, 3 * TIMEOUT
                await telos_wrap.session(sid, store=store).aflush()
            elif action == "window_over":
                clock[0] += 100.0
            else:
                await _turn(client, store, sid, made[conv])
                made[conv] += 1
        store.late = 0
        for conv in made:
            await _written(store, clock, f"conv-{conv}")
        await client.close()

    asyncio.run(main())
    assert {conv: store.stored(f"conv-{conv}") for conv in made} == {conv: (n, n) for conv, n in made.items()}


def test_stats_read_while_a_request_waits_on_the_store_count_nothing_twice(
    patched_lenient: None, clock: list[float]
) -> None:
    """``.stats`` of a new object (sync: it flushes and reads) while a request of the conversation
    waits on the store in the same loop: the two plans share one last-known state, and neither may
    drop or double what the other holds."""
    store = SlowStore(clock)

    async def main() -> tuple[int, int]:
        client = _client()
        await _turn(client, store, "conv-read", 0)  # its usage waits for the next write
        store.late, store.answer_delay = 1, 3 * TIMEOUT  # turn 1's write lands, answers late
        turn = asyncio.ensure_future(_turn(client, store, "conv-read", 1))
        deadline = time.monotonic() + 30  # until turn 1's plan waits on its write (however loaded)
        while store.late and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        assert store.late == 0, "turn 1 never wrote: the test would prove nothing"
        stats = _bound("conv-read", store).stats
        await turn
        await _written(store, clock, "conv-read")
        await client.close()
        return stats.requests, stats.responses_with_usage

    seen = asyncio.run(main())
    assert store.stored("conv-read") == (2, 2)
    assert seen[0] in (1, 2) and seen[1] == 1, seen
