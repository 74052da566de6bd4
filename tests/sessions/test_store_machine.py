"""A state machine over one worker's session and a store that fails, recovers and loses the session.

Whatever the interleaving of requests, usage, outages (the circuit breaker opening, windows passing,
probes), the store forgetting the session and a failover putting back the copy the last write
replaced (a replica that had not received it), once the store answers again and the worker writes,
the store holds every request and every usage exactly once: outage state is reconciled, a lost
session or a lost last write is restored, nothing is dropped or counted twice.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from telos_wrap.emulator import ManualClock
from telos_wrap.ir.model import UsageReport
from telos_wrap.sessions import MemoryStore, Session, SessionState
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.stores.breaker import StoreBreaker
from telos_wrap.sessions.stores.store import Swapped, Versioned

from .test_store_io import CountingStore


class FailoverStore(CountingStore):
    """A ``CountingStore`` that remembers what each successful write replaced, so a test can put it
    back as a promoted replica that missed that write would."""

    replaced: Versioned | None = None

    def swap(self, session_id: str, expected: int, text: str) -> Swapped:
        before = self.backend.load(session_id)
        swapped = super().swap(session_id, expected, text)
        if swapped.revision is not None:
            self.replaced = before
        return swapped


class OneWorker(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(0.0)
        self.backend = MemoryStore()
        self.store = FailoverStore(self.backend)
        self.store.breaker = StoreBreaker(backoff=5.0, max_backoff=20.0, clock=self.clock.now)  # type: ignore[attr-defined]
        self.session = Session("machine", store=self.store)
        self.requests = 0
        self.usage = 0
        self.open_indices: list[int] = []

    @rule()
    def request(self) -> None:
        index = runtime_of(self.session).note_passthrough("anthropic", "anthropic", {"messages": []})
        assert index >= 0, "a request is always recorded (in the store or in this process)"
        self.requests += 1
        self.open_indices.append(index)

    @precondition(lambda self: self.open_indices)
    @rule(tokens=st.integers(0, 1000))
    def usage_arrives(self, tokens: int) -> None:
        index = self.open_indices.pop(0)
        report = UsageReport(engine="anthropic", raw_input=tokens, cache_read=0, cache_write=0, output=1)
        runtime_of(self.session).record_usage(index, report)
        self.usage += 1

    @rule(down=st.booleans())
    def store_health(self, down: bool) -> None:
        self.store.down = down

    @rule(seconds=st.sampled_from([1.0, 5.0, 20.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def store_loses_the_session(self) -> None:
        self.backend.delete("machine")

    @rule()
    def failover_loses_the_last_write(self) -> None:
        replaced = self.store.replaced
        entry = self.backend._entries.get("machine")
        if replaced is None or entry is None:
            return
        entry.revision, entry.text, entry.state = replaced.revision, replaced.text, None

    @invariant()
    def nothing_dropped(self) -> None:
        assert self.store.breaker.stats().events["dropped"] == 0  # type: ignore[attr-defined]

    def teardown(self) -> None:
        self.store.down = False
        self.clock.advance(60.0)
        # The next write (here one more request) carries everything this process holds: a lost
        # session is put back, outage state reconciled, pending usage added.
        self.request()
        self.session.flush()
        stored = self.backend.load("machine")
        state = SessionState.loads(stored.text) if stored is not None else SessionState(session_id="machine")
        assert state.requests == self.requests
        assert sum(u.responses for u in state.usage.values()) == self.usage


TestOneWorker = OneWorker.TestCase
TestOneWorker.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
