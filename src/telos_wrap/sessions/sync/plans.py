"""The sans-IO store plans of a session: what this process holds of its state, and how it is kept in step.

Every change of a session's state is planned by ``StateSync.plan``: a generator that yields the
store operations it needs (``LOAD``, ``Swap``, ``GetBlob``, ``Sleep``) and decides what to do with
their results; ``sessions.sync.drivers`` runs it (sync: the store's methods; async: their ``a``-twins,
awaited). The plan is the only place that knows the protocol: compare-and-set on the revision this
process last saw (one round trip when nobody else wrote), the current state back when it loses,
pending usage folded in, the circuit breaker, and reconciliation after an outage (docs/sessions.md,
"When the store is unavailable" and "Running at scale").

Nothing here does I/O, sleeps, or knows a store client, asyncio or redis (an import-linter
contract): a plan's input is the state it holds and the answers sent into it, its output the
operations it yields. The session, the store and the breaker are reached through ``SyncHost``.

Why one module, over 500 lines: the plans are one protocol (load, compare-and-set, lose and
recompute, reconcile after an outage) over one held state; splitting them would split the
invariants they keep together, which the drivers run identically sync and async.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from telos_wrap.errors import (
    RefPoolError,
    StoreBusyError,
    StoreConflictError,
    StoreEntryError,
    StoreUnavailableError,
    TelosStageError,
)
from telos_wrap.failopen import report_failure
from telos_wrap.ir.model import UsageReport
from telos_wrap.ir.shared import share
from telos_wrap.sessions.durable.merge import Delta, delta_of, marked, merged
from telos_wrap.sessions.durable.state import EngineUsage, SessionState
from telos_wrap.sessions.hashed import session_hash

__all__ = [
    "ABANDONED",
    "LOAD",
    "MAX_ATTEMPTS",
    "Breaker",
    "Deferred",
    "Failed",
    "GetBlob",
    "Sleep",
    "StateSync",
    "StoreOp",
    "Swap",
    "SyncHost",
    "apply_usage",
    "unchanged",
]

logger = logging.getLogger("telos_wrap.sessions")

#: How many unanswered writes of one session are remembered (to recognize one that landed).
UNCONFIRMED_LIMIT = 16
#: How often a compare-and-set is retried before ``StoreConflictError``.
MAX_ATTEMPTS = 200
T = TypeVar("T")


# -- the store operations a plan yields --------------------------------------------------------------


#: The retry jitter's draws come from the OS (``SystemRandom``: stateless, fork-safe), never from the
#: process's ``random`` state, which is the application's (the background flush runs plans from its
#: own thread).
_jitter = random.SystemRandom()


class StoreOp:
    """An operation a plan yields for its driver to perform (``LOAD``, ``Swap``, ``GetBlob``, ``Sleep``); the
    driver sends back the store's answer, or ``Failed`` when the store raised."""

    __slots__ = ()


class _Load(StoreOp):
    __slots__ = ()


#: Read the session's entry (answered with a ``Versioned`` or ``None``).
LOAD = _Load()


class Swap(StoreOp):
    """Write ``state`` if the store still holds revision ``expected``; its text is encoded on demand
    (an in-process ``MemoryStore`` keeps the state object itself, ``MemoryStore.swap_state``)."""

    __slots__ = ("_text", "expected", "state")

    def __init__(self, expected: int, state: SessionState) -> None:
        self.expected = expected
        self.state = state
        self._text: str | None = None

    @property
    def text(self) -> str:
        """The state's stored text (``SessionState.dumps``), encoded on the first ask and kept (``encoded``):
        what a store's compare-and-set writes, and what the plan remembers of a write whose answer was
        lost."""
        if self._text is None:
            self._text = self.state.dumps()
        return self._text

    @property
    def encoded(self) -> str | None:
        """The text, if anything asked for it (``None``: the store kept the state object)."""
        return self._text


@dataclass(frozen=True, slots=True)
class GetBlob(StoreOp):
    """Read the session's blob ``key`` (a pinned text the state names and this process lacks): answered with
    the text, ``None`` if the store has none, or ``Failed``."""

    key: str


@dataclass(frozen=True, slots=True)
class Sleep(StoreOp):
    """Wait ``seconds`` before the next attempt (the jitter after the third lost compare-and-set in a row),
    answered with ``None``: the sync driver sleeps the thread (it holds the session's lock meanwhile), the
    async one the task."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Failed:
    """What a driver sends back into a plan when a store operation raised (``started``: when the
    operation began, on the breaker's clock). ``sent``: ``False`` when the operation never reached
    the store (the call had no store time left: ``stores/budget.py``), which says nothing of the
    store: no breaker window, and a write that was never sent cannot have landed."""

    exc: BaseException | None
    started: float | None = None
    sent: bool = True


#: An async store call given up because the breaker tripped meanwhile (not a new failure).
ABANDONED = Failed(None)


@dataclass(frozen=True, slots=True)
class Deferred:
    """A request counted without the store (``SessionRuntime.note_passthrough_deferred``: its call had no
    store time left for the session's plan). Kept in ``StateSync.pending`` beside the usage not
    yet written, in order, and applied with it by the session's next write (its ``step``)."""

    step: Callable[[SessionState], tuple[SessionState, Any]]


# -- what a plan needs of the world -------------------------------------------------------------------


class Breaker(Protocol):
    """The part of ``sessions.stores.breaker.StoreBreaker`` a plan uses (no I/O, no waiting)."""

    @property
    def backoff(self) -> float:
        """Seconds of the breaker's first window (``StoreBreaker.backoff``; the plan names it in the failure
        it reports)."""
        ...

    def allow(self) -> bool:
        """``StoreBreaker.allow``: whether this operation may go to the store (the probe, once the window is
        over); a refusal is counted as skipped."""
        ...

    def success(self) -> None:
        """``StoreBreaker.success``: the store answered; closes the breaker if this was the probe."""
        ...

    def busy(self) -> None:
        """``StoreBreaker.busy``: no pooled connection came free in time (``StoreBusyError``): counted, no
        window."""
        ...

    def unused(self) -> None:
        """``StoreBreaker.unused``: an operation ``allow`` let through was never sent (no store time left); a
        probe is given back."""
        ...

    def failure(self, exc: BaseException, *, started: float | None = None) -> None:
        """``StoreBreaker.failure``: the store failed or timed out; opens a window unless the operation began
        (``started``) before the current window opened."""
        ...


class SyncHost(Protocol):
    """What a ``StateSync`` asks of its session (``core.Session`` implements it)."""

    def current_store(self) -> object:
        """The store the session uses now (compared by identity)."""
        ...

    def store_breaker(self) -> Breaker:
        """The breaker of the session's store calls (on a cluster, its slot's node's:
        ``RedisStore.breaker_for``). A plan asks once and reports every outcome to that breaker, even if the
        slot map moves meanwhile."""
        ...

    def store_inline(self) -> bool:
        """Whether the store keeps state objects in this process (``MemoryStore.swap_state``)."""
        ...

    def store_event(self, kind: str, state: SessionState, reason: str) -> None:
        """Record a ``StoreEvent`` (reconciled, restored, dropped, reset) on the store's breaker."""
        ...

    def hold(self) -> None:
        """The session holds state the store does not have yet: keep it for a later flush."""
        ...

    def release(self) -> None:
        """The store has everything the session held."""
        ...


def unchanged(state: SessionState) -> tuple[None, None]:
    """A step that changes nothing (a flush: pending usage and outage state are written)."""
    return None, None


def apply_usage(
    state: SessionState, index: int, report: UsageReport | None, response_id: str | None
) -> SessionState:
    """``state`` with one response's usage added (the fold of ``record_usage``)."""
    if report is None or report.raw_input is None:
        changes: dict[str, Any] = {"unreported": state.unreported + 1}
    else:
        by_ttl = report.cache_write_by_ttl or {}
        usage = dict(state.usage)
        usage[report.engine] = usage.get(report.engine, EngineUsage()).plus(
            raw=report.raw_input,
            read=report.cache_read or 0,
            write=report.cache_write or 0,
            write_1h=by_ttl.get("1h", 0) + by_ttl.get("12h", 0),
            output=report.output or 0,
        )
        changes = {"usage": usage}
    if response_id is not None and index >= state.last_response_index:
        changes["last_response_id"] = response_id
        changes["last_response_index"] = index
    return replace(state, **changes)  # one copy of the 19-field state, not two


class StateSync:
    """What this process holds of one session's stored state, and the plans that keep it in step.

    Not thread-safe by itself: the session runs one plan at a time (its lock).
    """

    def __init__(self, session_id: str, host: SyncHost) -> None:
        self.id = session_id
        self.host = host
        #: Pinned texts by blob key (filled by the plans, read by the turn).
        self.blobs: dict[str, str] = {}
        #: The store's copy as this process last saw it: (revision, text, state); revision 0 = absent.
        self.parsed: tuple[int, str | None, SessionState] | None = None
        self.bound: object | None = None  # the store ``parsed`` / ``dirty`` belong to
        #: State computed here while the store was unavailable, not yet written (reconciled later).
        self.dirty: SessionState | None = None
        #: Writes whose answer never came (text, state), since the last confirmed one: any may
        #: have landed all the same.
        self.unconfirmed: list[tuple[str, SessionState]] = []
        #: The store's (revision, text) that this process's last confirmed write replaced: a
        #: failover that loses that write puts exactly this back (see ``plan``).
        self.before: tuple[int, str] | None = None
        #: Usage recorded here (and requests counted without the store: ``Deferred``), written
        #: with the session's next write.
        self.pending: list[tuple[int, UsageReport | Deferred | None, str | None]] = []
        #: This worker's name in the states' ``applied`` marks, and its last write's number.
        self.writer = uuid.uuid4().hex[:12]
        self.seq = 0
        #: Counters this worker added that the store is not known to hold (``sessions/durable/merge.py``).
        self.delta = Delta()
        #: Unanswered writes since the last confirmed one: (their mark's seq, the delta they carried).
        self.attempts: list[tuple[int, Delta]] = []

    def cached_pins(self, state: SessionState) -> dict[str, str]:
        """The pinned texts of ``state`` from this process's blob cache (filled by the plan)."""
        pins: dict[str, str] = {}
        for slug, key in state.pins.items():
            text = self.blobs.get(key)
            if text is None:
                raise RefPoolError(f"pinned document {slug!r} is missing from the session store")
            pins[slug] = text
        return pins

    def bind_store(self) -> None:
        """Forget what this process knows of the state if the session now uses another store (the
        process default was replaced): that store's copy is the truth from now on."""
        store = self.host.current_store()
        if store is not self.bound:
            if self.bound is not None and (self.pending or self.dirty is not None):
                logger.debug(
                    "telos_wrap: session %s moved stores; unwritten state dropped", session_hash(self.id)
                )
            self.bound, self.parsed, self.dirty, self.before = store, None, None, None
            self.delta = Delta()
            self.attempts.clear()
            self.unconfirmed.clear()
            self.pending.clear()

    def adopt(self, stored: Any) -> None:
        """Take ``stored`` (the store's ``Versioned`` copy, or None: absent) as this process's base."""
        if stored is None:
            self.parsed = (0, None, SessionState(session_id=self.id))
            return
        cached = self.parsed
        # The state this process last wrote or read, if the store still holds exactly that text:
        # skip re-parsing it (the revision alone is not trusted; the text must be equal too).
        if cached is not None and cached[0] == stored.revision:
            if cached[1] == stored.text:
                return
            if cached[1] is None and self.host.store_inline():
                # Written by this session with ``MemoryStore.swap_state`` (never encoded here): an
                # in-process store never reuses a revision (one counter for all), so it is that state.
                self.parsed = (stored.revision, stored.text, cached[2])
                return
        try:
            state = SessionState.loads(stored.text)
            if state.session_id != self.id:
                raise ValueError(f"the entry is the state of session {state.session_id!r}")
        except Exception as exc:  # store contents are not trusted (docs/security.md)
            self.reset(f"the store's entry is not a valid session state ({type(exc).__name__})")
            # At the entry's revision: the next compare-and-set replaces it.
            self.parsed = (stored.revision, stored.text, SessionState(session_id=self.id))
            return
        self.parsed = (stored.revision, stored.text, state)

    def reset(self, reason: str) -> None:
        """This session's entry in the store is malformed: start again from a fresh state (recorded,
        logged; the next write replaces the entry). Never a breaker trip: the store is fine."""
        fresh = SessionState(session_id=self.id)
        self.parsed = (0, None, fresh)
        self.host.store_event("reset", fresh, reason)
        # Logged (hashed, counted per kind) with the event: sessions/stores/breaker.py, ``record``.

    def view(self) -> SessionState | None:
        """The newest state this process holds (written or not), without pending usage."""
        if self.dirty is not None:
            return self.dirty
        return None if self.parsed is None else self.parsed[2]

    def with_pending(self, state: SessionState) -> SessionState:
        """``state`` with the pending work folded in, in order: each response's usage (``apply_usage``) and
        each request counted without the store (``Deferred.step``). Pure: ``pending`` itself is let go of only
        once a write holds it (``written``, ``keep_local``)."""
        for index, report, response_id in self.pending:
            if isinstance(report, Deferred):
                state = report.step(state)[0]
            else:
                state = apply_usage(state, index, report, response_id)
        return state

    def unavailable(
        self,
        exc: BaseException | None,
        strict: bool | None,
        reported: list[bool],
        started: float | None = None,
        breaker: Breaker | None = None,
        *,
        sent: bool = True,
    ) -> None:
        """The store cannot be used for this call: open the breaker (if it just failed) and count it.

        ``breaker``: the one the plan asked before the call (on a cluster, the breaker of the node
        the call went to: the slot map may have moved on since, and the failure is that node's).
        ``sent``: ``False`` for an operation the call had no store time left to send (no window; a
        probe it was is given back)."""
        if breaker is None:
            breaker = self.host.store_breaker()
        if not sent:
            breaker.unused()
        elif isinstance(exc, StoreBusyError):
            breaker.busy()  # this process is saturated, the store is not sick: no window
        elif exc is not None:
            breaker.failure(exc, started=started)
        if reported:
            return
        reported.append(True)
        cause = (
            exc
            if exc is not None
            else StoreUnavailableError(
                f"the session store failed recently; it is probed again after {breaker.backoff:.1f} s"
            )
        )
        # Warned about by the breaker (once per window); counted here once per call.
        report_failure(TelosStageError("session.store", cause), strict=strict, warn=False)

    def plan(
        self,
        step: Callable[[SessionState], tuple[SessionState | None, T]],
        strict: bool | None,
        *,
        readonly: bool = False,
        counted: bool = True,
    ) -> Generator[StoreOp, Any, T]:
        """Run ``step`` on the newest state and make its result durable (see the module docstring).

        ``counted``: a store failure is counted in ``failure_counts()`` (once per plan); ``False``
        for writes no call of the application waits for (the background flush, ``sync/known.py``):
        the breaker still hears of the failure, the application's failure counts do not."""
        self.bind_store()
        breaker = self.host.store_breaker()
        reported: list[bool] = [] if counted else [True]
        restoring = False
        rewound = False
        for attempt in range(MAX_ATTEMPTS):
            if self.parsed is None:
                if breaker.allow():
                    loaded = yield LOAD
                    if isinstance(loaded, Failed) and isinstance(loaded.exc, StoreEntryError):
                        breaker.success()  # the store answered: only this session's entry is bad
                        self.reset(str(loaded.exc))
                    elif isinstance(loaded, Failed):
                        self.unavailable(
                            loaded.exc, strict, reported, loaded.started, breaker=breaker, sent=loaded.sent
                        )
                    else:
                        breaker.success()
                        self.adopt(loaded)
                        if self.dirty is not None and loaded is not None:
                            self.merge_into(self.parsed[2] if self.parsed is not None else None)
                else:
                    self.unavailable(None, strict, reported, breaker=breaker)
            base = self.view() or SessionState(session_id=self.id)
            for key in base.pins.values():
                if key not in self.blobs and self.parsed is not None and breaker.allow():
                    blob = yield GetBlob(key)
                    if isinstance(blob, Failed):
                        self.unavailable(
                            blob.exc, strict, reported, blob.started, breaker=breaker, sent=blob.sent
                        )
                    elif blob is not None:
                        breaker.success()
                        self.blobs[key] = share(blob)  # one copy of a document pinned by many
            pending = len(self.pending)
            state = self.with_pending(base)
            new_state, result = step(state)
            target = state if new_state is None else new_state
            if readonly or (target is base and self.dirty is None and not (restoring or rewound)):
                return result  # nothing durable changed: no store round trip
            if self.parsed is None or not breaker.allow():
                if self.parsed is not None:
                    self.unavailable(None, strict, reported, breaker=breaker)
                self.keep_local(target, pending, base)
                return result
            marked_write = not self.host.store_inline()
            if marked_write:
                # A shared store: the write carries this worker's mark (how a lost answer is settled).
                self.seq += 1
                target = marked(target, self.writer, self.seq)
            swap = Swap(self.parsed[0], target)
            outcome = yield swap
            if isinstance(outcome, Failed):
                self.unavailable(
                    outcome.exc, strict, reported, outcome.started, breaker=breaker, sent=outcome.sent
                )
                self.keep_local(target, pending, base)
                if not outcome.sent:
                    return result  # never reached the store: nothing of it can have landed
                self.attempts.append((self.seq, self.delta))
                del self.attempts[:-UNCONFIRMED_LIMIT]
                # The write may still have landed (only its answer was lost): recognized later.
                self.unconfirmed.append((swap.text, target))
                del self.unconfirmed[:-UNCONFIRMED_LIMIT]
                return result
            breaker.success()
            if outcome.revision is not None:
                self.unconfirmed.clear()
                if restoring:
                    self.host.store_event(
                        "restored", target, "the store had lost the session; this copy was written back"
                    )
                elif rewound:
                    self.host.store_event(
                        "restored",
                        target,
                        "the store went back to the state this process's last write replaced (a "
                        "failover promoted a replica that had not received it); this copy was written back",
                    )
                elif self.dirty is not None:
                    self.host.store_event(
                        "reconciled", target, "state kept in-process during a store outage was written"
                    )
                previous = self.parsed
                self.before = (previous[0], previous[1]) if previous[0] and previous[1] is not None else None
                self.parsed = (outcome.revision, swap.encoded, target)
                self.written(pending)
                return result
            current = outcome.current
            if current is None:
                # The store lost the session (restarted without persistence, evicted, expired):
                # write this process's copy back, as a new session (expected revision 0).
                self.parsed = (0, None, base)
                self.dirty = None
                restoring = True
                continue
            landed = next((s for t, s in self.unconfirmed if t == current.text), None)
            self.unconfirmed.clear()
            if self.dirty is not None and landed is not None:
                # It is one of this process's own writes whose answer was lost: build on it.
                self.parsed = (current.revision, current.text, landed)
                continue
            before, self.before = self.before, None
            if before == (current.revision, current.text):
                # The store holds exactly what this process's last write replaced: that write was
                # lost (a failover promoted a replica it had not reached: docs/sessions.md,
                # "Running at scale") and nobody wrote since. This process's copy continues that
                # state: written back on it, nothing dropped. (Revisions are never reused, so
                # revision and text equal means that very state.)
                self.parsed = (current.revision, current.text, self.parsed[2])
                rewound = True
                continue
            known = self.parsed[2].requests
            self.adopt(current)
            if marked_write and self.parsed[2].applied.get(self.writer, 0) >= self.seq:
                # This very write landed, and another worker built on it before the answer came: a
                # client that sends a command again after a lost answer (redis-py's retry) finds the
                # store moved on, and the store's mark for this worker names the write. Done: what
                # it carried is in the store (counting it again would count it twice).
                self.unconfirmed.clear()
                self.written(pending)
                return result
            if self.dirty is not None:
                self.merge_into(self.parsed[2])
            if self.parsed[2].requests < known:
                # Request counts only grow: the store's copy went back in time (another worker put
                # back an older copy after the store lost the session). Not merged: recorded.
                self.host.store_event(
                    "dropped",
                    self.parsed[2],
                    f"the store's copy has {self.parsed[2].requests} requests, this process had seen "
                    f"{known}: an older copy was put back after the store lost the session",
                )
            restoring = rewound = False
            if attempt >= 2:
                yield Sleep(_jitter.uniform(0, 0.0005 * min(attempt, 20)))
        raise StoreConflictError(
            f"session {self.id!r}: lost the store's compare-and-set {MAX_ATTEMPTS} times in a row"
        )

    def written(self, pending: int) -> None:
        """The store holds this process's work: its outage state and the first ``pending`` entries of
        its pending usage (the rest came meanwhile); let go of the session if nothing is left."""
        self.dirty = None
        self.delta = Delta()
        self.attempts.clear()
        del self.pending[:pending]
        if not self.pending:
            self.host.release()

    def keep_local(self, state: SessionState, pending: int, base: SessionState) -> None:
        """The store is unavailable: ``state`` (grown from ``base``) lives in this process until it
        can be written; what it added to the counters joins ``delta``."""
        self.delta = self.delta.combine(delta_of(state, base))
        self.dirty = state
        del self.pending[:pending]
        self.host.hold()

    def settle(self, stored: SessionState) -> None:
        """Take out of ``delta`` what the store already holds: the delta of this worker's latest
        unanswered write that landed (the store's mark for this writer names it)."""
        seq = stored.applied.get(self.writer)
        if seq is None:
            return
        landed = next((d for s, d in reversed(self.attempts) if s <= seq), None)
        if landed is not None:
            self.delta = self.delta.combine(landed, -1)
            self.attempts = [(s, d.combine(landed, -1)) for s, d in self.attempts if s > seq]

    def merge_into(self, stored: SessionState | None) -> None:
        """Another worker wrote while this one could not: add this worker's outage work to
        ``stored`` (``sessions/durable/merge.py``) and write that next, instead of dropping it."""
        assert self.dirty is not None
        if stored is None:
            return
        self.settle(stored)
        mine = self.dirty
        self.dirty = merged(stored, self.delta, mine)
        self.host.store_event(
            "merged",
            self.dirty,
            f"another worker wrote the session meanwhile: this worker's {self.delta.requests} requests "
            "and their usage are added to the stored state",
        )
