"""Outage work is merged, not dropped, and its usage is kept (issue: usage lost after a drop).

Two store objects on one real redis-server stand for two workers of one session; one worker's
breaker is forced open, so its calls are kept in-process while the other worker writes.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

import telos_wrap
from telos_wrap.ir.model import UsageReport
from telos_wrap.sessions import SessionState
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.durable.merge import MAX_WRITERS, Delta, delta_of, marked, merged
from telos_wrap.sessions.durable.records import MAX_LEARNED, VolatileSpan
from telos_wrap.sessions.durable.state import EngineUsage
from telos_wrap.sessions.stores.breaker import StoreBreaker
from telos_wrap.sessions.stores.redis_store import RedisStore

pytestmark = pytest.mark.redis


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _call(session: telos_wrap.Session, tokens: int = 10) -> None:
    index = runtime_of(session).note_passthrough("anthropic", "anthropic", {"messages": []})
    assert index >= 0
    runtime_of(session).record_usage(index, UsageReport("anthropic", tokens, 0, 0, 1))


def test_outage_work_of_a_shared_session_is_merged_with_its_usage(redis_url: str, redis_prefix: str) -> None:
    clock = Clock()
    a_store = RedisStore(redis_url, prefix=redis_prefix)
    a_store.breaker = StoreBreaker(5.0, 60.0, clock=clock)
    b_store = RedisStore(redis_url, prefix=redis_prefix)
    a = telos_wrap.session("shared", store=a_store)
    b = telos_wrap.session("shared", store=b_store)
    for _ in range(3):
        _call(a)
    a_store.breaker.failure(ConnectionError("forced"))  # A cannot write for 5 s
    for _ in range(5):
        _call(a)
    for _ in range(5):
        _call(b)
    b.flush()
    clock.now = 10.0  # A's window is over: its next call probes the store
    for _ in range(6):
        _call(a)
    a.flush()
    stored = SessionState.loads(a_store.load("shared").text)
    assert stored.requests == 19
    assert stored.usage["anthropic"].responses == 19 and stored.usage["anthropic"].raw == 190
    assert a_store.breaker.stats().events["merged"] == 1
    assert a_store.breaker.stats().events["dropped"] == 0
    a_store.close()
    b_store.close()


def test_usage_of_a_request_index_used_again_is_kept(redis_url: str, redis_prefix: str) -> None:
    """An index this process saw before (the count went back: the store lost the session) is a new
    request: its usage is recorded, not taken for a duplicate of the old one."""
    store = RedisStore(redis_url, prefix=redis_prefix)
    s = telos_wrap.session("again", store=store)
    _call(s)
    _call(s)
    s.flush()
    store.delete("again")
    other = RedisStore(redis_url, prefix=redis_prefix)
    o = telos_wrap.session("again", store=other)
    _call(o)  # another worker starts the session again: index 0 is taken
    o.flush()
    _call(s)  # this process's next request: index 1 again (it adopts the store's copy)
    s.flush()
    stored = SessionState.loads(store.load("again").text)
    assert stored.requests == stored.usage["anthropic"].responses
    store.close()
    other.close()


def test_a_reused_index_gets_its_own_usage_while_the_earlier_one_is_in_flight(
    redis_url: str, redis_prefix: str
) -> None:
    """Usage is keyed by request index in this process: when the index comes round again before the
    earlier request's usage arrived, both reports are counted (each request's usage once)."""
    store = RedisStore(redis_url, prefix=redis_prefix)
    other = RedisStore(redis_url, prefix=redis_prefix)
    s = telos_wrap.session("in-flight", store=store)
    _call(s)
    _call(s)
    early = runtime_of(s).note_passthrough("anthropic", "anthropic", {"messages": []})  # its answer is slow
    store.delete("in-flight")  # the store loses the session (no persistence) ...
    o = telos_wrap.session("in-flight", store=other)
    _call(o)
    _call(o)
    o.flush()  # ... and another worker starts it again: indices 0 and 1 are taken
    late = runtime_of(s).note_passthrough("anthropic", "anthropic", {"messages": []})
    assert early == late == 2  # this process's next request reuses the index of the one in flight
    runtime_of(s).record_usage(early, UsageReport("anthropic", 7, 0, 0, 1))
    runtime_of(s).record_usage(late, UsageReport("anthropic", 11, 0, 0, 1))
    runtime_of(s).record_usage(late, UsageReport("anthropic", 11, 0, 0, 1))  # a second report of one response
    s.flush()
    stored = SessionState.loads(store.load("in-flight").text)
    # The worker's 2 calls (10 tokens each) and both of this process's requests of index 2, once.
    assert stored.usage["anthropic"].raw == 10 + 10 + 7 + 11
    assert stored.usage["anthropic"].responses == 4
    store.close()
    other.close()


def _span(n: int) -> VolatileSpan:
    return VolatileSpan(f"^(?<=stamp {n}: ).*$", 0, n, 1, n)


def test_merged_adds_the_delta_joins_spans_capped_and_keeps_the_stores_view() -> None:
    """The arithmetic of docs/sessions.md, "Outages and several workers: the invariant"."""
    before = SessionState(session_id="m", requests=3, usage={"anthropic": EngineUsage(3, 30, 0, 0, 0, 3)})
    mine = replace(
        before,
        requests=5,
        breaks=1,
        fallbacks=1,
        by_engine={"anthropic": 2},
        usage={"anthropic": EngineUsage(5, 51, 4, 0, 0, 5)},
        pins={"mine": "k1"},
        volatile=tuple(_span(n) for n in range(3)),
    )
    delta = delta_of(mine, before)
    assert delta.combine(delta, -1) == Delta() and not Delta() and delta
    stored = replace(
        before,
        requests=6,
        by_engine={"anthropic": 3, "openai": 1},
        usage={"anthropic": EngineUsage(6, 60, 0, 0, 0, 6)},
        pins={"theirs": "k2"},
        volatile=tuple(_span(n) for n in range(1, MAX_LEARNED)),  # one short of the cap
        applied={"other": 4},
    )
    out = merged(stored, delta, mine)
    assert (out.requests, out.breaks, out.fallbacks) == (8, 1, 1)
    assert out.by_engine == {"anthropic": 5, "openai": 1}
    assert out.usage["anthropic"] == EngineUsage(8, 81, 4, 0, 0, 8)
    # Spans by union (the store's first, then this worker's new ones), never past the cap.
    assert len(out.volatile) == MAX_LEARNED
    assert out.volatile[: MAX_LEARNED - 1] == stored.volatile and out.volatile[-1] == _span(0)
    # The rest is the store's: pins, and the marks of the writers.
    assert out.pins == {"theirs": "k2"} and out.applied == {"other": 4}
    assert marked(out, "me", 1).applied == {"other": 4, "me": 1}
    many = out
    for n in range(MAX_WRITERS + 3):
        many = marked(many, f"w{n}", n)
    assert len(many.applied) == MAX_WRITERS and "other" not in many.applied  # the oldest go first
