"""``Session``: one conversation, its durable state in a store, and the context that carries it.

``with telos_wrap.session("chat-42"):`` (or ``async with``) makes every patched call inside it —
including calls made in asyncio tasks started inside it — part of session ``chat-42``. Sessions
nest: the innermost active one wins and the outer one is back when it exits. Calls outside any
session get an implicit session keyed by what stays fixed for a whole conversation, so a one-line
``patch()`` user loses nothing.

Every request is one compare-and-set on the session's state (see ``store.py``): load, run the pure
``run_turn``, write if nobody wrote in between, else redo. Two workers sharing a session through a
``RedisStore`` therefore never overwrite each other's turn, and every counter stays exact.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import hashlib
import logging
import random
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

from telos_wrap.bridge import BridgeOptions
from telos_wrap.config import current_config
from telos_wrap.engines.base import Breakpoint, EmitPlan
from telos_wrap.errors import (
    RefPoolError,
    StoreBusyError,
    StoreConflictError,
    StoreEntryError,
    StoreUnavailableError,
    TelosError,
    TelosInvariantError,
    TelosStageError,
)
from telos_wrap.failopen import report_failure
from telos_wrap.history import HistoryMemo
from telos_wrap.ir.canon import canonical_json
from telos_wrap.ir.hints import TelosHints, parse_hints
from telos_wrap.ir.model import Api, TelosBlock, Transformation, UsageReport
from telos_wrap.ir.refpool import emitted_references
from telos_wrap.pipeline import Prepared, PrepareOptions, SessionHooks
from telos_wrap.sessions import fleet, fleet_io
from telos_wrap.sessions.arguments import check_session_arguments
from telos_wrap.sessions.breaker import StoreBreaker, StoreEvent, breaker_of
from telos_wrap.sessions.folds import FoldError, validate_range, validate_slug
from telos_wrap.sessions.identity import conversation_key, tells_users_apart
from telos_wrap.sessions.records import CacheBreak, RangeFold, SlugFold, VolatileSpan
from telos_wrap.sessions.refresh import RefreshDecision, decide_refresh
from telos_wrap.sessions.state import EngineUsage, SessionState
from telos_wrap.sessions.stats import PriceMultipliers, SessionStats
from telos_wrap.sessions.store import SessionStore, StoreOps, Versioned, default_store, store_ops
from telos_wrap.sessions.turn import StateHooks, TurnResult, run_turn
from telos_wrap.sessions.wire_i2 import WireLedger, note_telos_rewrote

__all__ = [
    "RequestRecord",
    "Session",
    "current_session",
    "implicit_session",
    "named_session",
    "session",
]

logger = logging.getLogger("telos_wrap.sessions")

_stack: contextvars.ContextVar[tuple[Session, ...]] = contextvars.ContextVar(
    "telos_wrap_sessions", default=()
)
_IMPLICIT_LIMIT = 1024
#: How many emitted texts per slug, and how many slugs, a session remembers as its own references.
_OWN_TEXTS = 4
_OWN_SLUGS = 256
#: How many unanswered writes of one session are remembered (to recognize one that landed).
_UNCONFIRMED_LIMIT = 16
#: How often a compare-and-set is retried before ``StoreConflictError``.
MAX_ATTEMPTS = 200
T = TypeVar("T")
CacheBreakCallback = Callable[[CacheBreak], None]


#: A breakpoint as ``explain`` shows it: ``(name, segment, message, block, ttl)``.
Anchor = tuple[str, str, "int | None", int, "str | None"]
#: A ``Transformation`` as ``explain`` shows it: ``(kind, where, detail, chars)``.
Change = tuple[str, str, str, int]


def anchor(bp: Breakpoint) -> Anchor:
    """``bp`` as a plain tuple (see ``Explained``)."""
    return (bp.name, bp.segment, bp.message, bp.block, bp.ttl)


def change(t: Transformation) -> Change:
    """``t`` as a plain tuple (see ``Explained``)."""
    return (t.kind, t.where, t.detail, t.chars)


class Explained(NamedTuple):
    """What ``explain`` shows of a request telos prepared: its plan and records, not its body or IR.

    A session keeps the last 64 of these. Holding whole pipeline results (wire body, IR) would keep
    every one of them alive; and its breakpoints and records are plain tuples of strings and
    numbers, not dataclasses: CPython's collector stops tracking an exact tuple whose items are all
    untracked, so in a process of hundreds of sessions they add nothing to the objects every full
    garbage collection walks (docs/sessions.md, "What a session keeps in this process").
    """

    untouched: str | None
    breakpoints: tuple[Anchor, ...]
    notes: tuple[str, ...]
    records: tuple[Change, ...]

    @classmethod
    def of(cls, prepared: Prepared) -> Explained:
        return cls(
            prepared.untouched,
            tuple(map(anchor, prepared.plan.breakpoints)),
            prepared.plan.notes,
            tuple(map(change, prepared.ir.records)),
        )


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What this process remembers of one request of the session (for ``explain``).

    Attributes:
        index: the request's index in its session.
        api / engine: wire API and engine adapter.
        kind: ``"telos"`` (rewritten), ``"passthrough"`` (sent as built) or ``"refresh"`` (pre-warm).
        explained: what telos did to it (``None`` unless ``kind == "telos"``).
        cache_break / learned: what ``run_turn`` found.
        usage: the response's usage once recorded.
        adopted: the fleet's spans the request started with (``sessions/fleet.py``).
    """

    index: int
    api: Api
    engine: str
    kind: str
    explained: Explained | None = None
    cache_break: CacheBreak | None = None
    learned: VolatileSpan | None = None
    usage: UsageReport | None = None
    adopted: tuple[VolatileSpan, ...] = ()


# -- the store operations a plan yields (see ``Session._plan``) ----------------------------------------


class _StoreOp:
    __slots__ = ()


class _Load(_StoreOp):
    __slots__ = ()


_LOAD = _Load()


class _Swap(_StoreOp):
    """Write ``state`` if the store still holds revision ``expected``; its text is encoded on demand
    (an in-process ``MemoryStore`` keeps the state object itself, ``MemoryStore.swap_state``)."""

    __slots__ = ("_text", "expected", "state")

    def __init__(self, expected: int, state: SessionState) -> None:
        self.expected = expected
        self.state = state
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.state.dumps()
        return self._text

    @property
    def encoded(self) -> str | None:
        """The text, if anything asked for it (``None``: the store kept the state object)."""
        return self._text


@dataclass(frozen=True, slots=True)
class _GetBlob(_StoreOp):
    key: str


@dataclass(frozen=True, slots=True)
class _Sleep(_StoreOp):
    seconds: float


@dataclass(frozen=True, slots=True)
class _Failed:
    """What a driver sends back into a plan when a store operation raised (``started``: when the
    operation began, on the breaker's clock)."""

    exc: BaseException | None
    started: float | None = None


#: An async store call given up because the breaker tripped meanwhile (not a new failure).
_ABANDONED = _Failed(None)


async def _race_trip(call: Coroutine[Any, Any, Any], breaker: StoreBreaker) -> Any:
    """Await a store call; if the breaker trips first (another call failed), give up on it."""
    started = breaker.clock()
    task = asyncio.ensure_future(call)
    trip = breaker.trip_future()
    try:
        await asyncio.wait((task, trip), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task.done():
        try:
            return task.result()
        except Exception as exc:
            return _Failed(exc, started)
    task.cancel()
    # A client may end a cancelled call with its own error (redis-py's cluster client raises
    # ConnectionError from a connect it was cancelled in): read it, so asyncio does not log it
    # as "never retrieved".
    task.add_done_callback(_retrieve)
    breaker.abandoned()
    return _ABANDONED


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _unchanged(state: SessionState) -> tuple[None, None]:
    return None, None


def _apply_usage(
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


def _blob_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _sync_call(ops: StoreOps, op: _StoreOp, session_id: str, started: float | None = None) -> Any:
    """One store operation of a plan through the store's sync methods; a failure comes back as ``_Failed``
    (``started``: the breaker's clock when the operation began)."""
    try:
        if op is _LOAD:
            return ops.load(session_id)
        if isinstance(op, _Swap):
            if ops.inline:
                return ops.store.swap_state(session_id, op.expected, op.state)
            return ops.swap(session_id, op.expected, op.text)
        assert isinstance(op, _GetBlob)
        return ops.get_blob(session_id, op.key)
    except Exception as exc:
        return _Failed(exc, started)


class Session:
    """One conversation. Create it with ``telos_wrap.session(...)`` (see that function for the options).

    Thread-safe; the request-path methods (``prepare_request``, ``note_passthrough``,
    ``record_usage``, ``hooks``) are called by the patch layer. Attributes: ``id``, ``hints``,
    ``strict``, ``implicit``, ``store``, ``learn_volatility``, ``diagnostics``.
    """

    def __init__(
        self,
        session_id: str | None = None,
        *,
        store: SessionStore | None = None,
        hints: TelosHints | None = None,
        strict: bool | None = None,
        implicit: bool = False,
        on_cache_break: CacheBreakCallback | None = None,
        learn_volatility: bool = True,
        diagnostics: bool = False,
        prices: Mapping[str, PriceMultipliers] | None = None,
        clock: Callable[[], float] | None = None,
        history_limit: int = 64,
        fleet_learning: bool | None = None,
    ) -> None:
        self.id = session_id or f"s-{uuid.uuid4().hex[:16]}"
        #: Fleet learning for this session (``None``: ``patch(fleet_learning=...)``); see ``_fleet``.
        self.fleet_learning = fleet_learning
        self._fleet_asked = False
        self._store = store
        self.hints = hints or TelosHints()
        self.strict = strict
        self.implicit = implicit
        self.on_cache_break = on_cache_break
        self.learn_volatility = learn_volatility
        self.diagnostics = diagnostics
        self.prices = dict(prices or {})
        self.clock: Callable[[], float] = clock or time.time
        self._lock = threading.RLock()
        self._records: OrderedDict[int, RequestRecord] = OrderedDict()
        self._usage_seen: OrderedDict[int, None] = OrderedDict()
        self._history_limit = history_limit
        self._blobs: dict[str, str] = {}
        self._last_request: tuple[Api, dict[str, Any], PrepareOptions] | None = None
        #: The latest request this process rewrote (its body is what a refresh re-sends).
        self._last_prepared: Prepared | None = None
        self._memo = HistoryMemo()
        self._ledger = WireLedger()
        #: The ref-pool stubs and entries this process emitted for the session (by slug, the latest
        #: few texts each): the only texts a later request's lift takes as references.
        self._own: dict[str, tuple[str, ...]] = {}
        #: The store's copy as this process last saw it: (revision, text, state); revision 0 = absent.
        self._parsed: tuple[int, str | None, SessionState] | None = None
        self._bound: SessionStore | None = None  # the store ``_parsed`` / ``_dirty`` belong to
        #: State computed here while the store was unavailable, not yet written (reconciled later).
        self._dirty: SessionState | None = None
        #: Writes whose answer never came (text, state), since the last confirmed one: any may
        #: have landed all the same.
        self._unconfirmed: list[tuple[str, SessionState]] = []
        #: The store's (revision, text) that this process's last confirmed write replaced: a
        #: failover that loses that write puts exactly this back (see ``_plan``).
        self._before: tuple[int, str] | None = None
        #: Usage recorded here, written with the session's next write.
        self._pending: list[tuple[int, UsageReport | None, str | None]] = []
        self._alocks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        _live[(_scope(store), self.id)] = self

    @property
    def store(self) -> SessionStore:
        """The session's store: the one given, else the process default at the time of use."""
        return self._store if self._store is not None else default_store()

    def __repr__(self) -> str:
        return f"<telos_wrap.Session {self.id!r}>"

    # -- context manager --------------------------------------------------------------------------

    def __enter__(self) -> Session:
        _stack.set((*_stack.get(), self))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack = _stack.get()
        if not stack or stack[-1] is not self:
            raise RuntimeError(f"{self!r} exited out of order: sessions must exit in reverse order of entry")
        _stack.set(stack[:-1])

    async def __aenter__(self) -> Session:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- durable state ------------------------------------------------------------------------------
    #
    # Every change of the session's state is planned by ``_plan`` (a generator that yields the store
    # operations it needs and decides what to do with their results) and run by ``_run`` (sync: the
    # store's methods) or ``_arun`` (async: their ``a``-twins, awaited). The plan is the only place
    # that knows the protocol: compare-and-set on the revision this process last saw (one round trip
    # when nobody else wrote), the current state back when it loses, pending usage folded in, the
    # circuit breaker, and reconciliation after an outage.

    def _bind_store(self) -> None:
        """Forget what this process knows of the state if the session now uses another store (the
        process default was replaced): that store's copy is the truth from now on."""
        store = self.store
        if store is not self._bound:
            if self._bound is not None and (self._pending or self._dirty is not None):
                logger.debug("telos_wrap: session %s moved stores; unwritten state dropped", self.id)
            self._bound, self._parsed, self._dirty, self._before = store, None, None, None
            self._unconfirmed.clear()
            self._pending.clear()

    def _breaker(self) -> StoreBreaker:
        return breaker_of(self.store)

    def _adopt(self, stored: Versioned | None) -> None:
        """Take ``stored`` (the store's current copy, or None: absent) as this process's base."""
        if stored is None:
            self._parsed = (0, None, SessionState(session_id=self.id))
            return
        cached = self._parsed
        # The state this process last wrote or read, if the store still holds exactly that text:
        # skip re-parsing it (the revision alone is not trusted; the text must be equal too).
        if cached is not None and cached[0] == stored.revision:
            if cached[1] == stored.text:
                return
            if cached[1] is None and store_ops(self.store).inline:
                # Written by this session with ``MemoryStore.swap_state`` (never encoded here): an
                # in-process store never reuses a revision (one counter for all), so it is that state.
                self._parsed = (stored.revision, stored.text, cached[2])
                return
        try:
            state = SessionState.loads(stored.text)
            if state.session_id != self.id:
                raise ValueError(f"the entry is the state of session {state.session_id!r}")
        except Exception as exc:  # store contents are not trusted (docs/security.md)
            self._reset(f"the store's entry is not a valid session state ({type(exc).__name__})")
            # At the entry's revision: the next compare-and-set replaces it.
            self._parsed = (stored.revision, stored.text, SessionState(session_id=self.id))
            return
        self._parsed = (stored.revision, stored.text, state)

    def _reset(self, reason: str) -> None:
        """This session's entry in the store is malformed: start again from a fresh state (recorded,
        logged; the next write replaces the entry). Never a breaker trip: the store is fine."""
        fresh = SessionState(session_id=self.id)
        self._parsed = (0, None, fresh)
        self._event("reset", fresh, reason)
        logger.warning("telos_wrap: session %s reset: %s", self.id, reason)

    def _view(self) -> SessionState | None:
        """The newest state this process holds (written or not), without pending usage."""
        if self._dirty is not None:
            return self._dirty
        return None if self._parsed is None else self._parsed[2]

    def _with_pending(self, state: SessionState) -> SessionState:
        for index, report, response_id in self._pending:
            state = _apply_usage(state, index, report, response_id)
        return state

    def _unavailable(
        self,
        exc: BaseException | None,
        strict: bool | None,
        reported: list[bool],
        started: float | None = None,
    ) -> None:
        """The store cannot be used for this call: open the breaker (if it just failed) and count it."""
        breaker = self._breaker()
        if isinstance(exc, StoreBusyError):
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

    def _plan(
        self,
        step: Callable[[SessionState], tuple[SessionState | None, T]],
        strict: bool | None,
        *,
        readonly: bool = False,
    ) -> Generator[_StoreOp, Any, T]:
        """Run ``step`` on the newest state and make its result durable (see the comment above)."""
        self._bind_store()
        breaker = self._breaker()
        reported: list[bool] = []
        restoring = False
        rewound = False
        for attempt in range(MAX_ATTEMPTS):
            if self._parsed is None:
                if breaker.allow():
                    loaded = yield _LOAD
                    if isinstance(loaded, _Failed) and isinstance(loaded.exc, StoreEntryError):
                        breaker.success()  # the store answered: only this session's entry is bad
                        self._reset(str(loaded.exc))
                    elif isinstance(loaded, _Failed):
                        self._unavailable(loaded.exc, strict, reported, loaded.started)
                    else:
                        breaker.success()
                        self._adopt(loaded)
                        if self._dirty is not None and loaded is not None:
                            self._drop("the store holds a state this process had not read before the outage")
                else:
                    self._unavailable(None, strict, reported)
            base = self._view() or SessionState(session_id=self.id)
            for key in base.pins.values():
                if key not in self._blobs and self._parsed is not None and breaker.allow():
                    blob = yield _GetBlob(key)
                    if isinstance(blob, _Failed):
                        self._unavailable(blob.exc, strict, reported, blob.started)
                    elif blob is not None:
                        breaker.success()
                        self._blobs[key] = blob
            pending = len(self._pending)
            state = self._with_pending(base)
            new_state, result = step(state)
            target = state if new_state is None else new_state
            if readonly or (target is base and self._dirty is None and not (restoring or rewound)):
                return result  # nothing durable changed: no store round trip
            if self._parsed is None or not breaker.allow():
                if self._parsed is not None:
                    self._unavailable(None, strict, reported)
                self._keep_local(target, pending)
                return result
            swap = _Swap(self._parsed[0], target)
            outcome = yield swap
            if isinstance(outcome, _Failed):
                self._unavailable(outcome.exc, strict, reported, outcome.started)
                self._keep_local(target, pending)
                # The write may still have landed (only its answer was lost): recognized later.
                self._unconfirmed.append((swap.text, target))
                del self._unconfirmed[:-_UNCONFIRMED_LIMIT]
                return result
            breaker.success()
            if outcome.revision is not None:
                self._unconfirmed.clear()
                if restoring:
                    self._event(
                        "restored", target, "the store had lost the session; this copy was written back"
                    )
                elif rewound:
                    self._event(
                        "restored",
                        target,
                        "the store went back to the state this process's last write replaced (a "
                        "failover promoted a replica that had not received it); this copy was written back",
                    )
                elif self._dirty is not None:
                    self._event(
                        "reconciled", target, "state kept in-process during a store outage was written"
                    )
                previous = self._parsed
                self._before = (previous[0], previous[1]) if previous[0] and previous[1] is not None else None
                self._parsed = (outcome.revision, swap.encoded, target)
                self._dirty = None
                del self._pending[:pending]
                if not self._pending:
                    _release(self)
                return result
            current = outcome.current
            if current is None:
                # The store lost the session (restarted without persistence, evicted, expired):
                # write this process's copy back, as a new session (expected revision 0).
                self._parsed = (0, None, base)
                self._dirty = None
                restoring = True
                continue
            landed = next((s for t, s in self._unconfirmed if t == current.text), None)
            self._unconfirmed.clear()
            if self._dirty is not None and landed is not None:
                # It is one of this process's own writes whose answer was lost: build on it.
                self._parsed = (current.revision, current.text, landed)
                continue
            before, self._before = self._before, None
            if before == (current.revision, current.text):
                # The store holds exactly what this process's last write replaced: that write was
                # lost (a failover promoted a replica it had not reached: docs/sessions.md,
                # "Running at scale") and nobody wrote since. This process's copy continues that
                # state: written back on it, nothing dropped. (Revisions are never reused, so
                # revision and text equal means that very state.)
                self._parsed = (current.revision, current.text, self._parsed[2])
                rewound = True
                continue
            if self._dirty is not None:
                self._drop(f"another worker wrote the session (revision {current.revision}) meanwhile")
            known = self._parsed[2].requests
            self._adopt(current)
            if self._parsed[2].requests < known:
                # Request counts only grow: the store's copy went back in time (another worker put
                # back an older copy after the store lost the session). Not merged: recorded.
                self._event(
                    "dropped",
                    self._parsed[2],
                    f"the store's copy has {self._parsed[2].requests} requests, this process had seen "
                    f"{known}: an older copy was put back after the store lost the session",
                )
            restoring = rewound = False
            if attempt >= 2:
                yield _Sleep(random.uniform(0, 0.0005 * min(attempt, 20)))
        raise StoreConflictError(
            f"session {self.id!r}: lost the store's compare-and-set {MAX_ATTEMPTS} times in a row"
        )

    def _keep_local(self, state: SessionState, pending: int) -> None:
        """The store is unavailable: ``state`` lives in this process until it can be written."""
        self._dirty = state
        del self._pending[:pending]
        _hold(self)

    def _update(self, step: Callable[[SessionState], tuple[SessionState | None, T]]) -> T:
        """Apply a primitive's ``step`` durably (raises ``TelosStageError`` if the store is unavailable)."""
        with self._lock:
            return self._run(self._plan(step, strict=True))

    def _drop(self, reason: str) -> None:
        assert self._dirty is not None
        self._event("dropped", self._dirty, reason)
        self._dirty = None

    def _event(self, kind: str, state: SessionState, reason: str) -> None:
        self._breaker().record(StoreEvent(kind, self.id, state.requests, reason, self.clock()))

    def _run(self, plan: Generator[_StoreOp, Any, T]) -> T:
        """Run a plan with the store's sync methods (the caller holds ``self._lock``)."""
        ops = store_ops(self.store)
        clock = self._breaker().clock
        value: Any = None
        while True:
            try:
                op = plan.send(value)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            if isinstance(op, _Sleep):
                time.sleep(op.seconds)
                value = None
                continue
            value = _sync_call(ops, op, self.id, clock())

    async def _arun(self, plan: Generator[_StoreOp, Any, T]) -> T:
        """Run a plan with the store's async methods, one plan per session at a time."""
        ops = store_ops(self.store)
        breaker = self._breaker()
        async with self._async_lock():
            value: Any = None
            while True:
                try:
                    op = plan.send(value)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                if isinstance(op, _Sleep):
                    await asyncio.sleep(op.seconds)
                    value = None
                    continue
                if ops.inline:
                    # An in-memory store never waits: its async twins are its sync methods, so the
                    # race against the breaker (a task and a loop iteration, ~25 us) cannot matter.
                    value = _sync_call(ops, op, self.id, breaker.clock())
                    continue
                call: Coroutine[Any, Any, Any]
                if op is _LOAD:
                    call = ops.aload(self.id)
                elif isinstance(op, _Swap):
                    call = ops.aswap(self.id, op.expected, op.text)
                else:
                    assert isinstance(op, _GetBlob)
                    call = ops.aget_blob(self.id, op.key)
                value = await _race_trip(call, breaker)

    def _async_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._alocks.get(loop)
        if lock is None:
            lock = self._alocks[loop] = asyncio.Lock()
        return lock

    def flush(self) -> None:
        """Write what this process holds and the store does not yet (pending usage, outage state).

        Usage is folded into the session's next write (see ``docs/sessions.md``); ``flush`` writes
        it now. No store round trip when there is nothing to write. Never raises (fail open).
        """
        with self._lock:
            if self._pending or self._dirty is not None:
                with contextlib.suppress(TelosError):
                    self._run(self._plan(_unchanged, strict=False))

    async def aflush(self) -> None:
        """``flush`` for async code (the store's async client; nothing blocks the event loop)."""
        if self._pending or self._dirty is not None:
            with contextlib.suppress(TelosError):
                await self._arun(self._plan(_unchanged, strict=False))

    def _read(self) -> SessionState:
        """The store's current state (after writing this process's pending usage), else this process's."""
        for other in _held():
            if other.id == self.id and other is not self and other.store is self.store:
                other.flush()
        with self._lock:
            self.flush()
            if self._dirty is None and self._breaker().allow():
                try:
                    loaded = store_ops(self.store).load(self.id)
                except Exception as exc:
                    self._breaker().failure(exc)
                else:
                    self._breaker().success()
                    self._adopt(loaded)
            view = self._view()
            return self._with_pending(view) if view is not None else SessionState(session_id=self.id)

    @property
    def state(self) -> SessionState:
        """A snapshot of the session's durable state (as stored; JSON-serializable via ``to_json``)."""
        return self._read()

    def _pins(self, state: SessionState) -> dict[str, str]:
        pins: dict[str, str] = {}
        for slug, key in state.pins.items():
            text = self._blobs.get(key)
            if text is None:
                text = self.store.get_blob(self.id, key)
                if text is None:
                    raise RefPoolError(f"pinned document {slug!r} is missing from the session store")
                self._blobs[key] = text
            pins[slug] = text
        return pins

    def _cached_pins(self, state: SessionState) -> dict[str, str]:
        """The pinned texts of ``state`` from this process's blob cache (filled by the plan)."""
        pins: dict[str, str] = {}
        for slug, key in state.pins.items():
            text = self._blobs.get(key)
            if text is None:
                raise RefPoolError(f"pinned document {slug!r} is missing from the session store")
            pins[slug] = text
        return pins

    # -- the request path (called by the patch layer) ---------------------------------------------

    def _hooks_plan(self, strict: bool | None) -> Generator[_StoreOp, Any, SessionHooks]:
        def step(state: SessionState) -> tuple[None, SessionHooks]:
            return None, StateHooks(state, self._cached_pins(state), state.volatile, own=dict(self._own))

        return self._plan(step, strict, readonly=True)

    def hooks(self, *, strict: bool | None = None) -> SessionHooks:
        """The session's current pipeline hooks (for calls that are not turns, e.g. token counts).

        Reads the store only when this process holds nothing of the session yet. Never raises
        unless ``strict``: if the state cannot be read, the stateless hooks are returned (counted).
        """
        try:
            with self._lock:
                return self._run(self._hooks_plan(strict))
        except TelosStageError:
            if strict:
                raise
            return SessionHooks()
        except Exception as exc:
            report_failure(TelosStageError("session", exc), strict=strict)
            return SessionHooks()

    async def ahooks(self, *, strict: bool | None = None) -> SessionHooks:
        """``hooks`` for async clients."""
        try:
            return await self._arun(self._hooks_plan(strict))
        except TelosStageError:
            if strict:
                raise
            return SessionHooks()
        except Exception as exc:
            report_failure(TelosStageError("session", exc), strict=strict)
            return SessionHooks()

    # -- fleet learning: the hook (the logic is sessions/fleet.py) ----------------------------------

    def _fleet(self) -> bool:
        """Whether this session takes part in fleet learning, and has not asked for facts yet: the
        first request this process prepares for it, when the conversation has made no request."""
        on = self.fleet_learning if self.fleet_learning is not None else current_config().fleet_learning
        fresh = self._parsed is None or self._parsed[2].requests == 0
        return on and self.learn_volatility and fresh and not self._fleet_asked

    def _fleet_on(self) -> bool:
        on = self.fleet_learning if self.fleet_learning is not None else current_config().fleet_learning
        return on and self.learn_volatility

    # -- end of the fleet learning hook ------------------------------------------------------------

    def _turn_step(
        self,
        api: Api,
        body: Mapping[str, Any],
        options: PrepareOptions,
        facts: Sequence[fleet.Fact] = (),
    ) -> Callable[[SessionState], tuple[SessionState, TurnResult]]:
        now = self.clock()

        def step(state: SessionState) -> tuple[SessionState, TurnResult]:
            result = run_turn(
                state,
                api,
                body,
                options,
                pins=self._cached_pins(state),
                now=now,
                learn_volatility=self.learn_volatility,
                diagnostics=self.diagnostics,
                memo=self._memo,
                ledger=self._ledger,
                own=dict(self._own),
                own_history_only=self.implicit and not tells_users_apart(api, body, options.hints.isolation),
                fleet=facts,
            )
            return result.state, result

        return step

    def prepare_request(
        self, api: Api, body: Mapping[str, Any], options: PrepareOptions, *, strict: bool | None = None
    ) -> tuple[int, Prepared]:
        """Prepare one request of this session; returns ``(request index, prepared)``.

        One compare-and-set on the store (none while its circuit breaker is open: the turn then runs
        on this process's state). Raises ``TelosStageError`` on any failure of telos (the patch
        layer then fails open or, with ``strict``, raises it); a store failure raises only if
        ``strict``.
        """
        with self._lock:
            facts: tuple[fleet.Fact, ...] = ()
            if self._fleet():  # fleet learning (sessions/fleet.py)
                self._fleet_asked = True
                facts = fleet_io.facts_for(self.store, api, body, options.hints)
            plan = self._plan(self._turn_step(api, body, options, facts), strict)
            try:
                result = self._run(plan)
            except TelosStageError:
                raise
            except Exception as exc:
                raise TelosStageError("session", exc) from exc
            self._after_turn(api, body, options, result)
        if result.facts and self._fleet_on():  # fleet learning: publish
            fleet_io.publish_learned(self.store, api, body, options.hints, result.facts)
        return self._report_turn(result)

    async def prepare_request_async(
        self, api: Api, body: Mapping[str, Any], options: PrepareOptions, *, strict: bool | None = None
    ) -> tuple[int, Prepared]:
        """``prepare_request`` for async clients: the same turn, with the store's async I/O."""
        facts: tuple[fleet.Fact, ...] = ()
        if self._fleet():  # fleet learning (sessions/fleet.py)
            self._fleet_asked = True
            facts = await fleet_io.afacts_for(self.store, api, body, options.hints)
        plan = self._plan(self._turn_step(api, body, options, facts), strict)
        try:
            result = await self._arun(plan)
        except TelosStageError:
            raise
        except Exception as exc:
            raise TelosStageError("session", exc) from exc
        with self._lock:
            self._after_turn(api, body, options, result)
        if result.facts and self._fleet_on():  # fleet learning: publish
            await fleet_io.apublish_learned(self.store, api, body, options.hints, result.facts)
        return self._report_turn(result)

    def _after_turn(
        self, api: Api, body: Mapping[str, Any], options: PrepareOptions, result: TurnResult
    ) -> None:
        self._last_request = (api, dict(body), options)
        self._last_prepared = result.prepared
        self._ledger.remember(result.wire)
        if result.prepared.untouched is None:
            self._remember_references(result.prepared.ir.system)
        self._remember(
            RequestRecord(
                result.index,
                api,
                options.engine,
                "telos",
                Explained.of(result.prepared),
                result.cache_break,
                result.learned,
                adopted=result.adopted,
            )
        )

    def _remember_references(self, system: tuple[TelosBlock, ...]) -> None:
        """Keep the stub and entry texts just emitted (the latest ``_OWN_TEXTS`` per slug, for at
        most ``_OWN_SLUGS`` slugs): they are what proves a reference is telos' own later."""
        for slug, texts in emitted_references(system).items():
            kept = self._own.pop(slug, ())
            self._own[slug] = (*texts, *(text for text in kept if text not in texts))[:_OWN_TEXTS]
        while len(self._own) > _OWN_SLUGS:
            del self._own[next(iter(self._own))]

    def _report_turn(self, result: TurnResult) -> tuple[int, Prepared]:
        if result.learned is not None:
            # DEBUG: the pattern is anchored on text of the caller's system prompt.
            logger.debug(
                "telos_wrap: session %s learned a volatile system span at request %d (pattern %r)",
                self.id,
                result.index,
                result.learned.pattern,
            )
        if result.cache_break is not None:
            self._report_break(result.cache_break)
            if result.cache_break.reason == "telos_rewrote":
                note_telos_rewrote(result.cache_break)
                strict = self.strict if self.strict is not None else current_config().strict
                if strict:
                    raise TelosStageError(
                        "wire.i2", TelosInvariantError(result.cache_break.detail, segment="messages")
                    )
        return result.index, result.prepared

    def _report_break(self, brk: CacheBreak) -> None:
        logger.log(
            logging.ERROR if brk.reason == "telos_rewrote" else logging.WARNING,
            "telos_wrap: cache break in session %s at request %d: %s at %s (~%d tokens at risk): %s",
            self.id,
            brk.request,
            brk.reason,
            brk.where,
            brk.tokens_at_risk,
            brk.detail,
        )
        if self.on_cache_break is not None:
            try:
                self.on_cache_break(brk)
            except Exception:
                logger.exception("telos_wrap: on_cache_break callback of session %s raised", self.id)

    def _passthrough_step(
        self, engine: str, body: Mapping[str, Any]
    ) -> Callable[[SessionState], tuple[SessionState, int]]:
        refresh = body.get("max_tokens") == 0
        now = self.clock()

        def step(state: SessionState) -> tuple[SessionState, int]:
            by_engine = dict(state.by_engine)
            by_engine[engine] = by_engine.get(engine, 0) + 1
            new = replace(state, requests=state.requests + 1, by_engine=by_engine)
            if refresh:
                last = None if state.last is None else replace(state.last, at=now)
                new = replace(
                    new,
                    refreshes=state.refreshes + 1,
                    refreshes_since_request=state.refreshes_since_request + 1,
                    last=last,
                )
            else:
                new = replace(new, refreshes_since_request=0)
            return new, state.requests

        return step

    def note_passthrough(self, api: Api, engine: str, body: Mapping[str, Any]) -> int:
        """Record a request telos sent unchanged (disabled, failed open, or a ``max_tokens=0`` refresh).

        Returns its index, or -1 if it could not be recorded (never raises).
        """
        try:
            with self._lock:
                index = self._run(self._plan(self._passthrough_step(engine, body), strict=False))
                self._remember_passthrough(api, engine, body, index)
            return index
        except Exception:
            # Only reached after the same call already failed open (and was counted and warned
            # about): recording the pass-through is bookkeeping, not a second failure.
            logger.debug(
                "telos_wrap: session %s could not record a pass-through request", self.id, exc_info=True
            )
            return -1

    async def note_passthrough_async(self, api: Api, engine: str, body: Mapping[str, Any]) -> int:
        """``note_passthrough`` for async clients."""
        try:
            index = await self._arun(self._plan(self._passthrough_step(engine, body), strict=False))
            with self._lock:
                self._remember_passthrough(api, engine, body, index)
            return index
        except Exception:
            logger.debug(
                "telos_wrap: session %s could not record a pass-through request", self.id, exc_info=True
            )
            return -1

    def _remember_passthrough(self, api: Api, engine: str, body: Mapping[str, Any], index: int) -> None:
        refresh = body.get("max_tokens") == 0
        self._remember(RequestRecord(index, api, engine, "refresh" if refresh else "passthrough"))

    def record_usage(self, index: int, report: UsageReport | None, *, response_id: str | None = None) -> None:
        """Add a response's usage to the stats (exactly once per request index). No I/O.

        The usage is folded into the session's next write from this process (its next request,
        ``flush()``, a read of ``stats`` / ``state`` here, or interpreter exit): one durable write
        per call instead of two (``docs/sessions.md``).
        """
        if index < 0:
            return
        with self._lock:
            if index in self._usage_seen:
                return
            self._usage_seen[index] = None
            while len(self._usage_seen) > 4 * self._history_limit:
                self._usage_seen.popitem(last=False)
            self._pending.append((index, report, response_id))
            _hold(self)
            record = self._records.get(index)
            if record is not None:
                self._records[index] = replace(record, usage=report)

    def _remember(self, record: RequestRecord) -> None:
        self._records[record.index] = record
        while len(self._records) > self._history_limit:
            self._records.popitem(last=False)

    # -- bridge primitives --------------------------------------------------------------------------

    def pin(self, slug: str, payload: str | Mapping[str, Any]) -> None:
        """Register a large document in the session's ref-pool under a frozen ``slug``.

        ``payload`` is the text (or a ``{"type": "text", "text": ...}`` block). From the next request
        on it is rendered in the system segment's ref-pool (after the PIN blocks, slug order), where
        ``fold(slugs=[slug], ...)`` can later shrink it without moving a byte before it. Raises
        ``RefPoolError`` if the slug is already registered (slugs are frozen) and ``FoldError`` for
        an invalid or reserved slug.
        """
        text = payload.get("text") if isinstance(payload, Mapping) else payload
        if not isinstance(text, str) or not text:
            raise FoldError("pin() needs a non-empty text or a text block")
        validate_slug(slug)
        key = _blob_key(text)
        with self._lock:
            self.store.put_blob(self.id, key, text)
            self._blobs[key] = text

            def step(state: SessionState) -> tuple[SessionState, None]:
                if slug in state.pins:
                    raise RefPoolError(f"ref-pool slug {slug!r} is already pinned; slugs are frozen")
                return replace(state, pins={**state.pins, slug: key}), None

            self._update(step)

    def fold(
        self,
        *,
        summary: str,
        slugs: Iterable[str] | None = None,
        message_range: tuple[int, int] | None = None,
    ) -> None:
        """A durable compaction, recorded in the session before the next request uses it.

        * ``fold(slugs=[...], summary=...)``: each ref-pool entry's content becomes ``summary``; its
          slug and ``[ref:slug]`` bytes stay, so everything before the entry's content stays cached.
        * ``fold(message_range=(start, end), summary=...)``: application messages ``start..end-1``
          (indices in the list the application sends) are replaced by one summary message on every
          later request, for as long as the application keeps sending them unchanged.

        The invariants are re-checked right away on the last request with the fold applied (when
        this process has one) and again by the bridge on every request; there is no flag to skip
        them. Raises ``FoldError`` / ``RefPoolError`` (nothing recorded) if the fold is invalid.
        """
        if not summary:
            raise FoldError("fold() needs a non-empty summary")
        if (slugs is None) == (message_range is None):
            raise FoldError("fold() takes exactly one of slugs=... or message_range=(start, end)")
        slug_list = [slugs] if isinstance(slugs, str) else list(slugs or ())
        with self._lock:

            def step(state: SessionState) -> tuple[SessionState, None]:
                at = state.requests
                if message_range is not None:
                    start, end = message_range
                    digest = validate_range(state.app, start, end, state.range_folds)
                    folds = (*state.range_folds, RangeFold(start, end, digest, summary, at))
                    new = replace(state, range_folds=folds)
                else:
                    known = set(state.pins) | set(state.app.slugs if state.app else ())
                    unknown = [slug for slug in slug_list if slug not in known]
                    if not slug_list or unknown:
                        raise RefPoolError(
                            f"cannot fold {unknown or slug_list}: not in the ref-pool "
                            f"(known: {sorted(known)})"
                        )
                    kept = tuple(f for f in state.slug_folds if f.slug not in slug_list)
                    new = replace(state, slug_folds=(*kept, *(SlugFold(s, summary, at) for s in slug_list)))
                self._recheck(new)
                return new, None

            self._update(step)

    def _recheck(self, state: SessionState) -> None:
        """Dry-run the last request of this process on ``state``: invariants must still hold."""
        if self._last_request is None:
            return
        api, body, options = self._last_request
        try:
            run_turn(state, api, body, options, pins=self._pins(state), now=self.clock(), commit=False)
        except TelosStageError as exc:
            raise FoldError(f"the fold would break the prompt's invariants: {exc}") from exc

    def mark(
        self,
        body: Mapping[str, Any] | None = None,
        *,
        api: Api | None = None,
        options: PrepareOptions | None = None,
    ) -> EmitPlan:
        """Dry run: the ``EmitPlan`` (breakpoints, extras, notes) the next request would get.

        Uses ``body`` if given, else the last request this process prepared for the session (with
        folds and pins recorded since). Records nothing.
        """
        with self._lock:
            if body is None:
                if self._last_request is None:
                    raise TelosError(f"session {self.id!r}: mark() needs a body (no request sent yet)")
                last_api, last_body, last_options = self._last_request
                api, body, options = api or last_api, last_body, options or last_options
            if options is None:
                config = current_config()
                options = PrepareOptions(
                    engine=self.hints.engine or "anthropic",
                    hints=self.hints,
                    session_id=self.id,
                    bridge=BridgeOptions(keep_past_drop=config.keep_past_drop),
                    refpool_threshold=config.refpool_threshold,
                    only_what_pays=config.only_what_pays,
                )
            state = self.state
            pins = self._pins(state)
            result = run_turn(
                state, api or "anthropic", body, options, pins=pins, now=self.clock(), commit=False
            )
        return result.prepared.plan

    def refresh(self, *, margin: float = 60.0) -> RefreshDecision:
        """Should the session's warm prefix be kept alive now? (R8 gating; no I/O.)

        Returns a ``RefreshDecision``; when ``send`` is true its ``body`` is the Anthropic pre-warm
        (the last request, ``max_tokens: 0``). ``telos_wrap.sessions.refresh_io.send_refresh`` sends it.
        """
        with self._lock:
            last = self._last_prepared.body if self._last_prepared is not None else None
            return decide_refresh(self.state, last, self.clock(), margin=margin)

    def forget_volatility(self) -> None:
        """Drop every learned volatile span (they are learned again if they keep changing)."""
        with self._lock:
            self._update(lambda state: (replace(state, volatile=()), None))

    # -- observability --------------------------------------------------------------------------------

    @property
    def stats(self) -> SessionStats:
        """Exact counters of the session across every worker (read from the store)."""
        return SessionStats.of(self.state, self.prices)

    @property
    def cache_breaks(self) -> tuple[CacheBreak, ...]:
        """The most recent cache breaks (all are counted in ``stats.cache_breaks``)."""
        return self.state.recent_breaks

    @property
    def volatile_spans(self) -> tuple[VolatileSpan, ...]:
        """The system-prompt spans learned as volatile."""
        return self.state.volatile

    def explain(self, n: int = -1) -> str:
        """What was sent for request ``n`` of this session (default: the latest here) and why.

        Lists the breakpoints and notes of the plan, every transformation that changed what the
        model sees (DROP moved or pruned, ref stubs, pins, folds, summaries, learned volatile
        spans), the cache break it caused, and its usage. Requests made by other workers are only
        known by their index and cache break.
        """
        with self._lock:
            known = sorted(self._records)
            index = n if n >= 0 else (known[-1] + 1 + n if known else n)
            record = self._records.get(index)
        state = self.state
        brk = next((b for b in state.recent_breaks if b.request == index), None)
        if record is None:
            lines = [f"session {self.id}: request {n} was not prepared in this process (or is too old)"]
            if brk is not None:
                lines.append(_break_line(brk))
            return "\n".join(lines)
        lines = [f"session {self.id} request {record.index} ({record.api}, engine {record.engine})"]
        explained = record.explained
        if explained is None:
            lines.append(
                "  pre-warm refresh (max_tokens=0), sent as built"
                if record.kind == "refresh"
                else "  sent unchanged (telos disabled for it, or it failed open)"
            )
        elif explained.untouched is not None:
            lines.append(f"  left untouched (sent as the SDK built it): {explained.untouched}")
        else:
            for name, segment, message, block, ttl in explained.breakpoints:
                where = segment if message is None else f"messages[{message}]"
                lines.append(f"  breakpoint {name:7} at {where}[{block}] ttl={ttl}")
            lines.extend(f"  note: {note}" for note in explained.notes)
            lines.extend(
                f"  {kind}: {where} ({chars} chars) — {detail}"
                for kind, where, detail, chars in explained.records
            )
        if record.learned is not None:
            lines.append(f"  learned volatile span: {record.learned.pattern!r}")
        lines.extend(
            f"  adopted from the fleet (learned by another conversation of this template at its "
            f"request {span.learned_at}, verified here): {span.pattern!r}"
            for span in record.adopted
        )
        if record.cache_break is not None or brk is not None:
            lines.append(_break_line(record.cache_break or brk))  # type: ignore[arg-type]
        if record.usage is not None:
            u = record.usage
            lines.append(
                f"  usage: uncached={u.raw_input} read={u.cache_read} write={u.cache_write} output={u.output}"
            )
            if u.cache_miss_reason:
                lines.append(f"  server cache_miss_reason: {canonical_json(dict(u.cache_miss_reason))}")
        return "\n".join(lines)


def _break_line(brk: CacheBreak) -> str:
    return f"  CACHE BREAK {brk.reason} at {brk.where} (~{brk.tokens_at_risk} tokens): {brk.detail}"


# -- creating and finding sessions -------------------------------------------------------------------

#: Live sessions by (store, id): the store is part of a session's name (two tenants may both use
#: ``support-1``, each on its own store). ``_scope``: the identity of the store given, ``0`` for a
#: session on the process default store (whichever it is at the time of use). Weak values: a
#: session the application dropped is not kept alive by this table.
_live: weakref.WeakValueDictionary[tuple[int, str], Session] = weakref.WeakValueDictionary()


def _scope(store: SessionStore | None) -> int:
    return 0 if store is None else id(store)


#: Sessions holding usage or outage state the store does not have yet, oldest first. Strong
#: references: a ``Session`` the application dropped still gets its last usage written (on a read
#: of that session id here, when more than ``_HOLD_LIMIT`` wait, or at interpreter exit).
_holding: OrderedDict[int, Session] = OrderedDict()
_HOLD_LIMIT = 10_000


def _hold(held: Session) -> None:
    with _registry_lock:
        _holding[id(held)] = held
        _holding.move_to_end(id(held))
        oldest = next(iter(_holding.values())) if len(_holding) > _HOLD_LIMIT else None
    if oldest is not None:
        oldest.flush()


def _release(held: Session) -> None:
    with _registry_lock:
        _holding.pop(id(held), None)


def _held() -> list[Session]:
    with _registry_lock:
        return list(_holding.values())


@atexit.register
def _flush_at_exit() -> None:
    """Write every session's pending usage before the interpreter exits (best effort, bounded by
    the stores' timeouts and skipped for stores whose circuit breaker is open)."""
    for held in _held():
        held.flush()


def session(
    session_id: str | None = None,
    *,
    engine: str | None = None,
    store: SessionStore | None = None,
    ttl: str | None = None,
    strict: bool | None = None,
    hints: TelosHints | Mapping[str, Any] | None = None,
    on_cache_break: CacheBreakCallback | None = None,
    learn_volatility: bool = True,
    diagnostics: bool = False,
    prices: Mapping[str, PriceMultipliers] | None = None,
    clock: Callable[[], float] | None = None,
    fleet_learning: bool | None = None,
) -> Session:
    """Create a session; use it as ``with telos_wrap.session(...):`` or ``async with``.

    Args:
        session_id: a stable id (state is shared by every ``Session`` with this id on one store);
            generated when omitted.
        engine: engine adapter for the session's calls (``TelosHints.engine``).
        store: where the state lives (default: the process-wide ``MemoryStore``; pass a
            ``RedisStore`` to share a session between workers).
        ttl: cache lifetime of the stable prefix (``"5m"``/``"1h"``, ``"30m"``/``"12h"``).
        strict: raise instead of failing open, for this session's calls.
        hints: default ``TelosHints`` (or a dict, validated) for every call in the session.
        on_cache_break: called with each ``CacheBreak`` (after the warning is logged).
        learn_volatility: learn the live values and changing lines of the system prompt as DROP
            (on by default; docs/sessions.md, "Learned volatility").
        diagnostics: on Anthropic, send ``diagnostics.previous_message_id`` so the server's
            ``cache_miss_reason`` lands in each ``UsageReport``.
        prices: price multipliers per engine over ``DEFAULT_PRICES`` (for ``stats.cost``).
        clock: seconds clock for TTL reasoning (default ``time.time``).
        fleet_learning: start from what earlier conversations of the same system-prompt template
            learned, and publish what this one learns (docs/sessions.md, "Fleet learning");
            ``None``: ``patch(fleet_learning=...)``, on by default.

    Raises ``TelosHintError`` saying what is valid for an invalid argument (a session id that is
    not a string, an unknown engine or ttl, ...) or hints (listing the valid keys).
    """
    check_session_arguments(
        session_id,
        engine=engine,
        ttl=ttl,
        strict=strict,
        learn_volatility=learn_volatility,
        diagnostics=diagnostics,
        on_cache_break=on_cache_break,
        clock=clock,
        prices=prices,
        fleet_learning=fleet_learning,
    )
    parsed = parse_hints(hints)
    if engine is not None or ttl is not None:
        data = parsed.model_dump(exclude_unset=True)
        data.update({k: v for k, v in (("engine", engine), ("ttl", ttl)) if v is not None})
        parsed = parse_hints(data)
    return Session(
        session_id,
        store=store,
        hints=parsed,
        strict=strict,
        on_cache_break=on_cache_break,
        learn_volatility=learn_volatility,
        diagnostics=diagnostics,
        prices=prices,
        clock=clock,
        fleet_learning=fleet_learning,
    )


def current_session() -> Session | None:
    """The innermost session active in this context, if any."""
    stack = _stack.get()
    return stack[-1] if stack else None


_implicit: OrderedDict[str, Session] = OrderedDict()
_named: OrderedDict[tuple[int, str], Session] = OrderedDict()
_registry_lock = threading.Lock()


def _lru_get(
    table: OrderedDict[Any, Session],
    key: Any,
    make: Callable[[], Session],
    valid: Callable[[Session], bool] | None = None,
) -> Session:
    """The session under ``key``, made by ``make`` if absent (or not ``valid`` any more)."""
    with _registry_lock:
        found = table.get(key)
        if found is None or (valid is not None and not valid(found)):
            found = table[key] = make()
            while len(table) > _IMPLICIT_LIMIT:
                table.popitem(last=False)
        else:
            table.move_to_end(key)
        return found


def implicit_session(
    api: Api, body: Mapping[str, Any], *, drop_patterns: Sequence[str] = (), tenant: str = ""
) -> Session:
    """The implicit session of a request made outside any ``session()``: ``implicit-<key>``.

    The key (``sessions.identity.conversation_key``) is what stays fixed across the turns of one
    conversation — API, model, tool names, the caller's own user/conversation fields, and the
    conversation's opening message with its envelopes stripped, and ``tenant`` (a digest of the
    isolation hint and the client's credentials and base URL) — never the system prompt,
    instructions or envelopes a harness rebuilds every turn (docs/sessions.md). Bounded LRU.
    """
    digest = conversation_key(api, body, drop_patterns, tenant)
    return _lru_get(_implicit, digest, lambda: Session(f"implicit-{digest}", implicit=True))


def named_session(session_id: str, *, store: SessionStore | None = None) -> Session:
    """The session a ``telos_hint={"session": id}`` or ``X-Telos-Session`` names, within ``store``.

    ``store``: the caller's own store (the patch layer passes the store of the session the call was
    built in, else the default); ``None`` means the process default store. Returns the live session
    with that id *on that store*, or a new one on it, whose state is whatever the store holds for
    the id. A session with the same id on another store is never returned (docs/security.md).
    """
    store = default_store() if store is None else store
    on_default = store is default_store()
    for key in ((id(store), session_id), *(((0, session_id),) if on_default else ())):
        live = _live.get(key)
        if live is not None and live.store is store:
            return live
    if on_default:
        return _lru_get(_named, (0, session_id), lambda: Session(session_id))
    # Keyed by the store's identity; an entry is valid only while it is that very store (an id may
    # be reused once a store is gone, but an entry here keeps its store alive through its session).
    return _lru_get(
        _named,
        (id(store), session_id),
        lambda: Session(session_id, store=store),
        valid=lambda found: found.store is store,
    )
