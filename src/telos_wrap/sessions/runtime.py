"""``SessionRuntime``: what a session does on the request path, and the state it shares with the handle.

A ``Session`` (``core.py``) is the user's handle on one conversation; its runtime is the object the
patch layer talks to (``core.runtime_of(session)``): it prepares each request of the session
(``prepare_request`` / ``prepare_request_async``: one compare-and-set on the session's state, see
``stores/store.py``), records what went out unchanged (``note_passthrough*``) and the usage that
came back (``record_usage``), gives the hooks of calls that are not turns (``hooks`` / ``ahooks``),
binds the session to its tenant (``bind_tenant``, ``serves``) and remembers what ``explain`` and
the telemetry read (``request_record``). The handle's primitives run on the same state through a
few methods of its own (``update``, ``read`` / ``read_known``, ``flush`` / ``aflush``, and the
section *for the handle*: ``pin``, ``recheck``, ``dry_run``, ``last_body``, ``request_indices``,
``erase`` / ``aerase``): one lock, one last-known state, one place that writes.

Each of its sequences that does store I/O is written once, as a plan (a generator method:
``_prepare_plan``, ``_hooks_plan``, ``_passthrough_plan``, ``_erase_plan``), and its sync and async
entry points are thin shells that choose the driver (``_drive``, ``_adrive``): the same store
operations in the same order, the same results and failures, and the same critical sections under
the lock on both paths (tests/sessions/test_prepare_plans.py).

The rooms it composes (``sessions/__init__.py`` lists them all): ``sync/plans.py`` (the sans-IO
store plans and what this process holds of the state), ``sync/drivers.py`` (their sync and async
runners against a store), ``turns/turn.py`` (one request, pure), ``turns/steps.py`` (the pure state
transitions of the primitives), ``learning/fleet_io.py`` (fleet learning's store I/O) and ``live.py``
(the process's tables of sessions: held, warm).

Why one module: every method here runs under the one lock on the one state, and their order is the
invariant (read the last-known state, plan, write once, remember the record): prepare, note, record
and the handle's primitives change together when that state changes. The pure parts are already
outside (the turn, the steps, the plans); what is left is their sequencing, which split across files
would be read in none.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeGuard, TypeVar

from telos_wrap.bridge import BridgeOptions
from telos_wrap.config import current_config
from telos_wrap.engines.base import EmitPlan
from telos_wrap.errors import RefPoolError, TelosError, TelosInvariantError, TelosStageError
from telos_wrap.failopen import report_failure
from telos_wrap.history import HistoryMemo
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api, TelosBlock, UsageReport
from telos_wrap.ir.refpool import emitted_references
from telos_wrap.ir.shared import share
from telos_wrap.pipeline import Prepared, PrepareOptions, SessionHooks
from telos_wrap.sessions import live, tenancy
from telos_wrap.sessions.durable.records import CacheBreak
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.hashed import scrub, session_hash
from telos_wrap.sessions.identity import tells_users_apart
from telos_wrap.sessions.learning import fleet, fleet_io
from telos_wrap.sessions.learning.digests import SHARED_KEY
from telos_wrap.sessions.learning.lengths import Lengths
from telos_wrap.sessions.logs import note
from telos_wrap.sessions.stores import budget
from telos_wrap.sessions.stores.breaker import StoreBreaker, breaker_of
from telos_wrap.sessions.stores.from_url import check_store
from telos_wrap.sessions.stores.store import AsyncSessionStore, SessionStore, default_store, store_ops
from telos_wrap.sessions.sync import drivers
from telos_wrap.sessions.sync.known import Known, SessionLocks, known_for, locks_for
from telos_wrap.sessions.sync.plans import Deferred, StateSync, StoreOp, unchanged
from telos_wrap.sessions.turns.folds import FoldError
from telos_wrap.sessions.turns.steps import passthrough_step, pin_step
from telos_wrap.sessions.turns.turn import StateHooks, TurnResult, run_turn
from telos_wrap.sessions.turns.wire_i2 import WireLedger, note_telos_rewrote
from telos_wrap.sessions.views.explain import Explained, RequestRecord
from telos_wrap.sessions.views.stats import PriceMultipliers

__all__ = ["CacheBreakCallback", "SessionRuntime"]

logger = logging.getLogger("telos_wrap.sessions")

#: How many emitted texts per slug, and how many slugs, a session remembers as its own references.
_OWN_TEXTS = 4
_OWN_SLUGS = 256
#: Bytes a session object costs besides its texts (locks, tables, records), for the warm table.
_SESSION_BYTES = 4096
#: Explain records (and usage indices) a cooled session keeps.
_COOL_RECORDS = 4
T = TypeVar("T")
CacheBreakCallback = Callable[[CacheBreak], None]


def _blob_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _awaits(store: SessionStore) -> TypeGuard[AsyncSessionStore]:
    """Whether async code awaits ``store``'s async twins (else its sync methods: nothing waits)."""
    return isinstance(store, AsyncSessionStore) and not store_ops(store).inline


# -- the request path's plans: what they yield --------------------------------------------------------
#
# Each sequence of the request path that does store I/O (preparing a request, the hooks of a call
# that is not a turn, recording a pass-through, erasure) is written once, as a plan: a generator
# method of ``SessionRuntime`` that yields the I/O it needs (below), is sent each answer and has each
# failure thrown into it (so its own ``try`` decides, as straight-line code would). Its sync and
# async entry points are thin shells that choose the driver: ``SessionRuntime._drive`` (the store's
# sync methods, under the session's lock) or ``_adrive`` (their async twins, awaited; the lock is
# taken around each stretch of the plan between two yields, never across an await). On both, the
# plan's code runs under the session's lock until it yields ``UNLOCKED``; what follows (publishing,
# reporting) runs outside it.


@dataclass(frozen=True, slots=True)
class _StateIO:
    """Run a store plan of the session's state (``SessionRuntime._plan``); answered with its result."""

    plan: Generator[StoreOp, Any, Any]


@dataclass(frozen=True, slots=True)
class _FleetIO:
    """Run a plan of fleet learning's store I/O (``fleet_io.Plan``) on ``store``; answered with its result."""

    store: SessionStore
    plan: fleet_io.Plan[Any]


@dataclass(frozen=True, slots=True)
class _PutBlob:
    """Write ``text`` as blob ``name`` of entry ``key`` of ``store``; answered with ``None``."""

    store: SessionStore
    key: str
    name: str
    text: str


@dataclass(frozen=True, slots=True)
class _Carry:
    """Run a store plan of the state as it is, without settling first (``_settle_plan``'s own)."""

    plan: Generator[StoreOp, Any, Any]


@dataclass(frozen=True, slots=True)
class _Delete:
    """Delete entry ``key`` of ``store`` (erasure); answered with ``None``."""

    store: SessionStore
    key: str


class _Unlocked:
    """What a plan yields to run the rest of it outside the session's lock."""

    __slots__ = ()


UNLOCKED = _Unlocked()
_Path = Generator[_StateIO | _FleetIO | _PutBlob | _Carry | _Delete | _Unlocked, Any, T]


class SessionRuntime:
    """The runtime of one session: made by its ``Session`` (same options), reached by the patch
    layer through ``core.runtime_of``. Thread-safe (``lock``, shared by the id's objects).

    Attributes the per-call path reads (plain attributes, set once): ``id``, ``scope``, ``hints``,
    ``strict``, ``implicit``, ``on_cache_break``, ``learn_volatility``, ``diagnostics``, ``prices``,
    ``clock``, ``fleet_learning``; ``store_key`` and ``bound`` change once, at the binding
    (``bind_tenant``). Not a user API: the user's is ``Session`` (docs/sessions.md).
    """

    def __init__(
        self,
        session_id: str | None = None,
        *,
        store: SessionStore | str | None = None,
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
        keep_requests: bool = True,
        scope: str = tenancy.TENANT,
    ) -> None:
        self.id = session_id or f"s-{uuid.uuid4().hex[:16]}"
        #: ``"tenant"``: the state is kept within the namespace of the tenant of the session's first
        #: call (``tenancy``); ``"global"``: under the id alone, shared by every tenant naming it.
        self.scope = tenancy.check_scope(scope)
        scoped = self.scope == tenancy.TENANT and not implicit
        #: The tenant's namespace the session is bound to (``None``: not yet, see ``bind_tenant``).
        self._space: str | None = None if scoped else tenancy.SHARED
        #: The id the session's state is stored under: ``<id>@t:<namespace>`` once bound to a tenant
        #: (``scope="tenant"``), else the id itself (``tenancy.store_key``; docs/sessions.md,
        #: "Tenants"). Read it; ``bind_tenant`` sets it. A plain attribute: the per-call path reads it.
        self.store_key = self.id
        #: Whether the session knows where its state lives (a tenant-scoped one: after its first call
        #: or ``bind``; a global or implicit one: always). Read it; ``bind_tenant`` sets it.
        self.bound = not scoped
        #: What was recorded before the binding (pins, slug folds), carried over at it.
        self._local: SessionState | None = None
        #: Fleet learning for this session (``None``: ``patch(fleet_learning=...)``); see ``_fleet``.
        self.fleet_learning = fleet_learning
        self._fleet_asked = False
        #: What the fleet said of this conversation's application: its conversation lengths (the
        #: counts as a plain tuple, which the collector stops tracking), and where to count this
        #: conversation's requests (``sessions/learning/lengths.py``).
        self._lengths: tuple[int, ...] = ()
        self._fleet_where: tuple[str, str] | None = None
        #: The digest key of this session's tenant (``fleet_io.digest_key``), set by each request.
        self._key = SHARED_KEY
        #: A URL names a store (``stores/from_url.py``); anything else that is not a store is refused here.
        self._store = check_store(store)
        self.hints = hints or TelosHints()
        self.strict = strict
        self.implicit = implicit
        self.on_cache_break = on_cache_break
        self.learn_volatility = learn_volatility
        self.diagnostics = diagnostics
        self.prices = dict(prices or {})
        self.clock: Callable[[], float] = clock or time.time
        #: What the process knows of the session's stored state (``sync/known.py``): its state sync,
        #: shared by every object whose state lives at ``store_key`` of this store, and the locks its
        #: plans run under, shared by the id. A session not bound to a tenant yet works on an entry of
        #: its own until its binding; an implicit session is one object per conversation already,
        #: kept by the registry: its own for good.
        locks = SessionLocks() if implicit else locks_for(self._store, self.id)
        self._known: Known = (
            known_for(self._store, self.id, self.store_key, self.clock)
            if self.bound and not implicit
            else Known(self._store, self.id, self.store_key, self.clock, locks)
        )
        #: The session's plan lock (re-entrant; shared by every object of the id on the store): the
        #: handle holds it to read several things of one moment.
        self.lock = locks.lock
        self._alocks = locks.alocks
        self._records: OrderedDict[int, RequestRecord] = OrderedDict()
        self._fallbacks_here = 0  # requests of this session this process sent as built (fail open)
        #: Per request index, how many requests of that index this process made whose usage has not
        #: arrived yet: a second report of one response is ignored, and a request whose index comes
        #: round again (the store's count went back) gets its own usage, even while the earlier
        #: one's is still in flight.
        self._usage_due: OrderedDict[int, int] = OrderedDict()
        self._history_limit = history_limit
        #: Keep the last request (``mark()`` / ``fold()`` / ``refresh()`` use it): sessions the
        #: application holds; the registry's implicit and hint-named sessions keep none of its text.
        self._keep_requests = keep_requests
        self._last_request: tuple[Api, dict[str, Any], PrepareOptions] | None = None
        #: The latest request this process rewrote (its body is what a refresh re-sends).
        self._last_prepared: Prepared | None = None
        self._memo = HistoryMemo()
        self._ledger = WireLedger()
        #: The ref-pool stubs and entries this process emitted for the session (by slug, the latest
        #: few texts each): the only texts a later request's lift takes as references.
        self._own: dict[str, tuple[str, ...]] = {}

    @property
    def store(self) -> SessionStore:
        """The session's store: the one given, else the process default at the time of use."""
        return self._store if self._store is not None else default_store()

    @property
    def _sync(self) -> StateSync:
        """What this process holds of the stored state, and the plans that keep it in step."""
        return self._known.sync

    # -- the tenant (sessions/tenancy.py) ---------------------------------------------------------

    def serves(self, space: str | None) -> bool:
        """Whether a call of tenant namespace ``space`` that names this session by id may use it: a
        session bound to that tenant, a global one, or one not bound yet (the call binds it)."""
        return self._space is None or self.scope == tenancy.GLOBAL or self._space == (space or tenancy.SHARED)

    def bind_tenant(self, space: str) -> None:
        """Bind the session to tenant namespace ``space`` (``fleet.namespace`` of a call); no I/O.
        The first binding stays: later calls in the session use that tenant's entry (one object is
        one conversation). A global or implicit session is bound already."""
        if self._space is not None:
            return
        with self.lock:
            if self._space is None:
                self.store_key = tenancy.store_key(self.id, space)
                self._space = space
                self.bound = True
                # From now on the process's entry at the tenant's key (``sync/known.py``).
                before = self._known
                self._known = known_for(self._store, self.id, self.store_key, self.clock)
                self._known.adopt(before)

    def _settle_plan(self) -> _Path[None]:
        """Once bound: carry what was recorded before the binding onto the tenant's stored state (its
        pinned texts, then one plan). Binds a session used without any call to no tenant."""
        if self._space is None:
            self.bind_tenant(tenancy.SHARED)  # used directly, without a call: no tenant signal
        local, self._local = self._local, None
        if local is not None:
            try:
                store = self.store
                for key in set(local.pins.values()):
                    yield _PutBlob(store, self.store_key, key, self._sync.blobs[key])
                yield _Carry(self._plan(tenancy.carried(local), strict=True))
            except RefPoolError:
                raise  # a slug pinned with another text: dropped (slugs are frozen), said once
            except BaseException:
                self._local = local  # the store failed: tried again at the next call
                raise

    def _settle(self) -> None:
        """``_settle_plan`` with the store's sync methods (the caller holds ``self.lock``)."""
        self._drive(self._settle_plan())

    async def _asettle(self) -> None:
        """``_settle_plan`` for async code."""
        await self._adrive(self._settle_plan())

    def _local_state(self) -> SessionState:
        return self._local if self._local is not None else SessionState(session_id=self.id)

    # -- context manager --------------------------------------------------------------------------

    # -- durable state ------------------------------------------------------------------------------
    #
    # Every change of the session's state is planned by ``self._sync`` (``plans.StateSync``: pure,
    # it yields the store operations it needs) and run by ``drivers.run`` (sync: the store's methods)
    # or ``drivers.arun`` (async: their ``a``-twins, awaited). See ``sessions/sync/plans.py``.

    def _breaker(self) -> StoreBreaker:
        return breaker_of(self.store, self.store_key)

    def _plan(
        self,
        step: Callable[[SessionState], tuple[SessionState | None, T]],
        strict: bool | None,
        *,
        readonly: bool = False,
    ) -> Generator[StoreOp, Any, T]:
        """Run ``step`` on the newest state and make its result durable (``StateSync.plan``). A
        session used without a call binds to no tenant first: a plan runs on the bound entry."""
        if self._space is None:
            self.bind_tenant(tenancy.SHARED)
        return self._sync.plan(step, strict, readonly=readonly)

    def update(self, step: Callable[[SessionState], tuple[SessionState | None, T]]) -> T:
        """Apply a primitive's ``step`` durably (raises ``TelosStageError`` if the store is unavailable)."""
        with self.lock:
            if self._space is None:  # not bound yet: recorded here, carried over at the binding
                new, result = step(self._local_state())
                if new is not None:
                    self._local = new
                return result
            return self._run(self._plan(step, strict=True))

    def _run(self, plan: Generator[StoreOp, Any, T]) -> T:
        """Run a plan with the store's sync methods (the caller holds ``self.lock``)."""
        if self._space is None or self._local is not None:
            self._settle()
        return drivers.run(plan, self.store, self._breaker(), self.store_key)

    async def _arun(self, plan: Generator[StoreOp, Any, T]) -> T:
        """Run a plan with the store's async methods, one plan per session at a time."""
        if self._space is None or self._local is not None:
            await self._asettle()
        store = self.store
        key = self.store_key
        known = self._known
        known.ran_async()
        known.plans += 1  # a sync flush or read leaves the store alone meanwhile (``Known.plans``)
        try:
            return await drivers.arun(plan, store, breaker_of(store, key), key, self._alocks.get())
        finally:
            known.plans -= 1

    def _drive(self, path: _Path[T]) -> T:
        """Run a request-path plan with the sync drivers: under ``self.lock`` until it yields
        ``UNLOCKED``; each step's failure (any exception) is thrown back into the plan."""
        lock: Any = self.lock
        lock.acquire()
        try:
            value: Any = None
            error: BaseException | None = None
            while True:
                try:
                    op = path.send(value) if error is None else path.throw(error)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                finally:
                    value = error = None  # no cycle through this frame when the plan raises
                try:
                    if type(op) is _StateIO:
                        assert lock is not None  # a store plan of the state runs under the lock
                        value = self._run(op.plan)
                    elif type(op) is _FleetIO:
                        value = fleet_io.run_plan(op.plan, op.store)
                    elif type(op) is _PutBlob:
                        op.store.put_blob(op.key, op.name, op.text)
                    elif type(op) is _Carry:
                        value = drivers.run(op.plan, self.store, self._breaker(), self.store_key)
                    elif type(op) is _Delete:
                        op.store.delete(op.key)
                    elif lock is not None:  # UNLOCKED: the rest of the plan runs outside the lock
                        held, lock = lock, None
                        held.release()
                except BaseException as exc:
                    error = exc
        finally:
            if lock is not None:
                lock.release()

    async def _adrive(self, path: _Path[T]) -> T:
        """Run a request-path plan with the async drivers: each stretch of it between two yields
        under ``self.lock`` (never held across an await) until it yields ``UNLOCKED``; each step's
        failure (any exception, a cancellation too) is thrown back into the plan."""
        locked = True
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                if locked:
                    with self.lock:
                        op = path.send(value) if error is None else path.throw(error)
                else:
                    op = path.send(value) if error is None else path.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            finally:
                value = error = None  # no cycle through this frame when the plan raises
            try:
                if type(op) is _StateIO:
                    value = await self._arun(op.plan)
                elif type(op) is _FleetIO:
                    value = await fleet_io.arun_plan(op.plan, op.store)
                elif type(op) is _PutBlob:
                    store = op.store
                    if _awaits(store):
                        await store.aput_blob(op.key, op.name, op.text)
                    else:
                        store.put_blob(op.key, op.name, op.text)
                elif type(op) is _Carry:
                    store, key = self.store, self.store_key
                    breaker = breaker_of(store, key)
                    value = await drivers.arun(op.plan, store, breaker, key, self._alocks.get())
                elif type(op) is _Delete:
                    store = op.store
                    if _awaits(store):
                        await store.adelete(op.key)
                    else:
                        store.delete(op.key)
                else:  # UNLOCKED
                    locked = False
            except BaseException as exc:
                error = exc

    def flush(self) -> None:
        """Write what this process holds and the store does not yet (pending usage, outage state).

        Usage is folded into the session's next write (see ``docs/sessions.md``); ``flush`` writes
        it now. No store round trip when there is nothing to write. Never raises (fail open).
        """
        with self.lock:
            # An async plan of the session in flight writes what it holds (``Known.plans``); what it
            # does not stays held for the next write or the background flush.
            if (self._sync.pending or self._sync.dirty is not None) and not self._known.plans:
                with contextlib.suppress(TelosError):
                    self._run(self._plan(unchanged, strict=False))

    async def aflush(self) -> None:
        """``flush`` for async code (the store's async client; nothing blocks the event loop)."""
        if self._sync.pending or self._sync.dirty is not None:
            with contextlib.suppress(TelosError):
                await self._arun(self._plan(unchanged, strict=False))

    def read(self) -> SessionState:
        """The store's current state (after writing this process's pending usage), else this process's."""
        return self.read_known()[0]

    def read_known(self) -> tuple[SessionState, bool]:
        """``_read``, and whether the state is known: ``False`` when the store could not be read and
        this process knows nothing of the session (the state is then an empty one, not the session's)."""
        if self._space is None:  # not bound to a tenant yet: what this process recorded, nothing stored
            with self.lock:
                return self._local_state(), True
        for other in live.held():
            if other.store_key == self.store_key and other is not self._known and other.store is self.store:
                other.flush()
        with self.lock:
            if not self._known.plans:  # else the in-flight async plan's state is the newest here
                self.flush()
                if self._local is not None:
                    try:
                        self._settle()
                    except Exception:
                        logger.debug(
                            "telos_wrap: session %s: not settled", session_hash(self.id), exc_info=True
                        )
                drivers.read_state(self._sync, self.store, self._breaker(), self.store_key)
            view = self._sync.view()
            if view is None:
                return SessionState(session_id=self.id), False
            return self._sync.with_pending(view), True

    # -- the request path (called by the patch layer) ---------------------------------------------

    def _hooks_plan(self, strict: bool | None) -> _Path[SessionHooks]:
        """``hooks`` as a plan: one read-only store plan (the failure reported outside the lock)."""

        def step(state: SessionState) -> tuple[None, SessionHooks]:
            pins = self._sync.cached_pins(state)
            return None, StateHooks(state, pins, state.volatile, own=dict(self._own), key=self._key)

        try:
            hooks: SessionHooks = yield _StateIO(self._plan(step, strict, readonly=True))
            return hooks
        except TelosStageError:
            if strict:
                raise
            return SessionHooks()
        except Exception as exc:
            yield UNLOCKED
            report_failure(TelosStageError("session", exc), strict=strict)
            return SessionHooks()

    def hooks(self, *, strict: bool | None = None) -> SessionHooks:
        """The session's current pipeline hooks (for calls that are not turns, e.g. token counts).

        Reads the store only when this process holds nothing of the session yet. Never raises
        unless ``strict``: if the state cannot be read, the stateless hooks are returned (counted).
        """
        return self._drive(self._hooks_plan(strict))

    async def ahooks(self, *, strict: bool | None = None) -> SessionHooks:
        """``hooks`` for async clients (the same plan, ``_hooks_plan``)."""
        return await self._adrive(self._hooks_plan(strict))

    # -- fleet learning: the hook (the logic: sessions/learning/fleet.py and fleet_io.py) --

    def _fleet_on(self) -> bool:
        on = self.fleet_learning if self.fleet_learning is not None else current_config().fleet_learning
        return on and self.learn_volatility

    def _fleet(self) -> bool:
        """Whether to ask the fleet for facts now: fleet learning is on, and this is the first request
        this process prepares for the session while the conversation has made none."""
        parsed = self._sync.parsed
        fresh = parsed is None or parsed[2].requests == 0
        return fresh and not self._fleet_asked and self._fleet_on()

    def _started(self, start: fleet_io.FleetStart) -> tuple[tuple[fleet.Fact, ...], str | None]:
        """Keep what the fleet said of this conversation's lengths; ``(facts, note)``."""
        if start.where is not None:
            self._lengths, self._fleet_where = start.lengths.reached, start.where
        return start.facts, start.note

    # -- end of the fleet learning hook ------------------------------------------------------------

    def _turn_step(
        self,
        api: Api,
        body: Mapping[str, Any],
        options: PrepareOptions,
        facts: Sequence[fleet.Fact] = (),
        key: bytes = SHARED_KEY,
    ) -> Callable[[SessionState], tuple[SessionState, TurnResult]]:
        now = self.clock()

        def step(state: SessionState) -> tuple[SessionState, TurnResult]:
            result = run_turn(
                state,
                api,
                body,
                options,
                pins=self._sync.cached_pins(state),
                now=now,
                learn_volatility=self.learn_volatility,
                diagnostics=self.diagnostics,
                memo=self._memo,
                ledger=self._ledger,
                own=dict(self._own),
                own_history_only=self.implicit and not tells_users_apart(api, body, options.hints.isolation),
                fleet=facts,
                lengths=Lengths(self._lengths) if self._lengths else None,
                context=options.hints.context or current_config().context,
                key=key,
            )
            return result.state, result

        return step

    def _prepare_plan(
        self,
        api: Api,
        body: Mapping[str, Any],
        options: PrepareOptions,
        strict: bool | None,
        tenant: str | None,
    ) -> _Path[tuple[int, Prepared]]:
        """One request of the session, as a plan (``prepare_request``, ``prepare_request_async``).

        Under the session's lock: the binding to the call's tenant, the tenant's digest key, and
        whether this request asks the fleet, checked and set in one step (the conversation's first
        request asks it once, however many start at once); the fleet's answer; the turn, planned
        and made durable (one compare-and-set); what this process remembers of it. Then, outside
        the lock: the facts it learned are published, the request is counted for the fleet's
        conversation lengths, and its breaks and failed output filters are reported."""
        facts: tuple[fleet.Fact, ...] = ()
        note: str | None = None
        if self._space is None:
            self.bind_tenant(tenancy.space_of(options.hints.isolation, tenant))
        self._key = key = fleet_io.digest_key(options.hints, tenant)
        if self._fleet():  # fleet learning (sessions/learning/fleet.py)
            self._fleet_asked = True
            store = self.store
            start = yield _FleetIO(
                store, fleet_io.fleet_plan(store, api, body, options.hints, tenant, self.store_key)
            )
            facts, note = self._started(start)
        plan = self._plan(self._turn_step(api, body, options, facts, key), strict)
        try:
            result: TurnResult = yield _StateIO(plan)
        except TelosStageError:
            raise
        except Exception as exc:
            raise TelosStageError("session", exc) from exc
        self._after_turn(api, body, options, result, note)
        yield UNLOCKED
        if self._fleet_on():  # fleet learning: publish what was learned, count the request
            if result.facts:
                store = self.store
                yield _FleetIO(
                    store,
                    fleet_io.learned_plan(
                        store, api, body, options.hints, result.facts, tenant, self.store_key
                    ),
                )
            if self._fleet_where is not None:
                fleet_io.note_reached(self.store, self._fleet_where, result.index + 1)
        return self._report_turn(result)

    def prepare_request(
        self,
        api: Api,
        body: Mapping[str, Any],
        options: PrepareOptions,
        *,
        strict: bool | None = None,
        tenant: str | None = None,
    ) -> tuple[int, Prepared]:
        """Prepare one request of this session; returns ``(request index, prepared)``.

        One compare-and-set on the store (none while its circuit breaker is open: the turn then runs
        on this process's state). Raises ``TelosStageError`` on any failure of telos (the patch
        layer then fails open or, with ``strict``, raises it); a store failure raises only if
        ``strict``. ``tenant``: the call's tenant digest (``identity.tenant_digest``), which scopes
        fleet learning (``fleet.namespace``). The steps: ``_prepare_plan``, run with the store's
        sync methods under the session's lock (the fleet's read and the turn's round trip too).
        """
        return self._drive(self._prepare_plan(api, body, options, strict, tenant))

    async def prepare_request_async(
        self,
        api: Api,
        body: Mapping[str, Any],
        options: PrepareOptions,
        *,
        strict: bool | None = None,
        tenant: str | None = None,
    ) -> tuple[int, Prepared]:
        """``prepare_request`` for async clients: the same plan (``_prepare_plan``), with the store's
        async I/O; the session's lock is held around its steps, not across a store call. The
        store's ``timeout`` bounds the store time of the whole call (``stores/budget.py``)."""
        with budget.opened(self.store):
            return await self._adrive(self._prepare_plan(api, body, options, strict, tenant))

    def _after_turn(
        self,
        api: Api,
        body: Mapping[str, Any],
        options: PrepareOptions,
        result: TurnResult,
        application: str | None = None,
    ) -> None:
        if self._keep_requests:
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
                application=application,
            )
        )
        live.warm_up(self, self._held_bytes(result.state))

    def _held_bytes(self, state: SessionState) -> int:
        """About how many bytes of texts this process holds for the session (memo, ledger, last
        request): the size of the last prompt's messages, and of its whole prompt where the last
        request is kept (texts shared with other conversations counted as if they were not)."""
        last = state.last
        if last is None:
            return _SESSION_BYTES
        held = last.total_size()  # known from the print's making: no walk over every position
        if self._keep_requests is False:
            held -= sum(last.sizes[: last.n_tools + last.n_system])
        return _SESSION_BYTES + 2 * held

    def cool(self) -> None:
        """Drop the texts this process holds for the session (the history memo, the wire ledger, the
        last request) when other sessions were used more recently (``live.warm_up``): what is sent
        does not change (a cooled session's next turn lifts its history again, and its I2 wire check
        skips that one request). Keeps the small records. Skipped if the session is busy."""
        if not self.lock.acquire(blocking=False):
            return
        try:
            live.forget_warm(self)
            self._memo = HistoryMemo()
            self._ledger = WireLedger()
            self._last_request = None
            self._last_prepared = None
            while len(self._records) > _COOL_RECORDS:
                self._records.popitem(last=False)
            while len(self._usage_due) > _COOL_RECORDS:
                self._usage_due.popitem(last=False)
            if self._sync.pending and store_ops(self.store).inline:
                self.flush()  # an in-process store: nothing to wait for, and the session is let go
            if not self._sync.pending and self._sync.dirty is None:
                live.release(self._known)  # nothing left to write (a store swapped meanwhile dropped it)
        finally:
            self.lock.release()

    def _remember_references(self, system: tuple[TelosBlock, ...]) -> None:
        """Keep the stub and entry texts just emitted (the latest ``_OWN_TEXTS`` per slug, for at
        most ``_OWN_SLUGS`` slugs): they are what proves a reference is telos' own later."""
        for slug, texts in emitted_references(system).items():
            kept = self._own.pop(slug, ())
            shared = tuple(share(text) for text in texts)
            self._own[slug] = (*shared, *(text for text in kept if text not in shared))[:_OWN_TEXTS]
        while len(self._own) > _OWN_SLUGS:
            del self._own[next(iter(self._own))]

    def _report_turn(self, result: TurnResult) -> tuple[int, Prepared]:
        for output in result.prepared.ir.outputs:
            if output.fallback:  # a filter raised or is not available: the result went whole
                report_failure(
                    TelosStageError(
                        "output_filter",
                        RuntimeError(f"output filter {output.filter_id or ''} failed on {output.where}"),
                    ),
                    strict=False,
                )
        if result.learned is not None:
            logger.debug(  # positions only, never the caller's text (docs/security.md)
                "telos_wrap: session %s learned a volatile system span at request %d: %s",
                session_hash(self.id),
                result.index,
                result.learned.describe(),
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
        # One line per kind of break in the process, then DEBUG and a periodic count (sessions/logs.py):
        # a break happens once per conversation (the first change of a live value), and so would scale.
        bug = brk.reason == "telos_rewrote"
        planned = brk.reason == "context_folded"  # the session's own policy, on purpose: INFO
        note(
            logger,
            logging.ERROR if bug else logging.INFO if planned else logging.WARNING,
            f"break:{brk.reason}",
            f"cache breaks ({brk.reason})",
            "telos_wrap: cache break in session %s at request %d: %s at %s (~%d tokens at risk): %s",
            session_hash(self.id),
            brk.request,
            brk.reason,
            brk.where,
            brk.tokens_at_risk,
            scrub(brk.detail, self.id),
            per_window=bug,
        )
        if self.on_cache_break is not None:
            try:
                self.on_cache_break(brk)
            except Exception:
                note(
                    logger,
                    logging.ERROR,
                    "break:callback",
                    "on_cache_break callbacks that raised",
                    "telos_wrap: on_cache_break callback of session %s raised",
                    session_hash(self.id),
                    per_window=True,
                    exc_info=True,
                )

    def _passthrough_plan(self, api: Api, engine: str, body: Mapping[str, Any], fallback: bool) -> _Path[int]:
        """``note_passthrough`` as a plan: one store plan counting the request, then its record."""
        step = passthrough_step(engine, body, self.clock(), fallback=fallback)
        try:
            index: int = yield _StateIO(self._plan(step, strict=False))
            self._remember_passthrough(api, engine, body, index)
            return index
        except Exception:
            yield UNLOCKED
            # Only reached after the same call already failed open (and was counted and warned
            # about): recording the pass-through is bookkeeping, not a second failure.
            logger.debug(
                "telos_wrap: session %s could not record a pass-through request",
                session_hash(self.id),
                exc_info=True,
            )
            return -1

    def note_passthrough(
        self, api: Api, engine: str, body: Mapping[str, Any], *, failed: TelosStageError | None = None
    ) -> int:
        """Record a request telos sent unchanged (disabled, failed open, or a ``max_tokens=0`` refresh).

        ``failed``: the stage failure it fell back on (counted in ``stats.fallbacks``; a
        conversation that keeps falling back is said once, loudly: ``_fell_back``). Returns its
        index, or -1 if it could not be recorded (never raises).
        """
        if failed is not None:
            self._fell_back(failed)
        return self._drive(self._passthrough_plan(api, engine, body, failed is not None))

    async def note_passthrough_async(
        self, api: Api, engine: str, body: Mapping[str, Any], *, failed: TelosStageError | None = None
    ) -> int:
        """``note_passthrough`` for async clients (the same plan, ``_passthrough_plan``)."""
        if failed is not None:
            self._fell_back(failed)
        return await self._adrive(self._passthrough_plan(api, engine, body, failed is not None))

    def note_passthrough_deferred(
        self, api: Api, engine: str, body: Mapping[str, Any], *, failed: TelosStageError
    ) -> int:
        """Count a request sent as built because its call had no store time left for the session's
        plan (the store budget ran out before it, or waiting for the plan's lock: ``drivers.arun``).
        No store call and no wait for the plan's lock: the request joins the usage not yet written
        and is applied by the session's next write (``plans.Deferred``), so it is counted once,
        never dropped. Its index is what this process knows (the last-known count plus the requests
        deferred before it): the bookkeeping of its usage here. Never raises; -1 if not recorded."""
        self._fell_back(failed)
        step = passthrough_step(engine, body, self.clock(), fallback=True)
        try:
            with self.lock:
                self._sync.bind_store()  # bound first: a plan binding the store later clears pending
                view = self._sync.view()
                deferred = sum(1 for entry in self._sync.pending if isinstance(entry[1], Deferred))
                index = (view.requests if view is not None else 0) + deferred
                self._sync.pending.append((index, Deferred(step), None))
                live.hold(self._known)
                self._remember_passthrough(api, engine, body, index)
            return index
        except Exception:
            logger.debug(
                "telos_wrap: session %s could not record a pass-through request",
                session_hash(self.id),
                exc_info=True,
            )
            return -1

    #: Fallbacks of one session in this process before it is said loudly: the first is warned about at
    #: its call site (``failopen``), a second may be a retry of the same request; at the third the
    #: conversation keeps going out without a saving.
    FALLBACKS_BEFORE_WARNING = 3

    def _fell_back(self, error: TelosStageError) -> None:
        """Count a fallback; at the third of this session in this process, one WARNING with the cause
        and what to do (type and stage only: request content is never logged above DEBUG)."""
        with self.lock:
            self._fallbacks_here += 1
            loud = self._fallbacks_here == self.FALLBACKS_BEFORE_WARNING
        if loud:
            cause = error.__cause__ or error
            note(
                logger,
                logging.WARNING,
                "fallback:conversation",
                "conversations that keep falling back",
                "telos_wrap: the requests of conversation %s keep falling back: they go out as the SDK "
                "built them, with no cache saving (stage %r failed: %s). What to do: run once with "
                "telos_wrap.patch(strict=True) to raise the error where it happens, and report it with "
                "the request's shape; s.stats.fallbacks and telos_wrap.failure_counts() count them",
                session_hash(self.id),
                error.stage,
                type(cause).__name__,
            )

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
        with self.lock:
            due = self._usage_due.get(index)
            if due == 0:
                return  # this request's usage is counted already (a second report of one response)
            # None: a request this process no longer remembers (the table is bounded): counted once.
            self._usage_due[index] = (1 if due is None else due) - 1
            if len(self._usage_due) > 4 * self._history_limit:
                self._trim_usage_due()
            self._sync.pending.append((index, report, response_id))
            live.hold(self._known)
            record = self._records.get(index)
            if record is not None:
                self._records[index] = replace(record, usage=report)

    def _trim_usage_due(self) -> None:
        while len(self._usage_due) > 4 * self._history_limit:
            self._usage_due.popitem(last=False)

    def _remember(self, record: RequestRecord) -> None:
        # A new request of this index: one more usage is due, even if an earlier request of this
        # process had the same index (the store's count went back) and its usage is still to come.
        self._usage_due[record.index] = self._usage_due.get(record.index, 0) + 1
        self._usage_due.move_to_end(record.index)
        if len(self._usage_due) > 4 * self._history_limit:
            self._trim_usage_due()
        self._records[record.index] = record
        while len(self._records) > self._history_limit:
            self._records.popitem(last=False)

    # -- for the handle (``core.Session``): its primitives' mechanics -------------------------------

    def pin(self, slug: str, text: str) -> None:
        """Keep ``text`` as the session's blob and record the pin of ``slug`` (``Session.pin`` checked
        both): written to the store at once when bound, else kept here and carried at the binding."""
        key = _blob_key(text)
        with self.lock:
            if self._space is None:  # not bound yet: kept here, written to the tenant's entry at the binding
                self._sync.blobs[key] = share(text)
            else:
                drivers.put_pin(self._sync, self.store, key, text, self.store_key)
            self.update(pin_step(slug, key))

    def recheck(self, state: SessionState) -> None:
        """Dry-run the last request of this process on ``state``: invariants must still hold."""
        if self._last_request is None:
            return
        api, body, options = self._last_request
        try:
            run_turn(
                state,
                api,
                body,
                options,
                pins=drivers.load_pins(self._sync, self.store, state, self.store_key),
                now=self.clock(),
                commit=False,
            )
        except TelosStageError as exc:
            raise FoldError(f"the fold would break the prompt's invariants: {exc}") from exc

    def dry_run(
        self, body: Mapping[str, Any] | None, api: Api | None, options: PrepareOptions | None
    ) -> EmitPlan:
        """The plan the next request would get (``Session.mark``): ``body`` or the last request this
        process prepared, on the current state. Records nothing."""
        with self.lock:
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
                    bridge=BridgeOptions(
                        keep_past_drop=config.keep_past_drop, output_filter=config.output_filter
                    ),
                    refpool_threshold=config.refpool_threshold,
                    only_what_pays=config.only_what_pays,
                )
            state = self.read()
            pins = drivers.load_pins(self._sync, self.store, state, self.store_key)
            result = run_turn(
                state, api or "anthropic", body, options, pins=pins, now=self.clock(), commit=False
            )
        return result.prepared.plan

    def last_body(self) -> dict[str, Any] | None:
        """The body of the latest request this process rewrote (what a refresh re-sends), if kept."""
        with self.lock:
            return self._last_prepared.body if self._last_prepared is not None else None

    def request_indices(self) -> list[int]:
        """The indices of the requests this process remembers, oldest first."""
        with self.lock:
            return sorted(self._records)

    def _erase_plan(self) -> _Path[None]:
        """``erase`` as a plan: the fleet's entries first, then the session's entry, then this process."""
        store, key = self.store, self.store_key
        yield _FleetIO(store, fleet_io.erase_plan(key))
        yield _Delete(store, key)
        self._forget_here()

    def erase(self) -> None:
        """``Session.erase``: the fleet facts the session contributed, its entry at ``store_key`` and
        blobs, and what this process holds of it. Raises what the store raises."""
        self._drive(self._erase_plan())

    async def aerase(self) -> None:
        """``erase`` for async code (the same plan, ``_erase_plan``)."""
        await self._adrive(self._erase_plan())

    def _forget_here(self) -> None:
        live.forget_warm(self)
        self._known.reset()
        self._memo = HistoryMemo()
        self._ledger = WireLedger()
        self._records.clear()
        self._usage_due.clear()
        self._own.clear()
        self._last_request = None
        self._last_prepared = None
        self._lengths, self._fleet_where, self._fleet_asked = (), None, False
        self._local = None
        live.release(self._known)

    def request_record(self, index: int) -> RequestRecord | None:
        """What this process remembers of request ``index`` (``None``: not prepared here, or too old).
        No I/O: the telemetry reads it right after the request was prepared."""
        with self.lock:
            return self._records.get(index)
