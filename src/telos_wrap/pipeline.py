"""The only place the three layers meet: ``prepare()`` = lift → bridge → engine plan/emit.

Everything here is synchronous, pure and SDK-free: it maps a plain-JSON request body to the body
to send. The patch layer calls it and decides what a failure means (fail open, or raise with
``strict=True``). Each step runs as a named *stage*; a failure is raised as ``TelosStageError``
naming the stage, and tests can inject faults into any stage by name (``_stage_hook``).
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType, TracebackType
from typing import Any, Literal, NamedTuple

from telos_wrap.bridge import BridgeOptions, passes
from telos_wrap.engines.base import EmitPlan, EngineAdapter
from telos_wrap.engines.minimums import server_held, untouched_reason
from telos_wrap.engines.registry import get_engine
from telos_wrap.errors import TelosBudgetError, TelosStageError
from telos_wrap.history import HistoryMemo, raw_latest_turn
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api, TelosIR, TelosMessage
from telos_wrap.ir.order import TURN_ROLES
from telos_wrap.ir.refpool import OwnReferences
from telos_wrap.lift import conversation, lift_request
from telos_wrap.lift.plain import require_plain
from telos_wrap.lift.user_split import DEFAULT_PATTERNS, SplitPatterns

__all__ = [
    "PrepareOptions",
    "Prepared",
    "SessionHooks",
    "Untouched",
    "UntouchedCode",
    "check_budget",
    "prepare",
    "stage",
    "time_budget",
    "untouched",
]

#: Test hook: called with each stage name before the stage runs (fault injection).
_stage_hook: Callable[[str], None] | None = None


#: When the request being prepared in this context must be done, if ever: a reading of
#: ``time.thread_time()``, the CPU time of the preparing thread. CPU time, not wall time: a loaded
#: machine or a thread waiting for the GIL does not spend telos' budget (its own work does), and a
#: slow store has its own timeout and circuit breaker (docs/sessions.md).
#: Held as ``(wall, cpu)``: a thread's CPU time grows no faster than the wall clock, so until
#: ``time.perf_counter()`` passes ``wall`` (the same budget from the same moment) ``cpu`` cannot have
#: passed either, and the check needs no CPU-clock reading (a system call, ~0.6 us here, against
#: ~0.05 us for ``perf_counter``; a request enters a dozen stages).
_deadline: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "telos_wrap_deadline", default=None
)


class time_budget:
    """Give the request prepared inside the block at most ``seconds`` of CPU time (``None``: no limit).

    Every stage checks it on entry (``check_budget``): past it, ``TelosStageError("budget")`` is
    raised and the patch layer sends the SDK's own request. A stage already running is not cut short,
    so a request may overrun by one stage; every walk over caller text is linear, so a stage is short.
    """

    __slots__ = ("seconds", "token")

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.token: contextvars.Token[tuple[float, float] | None] | None = None

    def __enter__(self) -> None:
        if self.seconds is not None:
            self.token = _deadline.set(
                (time.perf_counter() + self.seconds, time.thread_time() + self.seconds)
            )

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            _deadline.reset(self.token)
            self.token = None


def check_budget(where: str = "budget") -> None:
    """Raise ``TelosStageError("budget")`` if the request's time budget (``time_budget``) is spent."""
    deadline = _deadline.get()
    if deadline is not None and time.perf_counter() > deadline[0] and time.thread_time() > deadline[1]:
        raise TelosStageError(
            "budget",
            TelosBudgetError(
                f"telos spent its time budget preparing this request (before {where}); the request is "
                "sent as the SDK built it. Raise patch(time_budget=...) if this request is expected."
            ),
        )


class stage:
    """Run a block as pipeline stage ``name``: any exception becomes ``TelosStageError(name)``.

    A plain class rather than a ``@contextmanager`` generator: a request passes a dozen stages, and
    the generator machinery cost ~2 us each.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        deadline = _deadline.get()
        if deadline is not None and time.perf_counter() > deadline[0] and time.thread_time() > deadline[1]:
            check_budget(self.name)  # raises (``check_budget`` inlined: a dozen stages a request)
        if _stage_hook is not None:
            try:
                _stage_hook(self.name)
            except TelosStageError:
                raise
            except Exception as exc:
                raise TelosStageError(self.name, exc) from exc

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if exc is None or isinstance(exc, TelosStageError) or not isinstance(exc, Exception):
            return
        raise TelosStageError(self.name, exc) from exc


#: ``stage(name)``, one object per name: a stage holds only its name, so one serves every request
#: and thread (the stage names are the pipeline's and the bridge passes', a fixed set).
_stage = functools.cache(stage)

_NO_OWN: OwnReferences = MappingProxyType({})
_NO_FILTERED: Mapping[str, str] = MappingProxyType({})


class SessionHooks:
    """What a session contributes to a request. The default contributes nothing (stateless call).

    ``before_bridge`` may add session state (ref-pool folds, learned volatile spans) to the lifted
    IR; ``patterns`` extends the DROP patterns used by the lift.
    """

    def patterns(self, base: SplitPatterns) -> SplitPatterns:
        """The DROP patterns the lift splits user text with: ``base`` and the session's own."""
        return base

    def before_bridge(self, ir: TelosIR) -> TelosIR:
        """The lifted IR with the session's state applied (ref-pool folds, learned volatile spans)."""
        return ir

    def history_memo(self) -> HistoryMemo | None:
        """The session's memo of settled history, or ``None`` to lift everything (stateless)."""
        return None

    def settled_side(self) -> Mapping[str, Sequence[Any]]:
        """Per-message values (name → one per conversation message) the memo keeps as it settles."""
        return {}

    def own_references(self) -> OwnReferences:
        """The ref-pool stubs and entries telos emitted in this session, by slug
        (``refpool.emitted_references``): only text exactly equal to one of them is lifted as a
        reference. A stateless call knows none, so any ``[ref:…]`` text is the caller's."""
        return _NO_OWN

    def filtered_outputs(self) -> Mapping[str, str]:
        """The tool results the session's output filter changed: result digest → filter id
        (docs/output-filter.md). A stateless call knows none."""
        return _NO_FILTERED

    def fork_point(self) -> int | None:
        """After ``before_bridge``: the first message differing from the session's previous request.

        ``None`` when the request extends the previous one (append-only) or there is none.
        """
        return None

    def final_point(self) -> int | None:
        """After ``before_bridge``: when the session expects this to be the conversation's last
        request, how many leading messages an earlier request already wrote to the cache (the
        engine's ``plan(final=...)``); ``None`` otherwise (a stateless call: always).
        """
        return None


@dataclass(frozen=True, slots=True)
class PrepareOptions:
    """Knobs of one ``prepare`` call (resolved from patch(), session and telos_hint)."""

    engine: str
    hints: TelosHints = field(default_factory=TelosHints)
    session_id: str = "implicit"
    bridge: BridgeOptions = field(default_factory=BridgeOptions)
    refpool_threshold: int | None = 2048
    count_only: bool = False
    #: Leave a request exactly as built when nothing in it can be cached (``engines.minimums``). A
    #: policy of ``patch()`` (on by default there); a direct ``prepare()`` call is the bare
    #: transformation and leaves it off unless asked.
    only_what_pays: bool = False


#: Why a request goes out exactly as the SDK built it: its whole prompt is below the model's minimum
#: cacheable prefix, or the server holds the conversation (an Anthropic message thread).
UntouchedCode = Literal["below_minimum", "server_thread"]


class Untouched(NamedTuple):
    """Why ``prepare`` left a request as built: a code (metrics, branching) and the sentence
    ``explain`` prints. A tuple of two strings, so a session's kept records add nothing to what a
    full garbage collection walks (docs/sessions.md, "What a session keeps in this process")."""

    code: UntouchedCode
    detail: str


@dataclass(frozen=True, slots=True)
class Prepared:
    """The result of ``prepare``: the body to send and how it was made.

    Attributes:
        body: the wire body to send (plain JSON): the caller's top-level fields in the caller's order,
            then the fields telos adds; canonical key order inside the prompt's content.
        ir: the bridged IR (what ``session.explain`` shows).
        plan: the engine's plan (breakpoints, extras, notes).
        engine: the engine adapter used.
        untouched: why the request is sent exactly as the SDK built it (``body`` is then the
            caller's body and the patch layer sends the SDK's own request), or ``None``.
    """

    body: dict[str, Any]
    ir: TelosIR
    plan: EmitPlan
    engine: EngineAdapter
    untouched: Untouched | None = None


def prepare(
    api: Api,
    body: Mapping[str, Any],
    options: PrepareOptions,
    hooks: SessionHooks | None = None,
) -> Prepared:
    """Turn a plain-JSON request body into the cache-friendly body to send.

    Raises ``TelosStageError`` if any stage fails; ``body`` itself is never modified.
    """
    hooks = hooks or SessionHooks()
    with _stage("engine"):
        engine = get_engine(options.engine)
        bridge = _bridge_options(engine, api, body, options.bridge)
        if options.hints.output_filter is not None:  # the call's (or session's) over patch()'s
            bridge = replace(bridge, output_filter=options.hints.output_filter)
    with _stage("lift"):
        patterns = hooks.patterns(DEFAULT_PATTERNS)
        memo = hooks.history_memo()
        lifted = conversation(api, body) if memo is not None else None
        settled: tuple[TelosMessage, ...] = ()
        if memo is not None and lifted is not None:
            offset, raw = lifted
            latest = raw_latest_turn(raw, TURN_ROLES)
            memo_key = (
                api,
                offset,
                options.engine,
                patterns,
                options.hints.drop_patterns,
                options.hints.drop_scope,
                bridge,
            )
            settled = memo.reusable(memo_key, raw, latest)
        else:
            memo = None
        # Plain JSON only (lift/plain.py): what the memo just matched by ``==`` is, the rest is checked.
        require_plain(body, skip=range(lifted[0], lifted[0] + len(settled)) if lifted else range(0))
        ir = lift_request(
            api,
            body,
            session_id=options.session_id,
            hints=options.hints,
            patterns=patterns,
            refpool_threshold=options.refpool_threshold,
            settled=settled,
            own=hooks.own_references(),
        )
    with _stage("session.before"):
        ir = hooks.before_bridge(ir)
    for name, bridge_pass in passes(bridge, hooks.filtered_outputs()):
        with _stage(name):
            ir = bridge_pass(ir)
    tables = memo.tables if memo is not None else None
    with _stage("plan"):
        plan = engine.plan(
            ir, options.hints, reuse=tables, fork=hooks.fork_point(), final=hooks.final_point()
        )
        if options.count_only:
            plan = replace(plan, extras={})
    with _stage("emit"):
        wire = engine.emit(ir, plan, reuse=tables)
    if memo is not None and lifted is not None:
        with _stage("history"):
            # The conversation's wire messages come last (OpenAI puts system groups first), and may
            # end with a message telos appended (the OpenAI path's trailing envelope message).
            sent = wire.get("messages")
            conv = len(ir.messages)
            tail = (
                sent[len(sent) - conv : len(sent) - conv + len(raw)]
                if isinstance(sent, list) and len(sent) >= conv >= len(raw)
                else None
            )
            memo.settle(memo_key, raw, ir, latest, tail, hooks.settled_side())
    if options.only_what_pays:
        with _stage("gate"):
            why = untouched(api, options.engine, body)
        if why is not None:
            return Prepared(
                body=dict(body),
                ir=ir,
                plan=EmitPlan(notes=(f"left untouched: {why.detail}",)),
                engine=engine,
                untouched=why,
            )
    return Prepared(body=in_callers_order(wire, body), ir=ir, plan=plan, engine=engine)


def _bridge_options(
    engine: EngineAdapter, api: Api, body: Mapping[str, Any], options: BridgeOptions
) -> BridgeOptions:
    """``options``, adjusted to what the engine's route does with the request.

    A Chat Completions route that hoists every system message into the system prompt (an engine with
    ``system_messages_hoisted``, ``engines.chat_breakpoints``) needs the volatile envelope in the latest
    turn: a trailing system message would land in front of the whole conversation.
    """
    hoisted = getattr(engine, "system_messages_hoisted", None)
    if api == "openai_chat" and callable(hoisted) and hoisted(body.get("model")):
        options = replace(options, envelope_in_turn=True)
    return options


def in_callers_order(wire: dict[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """``wire`` with its top-level fields in ``body``'s order, the fields telos added after them.

    Top-level field order is never part of the prompt (a vendor renders tools, system and messages
    in its own order; docs/emulator.md, "Render modes"), so it stays as the SDK built it: logs, diffs
    and request-asserting tests of the caller see their own layout (docs/engines.md).
    """
    ordered = {key: wire[key] for key in body if key in wire}
    if len(ordered) == len(wire):
        return ordered
    ordered.update((key, value) for key, value in wire.items() if key not in ordered)
    return ordered


def untouched(api: Api, engine: str, body: Mapping[str, Any]) -> Untouched | None:
    """Why ``body`` goes out exactly as the SDK built it (docs/engines.md, *Touch only what pays*)."""
    held = server_held(api, body)
    if held == "thread":
        return Untouched(
            "server_thread",
            "an Anthropic message thread (the server holds the conversation and its tools): sent as built",
        )
    if held is not None:
        # The server holds earlier turns: the prompt's length is unknown here, so it may pay.
        return None
    why = untouched_reason(engine, body)
    return None if why is None else Untouched("below_minimum", why)
