"""The outage invariant, as a state machine over real Redis (docs/sessions.md, "Outages and several
workers: the invariant").

Three workers share one session id, each with its own store object (its own breaker, on its own
clock) behind its own ``ReplyDropper`` proxy to one real ``redis-server``. Hypothesis interleaves
their calls with outages (a worker's breaker forced open), recoveries (its window ends), answers
lost with redis-py's retry (the script runs twice: recognized as landed) and answers lost without
one (the worker cannot know whether its write landed; it keeps its work and settles it later by the
store's ``applied`` mark). Whenever every worker is back and has flushed, the stored counters equal
exactly the calls made and every stored request has its usage.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import telos_wrap
from telos_wrap.ir.model import UsageReport
from telos_wrap.sessions import SessionState
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.stores.breaker import StoreBreaker
from telos_wrap.sessions.stores.redis_store import RedisStore

from .test_lost_answers import ReplyDropper

pytestmark = pytest.mark.redis

WORKERS = 3


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _store(port: int, prefix: str, retry: bool) -> RedisStore:
    if retry:  # a URL: redis-py sends a command again once after a dropped connection
        return RedisStore(f"redis://127.0.0.1:{port}/0", prefix=prefix)
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1.0, retry=Retry(NoBackoff(), 0))
    return RedisStore(client, prefix=prefix)


@pytest.mark.usefixtures("redis_url")
def test_outage_invariant(redis_url: str) -> None:
    parts = urlsplit(redis_url)
    upstream = (parts.hostname or "127.0.0.1", parts.port or 6379)

    class Outages(RuleBasedStateMachine):
        @initialize()
        def start(self) -> None:
            self.prefix = f"telos-test:{uuid.uuid4().hex[:12]}:"
            self.proxies = [ReplyDropper(upstream) for _ in range(WORKERS)]
            self.clocks = [Clock() for _ in range(WORKERS)]
            self.stores = []
            self.sessions = []
            for w in range(WORKERS):
                store = _store(self.proxies[w].port, self.prefix, retry=w != WORKERS - 1)
                store.breaker = StoreBreaker(5.0, 60.0, clock=self.clocks[w])
                self.stores.append(store)
                self.sessions.append(telos_wrap.session("shared", store=store))
            self.calls = 0
            self.tokens = 0

        @rule(w=st.integers(0, WORKERS - 1), tokens=st.integers(1, 50))
        def call(self, w: int, tokens: int) -> None:
            index = runtime_of(self.sessions[w]).note_passthrough("anthropic", "anthropic", {"messages": []})
            assert index >= 0
            runtime_of(self.sessions[w]).record_usage(index, UsageReport("anthropic", tokens, 0, 0, 1))
            self.calls += 1
            self.tokens += tokens

        @rule(w=st.integers(0, WORKERS - 1))
        def outage(self, w: int) -> None:
            self.stores[w].breaker.failure(ConnectionError("outage"))

        @rule(w=st.integers(0, WORKERS - 1))
        def recover(self, w: int) -> None:
            self.clocks[w].now += 100.0

        @rule(w=st.integers(0, WORKERS - 1), tokens=st.integers(1, 50))
        def call_losing_its_answer(self, w: int, tokens: int) -> None:
            self.proxies[w].arm()
            self.call(w, tokens)
            self.proxies[w].armed.clear()

        @rule(w=st.integers(0, WORKERS - 1))
        def flush(self, w: int) -> None:
            self.sessions[w].flush()

        @invariant()
        def never_more_than_made(self) -> None:
            stored = self.stored()
            if stored is not None:
                assert stored.requests <= self.calls

        def stored(self) -> SessionState | None:
            loaded = self.stores[0].load(self.sessions[0].store_key)  # the tenant's key
            return None if loaded is None else SessionState.loads(loaded.text)

        @rule()
        def everyone_back(self) -> None:
            for w in range(WORKERS):
                self.clocks[w].now += 100.0
                self.proxies[w].armed.clear()
            for _ in range(2):
                for session in self.sessions:
                    session.flush()
            stored = self.stored()
            if self.calls == 0:
                return
            assert stored is not None
            assert stored.requests == self.calls
            usage = stored.usage["anthropic"]
            assert (usage.responses, usage.raw, usage.output) == (self.calls, self.tokens, self.calls)

        def teardown(self) -> None:
            if hasattr(self, "stores"):
                self.everyone_back()
                for store in self.stores:
                    store.delete("shared")
                    store.close()
                for proxy in self.proxies:
                    proxy.close()

    Outages.TestCase.settings = settings(
        max_examples=25,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,  # a failure is shrunk once, not once per distinct bug
    )
    Outages.TestCase().runTest()
