"""One request of a session, as a pure function: ``(state, request) → (prepared body, next state)``.

``run_turn`` runs the pipeline with the session's hooks (learned DROP patterns, pins, folds),
compares the lifted system segment with the previous request's (``volatility.learn``) and, when a
span is learned, runs the pipeline again with it; then it fingerprints the result, detects a cache
break against the previous request, and returns the state to write. It does no I/O and reads no
clock, so a store's compare-and-set loop can simply run it again after losing a race — and every
worker that runs it on the same state and body emits the same bytes.

Why one module, over 500 lines: ``run_turn`` is one pure step, and its parts — the hooks the
pipeline calls (``StateHooks``: learned spans, the fork, the expected last request), the fleet
adoption and the learning retry that re-run the pipeline with new hooks, the break detection and
the next state — all read the hooks of the one request being prepared; split, each part would
pass that state back and forth.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, overload

from telos_wrap.engines.registry import get_engine
from telos_wrap.errors import TelosUnreadableError
from telos_wrap.history import HistoryMemo
from telos_wrap.ir.context import FOLDED_HERE, SERVER_EDITS, ContextPolicy
from telos_wrap.ir.model import Api, Band, TelosIR, Transformation
from telos_wrap.ir.refpool import OwnReferences
from telos_wrap.ir.windows import context_window
from telos_wrap.lift import lift_request
from telos_wrap.lift.user_split import DEFAULT_PATTERNS, SplitPatterns
from telos_wrap.pipeline import Prepared, PrepareOptions, SessionHooks, check_budget, prepare
from telos_wrap.sessions.durable.prints import kept_hash, message_hash, message_kind, prompt_print
from telos_wrap.sessions.durable.records import CacheBreak, ClearFold, RangeFold, VolatileSpan
from telos_wrap.sessions.durable.state import (
    HASH_LEN,
    MAX_DROPPED,
    AppPrint,
    PromptPrint,
    SessionState,
    hash_list,
)
from telos_wrap.sessions.learning.digests import SHARED_KEY, block_lines
from telos_wrap.sessions.learning.fleet import Fact, adopt, expected_layers, facts_of, on_uncut_view
from telos_wrap.sessions.learning.lengths import Lengths, final_reason
from telos_wrap.sessions.learning.orders import MAX_ORDERS, stabilize_orders
from telos_wrap.sessions.learning.spans import locate, pattern_of
from telos_wrap.sessions.learning.volatility import (
    MAX_LEARNED,
    expected_view,
    fingerprint,
    learn,
    present_spans,
    span_matches,
    system_view,
)
from telos_wrap.sessions.turns.breaks import BYTES_PER_TOKEN, detect_break
from telos_wrap.sessions.turns.clearing import (
    apply_clear_folds,
    folds_of,
    measure,
    result_texts,
    summarize,
)
from telos_wrap.sessions.turns.files import apply_file_folds, file_key, file_slugs
from telos_wrap.sessions.turns.folds import apply_pins_and_slug_folds, apply_range_folds
from telos_wrap.sessions.turns.pressure import Decision, plan_folds
from telos_wrap.sessions.turns.server_edits import predict
from telos_wrap.sessions.turns.wire_i2 import WireEntry, WireLedger, WireMismatch, conversation_entry

__all__ = ["StateHooks", "TurnResult", "run_turn"]


_NO_OWN: OwnReferences = MappingProxyType({})


#: A context policy with the engine's read and write multipliers of the input price.
Pressure = tuple[ContextPolicy, float, float]


class StateHooks(SessionHooks):
    """The pipeline hooks of a session state: learned DROP patterns, pins, slug and range folds.

    After ``before_bridge`` ran, ``app`` holds the fingerprint of the messages the application sent.
    """

    def __init__(
        self,
        state: SessionState,
        pins: Mapping[str, str],
        volatile: tuple[VolatileSpan, ...],
        memo: HistoryMemo | None = None,
        own: OwnReferences = _NO_OWN,
        last: bool = False,
        pressure: Pressure | None = None,
        key: bytes = SHARED_KEY,
        clock_in_place: bool = False,
    ) -> None:
        self.state = state
        #: A clock to the second that ends the system segment stays in place until it changes
        #: (``SplitPatterns.clock_in_place``; ``clock_stays``).
        self.clock_in_place = clock_in_place
        #: The context policy and the engine's read / write multipliers (``None``: no policy).
        self.pressure = pressure
        #: The folds the context policy decided for this request, and its decision.
        self.new_clear: tuple[ClearFold, ...] = ()
        self.decision: Decision | None = None
        #: The first message a file-block fold recorded for this request changed (``None``: none).
        self.file_fold: int | None = None
        #: The tenant's digest key (``digests.space_key``): learned spans are found by keyed digests.
        self.key = key
        #: The session expects this request to be the conversation's last (``final_point``).
        self.last = last
        self.memo = memo
        self.own = own
        self.pins = pins
        self.volatile = volatile
        #: The lifted system segment (``volatility.system_view``), set by ``before_bridge``.
        self.system_view: tuple[str | None, ...] = ()
        #: The request body as the caller built it: learned spans are named by the caller's own block
        #: and line (``caller_place``); read while preparing, never kept in the state.
        self.body: Mapping[str, Any] = {}
        #: One hash per message as the application sent it (``AppPrint.messages``), and its kinds.
        self.app_hashes = ""
        self.kinds = ""
        #: One character per application message: the content form it was sent in (``s``/``l``/...).
        self.forms = ""
        #: ``(message, kept hash)`` of each application message that holds DROP-band blocks, by
        #: message (``prints.kept_hash``), and ``AppPrint.dropped`` of this request. Read from the lift
        #: for the messages lifted now and from the memo for settled ones, which come back bridged
        #: (their DROP blocks pruned): what a fresh process lifting every message finds.
        self.held: tuple[tuple[int, str], ...] = ()
        self.dropped: tuple[str, ...] = ()
        self.slugs: tuple[str, ...] = ()
        #: Schema name orders this request saw first (``orders.stabilize_orders``).
        self.new_orders: dict[str, str] = {}
        self._fork: int | None = None

    def fork_point(self) -> int | None:
        """``SessionHooks.fork_point``: the first application message that differs from the previous request's
        (``AppPrint``), found by ``before_bridge``; where none is, a context or file fold decided for this
        request sets it to the fold's message, so the prefix before it is read (BP-fork). ``None`` with range
        folds in force."""
        return self._fork

    def final_point(self) -> int | None:
        """When this request is expected to be the conversation's last: the messages it shares with
        the previous request, which that request wrote (``sessions/learning/lengths.py``)."""
        if not self.last or self.state.range_folds:
            return None
        previous = self.state.app
        if (
            previous is None
            or (self.state.last is not None and self.state.last.cached_upto < 0)
            or fingerprint(self.system_view, self.key) != previous.system
        ):
            # No earlier entry holds any of its messages: none was written, or the system prompt
            # before them changed since (a first change); the tools and system are still marked.
            return 0
        if self._fork is not None:
            return self._fork
        return len(previous.messages) // HASH_LEN

    def own_references(self) -> OwnReferences:
        """``SessionHooks.own_references``: the ref-pool stubs and entries this session emitted, as the
        runtime gave them (only text exactly equal to one is lifted as a reference)."""
        return self.own

    def filtered_outputs(self) -> Mapping[str, str]:
        """``SessionHooks.filtered_outputs``: the state's record of the tool results the output filter changed
        (``SessionState.filtered``), so each is filtered again the same way on every later request, by any
        worker (docs/output-filter.md)."""
        return self.state.filtered

    def history_memo(self) -> HistoryMemo | None:
        """``SessionHooks.history_memo``: the session's memo, or ``None`` (lift everything) while any range,
        context or slug fold is recorded or a context policy is set: those rewrite messages after the lift, so
        positions cannot be reused."""
        # Range folds rewrite message positions after the lift, and context folds rewrite tool
        # results in place: no reuse by position then.
        if (
            self.state.range_folds
            or self.state.clear_folds
            or self.state.slug_folds
            or self.pressure is not None
        ):
            return None
        return self.memo

    def after_settle(self, ir: TelosIR) -> None:
        """Keep the application's hashes of the messages the memo settled, for the next turn."""
        memo = self.history_memo()
        if memo is not None:
            count = memo.shared_prefix(ir.messages, ir.settled)
            held = self.held[: bisect_left(self.held, (count,))]
            value = (self.app_hashes[: count * HASH_LEN], self.kinds[:count], self.forms[:count], held)
            memo.keep_aggregate("app", ir.messages, count, value)

    def settled_side(self) -> Mapping[str, Sequence[Any]]:
        """Each message's ``(hash, kind, form, kept hash)`` as the application sent it (the kept hash
        ``""`` for a message without DROP-band blocks), kept by the memo as it settles.

        A settled message comes back from the memo in its bridged form (past DROP pruned), whose
        hash is not the application's and which holds no DROP block: the memo keeps these for when
        the aggregate does not reach it (after a rewind or a sibling branch).
        """
        return {"app": _AppRows(self.app_hashes, self.kinds, self.forms, self.held)}

    def patterns(self, base: SplitPatterns) -> SplitPatterns:
        """``SessionHooks.patterns``: ``base`` (its closing clock kept in place with ``clock_in_place``) and
        the learned spans as DROP patterns in layers: the spans one request learned were learned together, on
        the text the earlier layers left; the fleet's adopted spans are one layer."""
        if self.clock_in_place:
            base = base.with_clock_in_place()
        if not self.volatile:
            return base
        # Spans learned at one request were learned together, on the text the earlier ones left;
        # spans adopted from the fleet come first, one layer (facts are described on the text before
        # any cut: ``fleet.facts_of``, ``fleet.adopt``).
        layers: dict[tuple[str, int], list[Any]] = {}
        for span in self.volatile:
            layer = (span.origin, -1 if span.origin == "fleet" else span.learned_at)
            layers.setdefault(layer, []).append(pattern_of(self.key, span))
        return base.layered(layers.values())

    def before_bridge(self, ir: TelosIR) -> TelosIR:
        """``SessionHooks.before_bridge``: takes the application's print of the request (hashes, kinds, forms,
        DROP-band messages) and its fork point, then applies the recorded and newly decided context folds,
        range folds, file folds, pins and slug folds and schema name orders, each recorded in ``ir.records``
        (with what the caller's own ``context_management`` clears)."""
        self.system_view = system_view(ir)
        learned_records = self._learned_records(ir)
        memo = self.history_memo()
        cached = memo.aggregate("app", ir.messages) if memo is not None else None
        start, (hashes, kinds, forms, held) = cached if cached is not None else (0, ("", "", "", ()))
        if memo is not None and start < ir.settled:
            rows = memo.side("app", start, ir.settled)
            if rows is not None:
                hashes += "".join(digest for digest, _, _, _ in rows)
                kinds += "".join(kind for _, kind, _, _ in rows)
                forms += "".join(form for _, _, form, _ in rows)
                held += tuple((number, kept) for number, (_, _, _, kept) in enumerate(rows, start) if kept)
                start = ir.settled
        new_messages = ir.messages[start:]
        self.app_hashes = hashes + "".join(message_hash(message) for message in new_messages)
        self.kinds = kinds + "".join(message_kind(message) for message in new_messages)
        self.forms = forms + "".join(message.content_form[0] for message in new_messages)
        self.held = held + tuple(
            (number, kept_hash(message))
            for number, message in enumerate(new_messages, start)
            if any(block.band is Band.DROP for block in message.blocks)
        )
        self.dropped = _dropped(self.held, self.state.app)
        folds = self.state.range_folds
        self._fork = None if folds else _fork(self.state.app, self.app_hashes)
        ir, clear_records = self._context_folds(ir)
        if "context_management" in ir.params:
            clear_records += self._server_edits(ir)
        ir, range_records = apply_range_folds(ir, folds, hash_list(self.app_hashes) if folds else [])
        # Settled messages (reused from the previous request by the history memo, which is off
        # while any slug fold exists) were scanned then: their file keys carry over.
        settled = ir.settled if not self.state.slug_folds else 0
        files = file_slugs(ir, settled)
        earlier = self.state.app.slugs if settled and self.state.app is not None else ()
        pool_folds = self.state.slug_folds
        file_records: list[Transformation] = []
        if files:
            # The seeds' <file path=…> rule (sessions/turns/files.py): a fold of a file block's path
            # replaces its content in the messages; the rest of the slug folds are the ref-pool's.
            own = [
                f
                for f in pool_folds
                if f.slug in files and f.slug not in ir.ref_pool and f.slug not in self.pins
            ]
            pool_folds = tuple(f for f in pool_folds if f not in own)
            ir, file_records, first = apply_file_folds(ir, own)
            if first is not None and any(f.at == self.state.requests for f in own):
                self.file_fold = first
                if not self.state.range_folds and self._fork is None:
                    self._fork = first or None  # the prefix before the fold is read (BP-fork)
        ir, pool_records = apply_pins_and_slug_folds(ir, self.pins, pool_folds)
        ir, self.new_orders = stabilize_orders(ir, _known_orders(self.state.orders))
        self.slugs = tuple(ir.ref_pool)
        if files or earlier:
            keys = [k for k in earlier if k.startswith("file:")]
            keys += [file_key(f) for f in files if f not in ir.ref_pool]
            self.slugs += tuple(dict.fromkeys(keys))
        records = [*clear_records, *range_records, *file_records, *pool_records, *learned_records]
        return replace(ir, records=ir.records + tuple(records)) if records else ir

    def _context_folds(self, ir: TelosIR) -> tuple[TelosIR, list[Transformation]]:
        """The recorded context folds applied, and the policy's new ones decided and applied
        (``sessions/turns/pressure.py``); on application message positions, before range folds."""
        recorded = self.state.clear_folds
        if not recorded and self.pressure is None:
            return ir, []
        hashes = hash_list(self.app_hashes)
        ir, records = apply_clear_folds(ir, recorded, hashes)
        if self.pressure is None:
            return ir, records
        policy, read, write = self.pressure
        measured = measure(ir)
        window = context_window(str(ir.params.get("model", "")))
        decision = plan_folds(
            measured.units,
            measured.total,
            measured.current,
            policy,
            window,
            {f.key() for f in recorded},
            read=read,
            write=write,
            turn=measured.turn,
            requests=self.state.requests,
        )
        self.decision = decision
        if not decision.fold:
            if decision.note:
                records.append(Transformation(kind="context-policy", where="messages", detail=decision.note))
            return ir, records
        summaries = (
            summarize(policy.summarizer, result_texts(ir, (u.key() for u in decision.fold)))
            if policy.summarizer is not None
            else None
        )
        new = folds_of(decision, measured, hashes, self.state.requests, policy.clear_tool_inputs, summaries)
        ir, applied = apply_clear_folds(ir, new, hashes)
        self.new_clear = new
        if not self.state.range_folds and self._fork is None:
            # The fold point is where this request first differs from the previous one: the engine
            # marks the shared prefix before it (BP-fork), so it is read, and only what follows written.
            self._fork = decision.fold[0].message or None
        records += applied
        records.append(
            Transformation(
                kind=FOLDED_HERE,
                where=f"messages[{decision.fold[0].message}:]",
                detail=f"{decision.explain(read, write)} ({policy.describe()})",
                chars=decision.cleared * 4,
            )
        )
        return ir, records

    def _server_edits(self, ir: TelosIR) -> list[Transformation]:
        """What the caller's own ``context_management`` clears server side (Anthropic), said in
        ``explain``; while it clears, the prefix before the next thing it may clear is marked
        (BP-fork), so the next request reads it (``sessions/turns/server_edits.py``)."""
        if ir.api != "anthropic" or "context_management" not in ir.params:
            return []
        edits = predict(ir, measure(ir))
        if edits is None or not (edits.results or edits.thinking):
            return []
        # The frontier is marked unless the request already diverged or folded (its own BP-fork).
        free = not self.state.range_folds and self._fork is None and not self.new_clear
        if edits.frontier is not None and free:
            self._fork = edits.frontier or None
        start = edits.frontier if edits.frontier is not None else edits.first
        return [
            Transformation(
                kind=SERVER_EDITS,
                where=f"messages[{start}:]",
                detail=edits.describe(marked=free),
                chars=edits.tokens * 4,
            )
        ]

    def _learned_records(self, ir: TelosIR) -> list[Transformation]:
        """One ``learned-volatile`` record per learned span that cut text out of this system segment."""
        records = []
        for span in self.volatile:
            where = span_matches(span, ir, self.key)
            if where is None:
                continue
            block, chars = where
            why = {
                "present": "a self-labelled statement of the present (moved on sight)",
                "value": f"a value in it changed at request {span.learned_at} while the rest of the "
                "line stayed the same",
                "lines": f"these lines changed twice (the second time at request {span.learned_at})",
                "region": f"these lines were replaced twice (the second time at request {span.learned_at})",
                "list": f"lines carrying values came and went here at request {span.learned_at}",
            }[span.kind]
            if span.origin == "fleet":
                seen = "changed twice there" if span.kind in ("lines", "region") else "changed there"
                why = (
                    f"learned by another conversation of this application (same system-prompt template) "
                    f"at its request {span.learned_at}: these lines {seen} ({span.kind}); verified on "
                    "this prompt before use (fleet learning, docs/sessions.md)"
                )
            else:
                why = f"learned by this conversation: {why}"
            count = "1 line" if span.lines == 1 else f"{span.lines} lines"
            place = caller_place(span, ir, self.body, self.key)
            records.append(
                Transformation(
                    kind="learned-volatile",
                    where=f"{block} ({place}, {count})",
                    detail=f"moved whole from {place} to the end of "
                    f"the latest turn, under the heading it sat under if it had one; why: {why}; "
                    "switch off with learn_volatility=False",
                    chars=chars,
                )
            )
        return records


def _dropped(held: Sequence[tuple[int, str]], previous: AppPrint | None) -> tuple[str, ...]:
    """``AppPrint.dropped``: the messages new since ``previous`` that hold DROP-band blocks, each with
    its hash without them (``held``: ``StateHooks.held``, by message)."""
    start = len(previous.messages) // HASH_LEN if previous is not None else 0
    first = bisect_left(held, (start,))
    return tuple(f"{number}:{kept}" for number, kept in held[first : first + MAX_DROPPED])


def extends_previous(previous: AppPrint, hashes: str, held: Sequence[tuple[int, str]]) -> bool:
    """Whether this request's messages (``hashes``, one per message as the application sent it)
    extend the previous request's: each of its messages comes again, the same, or without the
    DROP-band blocks (a harness's ``<system-reminder>`` on the newest turn, gone on the next) it had
    there and otherwise the same (``AppPrint.dropped``). ``held``: ``(message, kept hash)`` of this
    request's messages that hold DROP-band blocks (``StateHooks.held``); any other message's kept
    hash is its hash. What counts as one conversation for the fleet."""
    if hashes.startswith(previous.messages):
        return True
    if not previous.dropped or len(hashes) < len(previous.messages):
        return False
    recorded = dict(entry.partition(":")[::2] for entry in previous.dropped)
    kept = dict(held)
    for number, (old, new) in enumerate(zip(hash_list(previous.messages), hash_list(hashes), strict=False)):
        if old != new and recorded.get(str(number)) != kept.get(number, new):
            return False
    return True


def _same_conversation(
    app: AppPrint | None, hashes: str, previous: Sequence[str], system: Sequence[str]
) -> bool:
    """Whether a request can be the next one of the conversation of the previous request, for an
    implicit session where nothing tells users apart (two users who open alike share it): its
    messages extend the previous ones, and its system prompt differs from the previous one in
    values only (each line's text with its values masked is the same). Anything else may be
    another user's request, and telos must not learn what to move in one user's prompt from
    another's (docs/security.md)."""
    if app is None or not hashes.startswith(app.messages) or len(previous) != len(system):
        return False
    # An unchanged block print has an unchanged skeleton: compare skeletons only where a print changed.
    return all(
        old == new or _skeleton(old) == _skeleton(new) for old, new in zip(previous, system, strict=True)
    )


def _skeleton(block_print: str) -> list[str]:
    """Per line of a block's fingerprint (``volatility.fingerprint``): its text with values masked."""
    if block_print.startswith("~"):
        return [block_print]
    return [
        parts[1] if len(parts) > 1 else parts[0]
        for parts in (line.split("/") for line in block_print.split(","))
    ]


def _known_orders(entries: tuple[str, ...]) -> Mapping[str, str]:
    return _orders_memo(entries)


@functools.lru_cache(maxsize=64)
def _orders_memo(entries: tuple[str, ...]) -> Mapping[str, str]:
    return dict(entry.split(":", 1) for entry in entries)


def _fork(previous: AppPrint | None, hashes: str) -> int | None:
    """The first message of ``hashes`` that differs from the previous request's, if it diverged.

    Read from the durable ``AppPrint``, so a fresh process with the same state finds the same
    fork. ``None`` for an append-only request (the previous messages are a prefix of this one),
    for the first request, and when nothing is shared.
    """
    if previous is None or hashes.startswith(previous.messages):
        return None
    old, new = hash_list(previous.messages), hash_list(hashes)
    common = next(
        (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new))
    )
    return common or None


_AppRow = tuple[str, str, str, str]


class _AppRows(Sequence[_AppRow]):
    """``(hash, kind, form, kept hash)`` of message ``i``, read from what the hooks keep (the kept
    hash ``""`` for a message without DROP-band blocks)."""

    __slots__ = ("_forms", "_hashes", "_held", "_kinds")

    def __init__(self, hashes: str, kinds: str, forms: str, held: Sequence[tuple[int, str]]) -> None:
        self._hashes = hashes
        self._kinds = kinds
        self._forms = forms
        self._held = held

    def __len__(self) -> int:
        return len(self._kinds)

    @overload
    def __getitem__(self, index: int) -> _AppRow: ...

    @overload
    def __getitem__(self, index: slice) -> list[_AppRow]: ...

    def __getitem__(self, index: int | slice) -> _AppRow | list[_AppRow]:
        held = dict(self._held)
        if isinstance(index, slice):
            return [self._row(i, held) for i in range(*index.indices(len(self)))]
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._row(index, held)

    def _row(self, index: int, held: Mapping[int, str]) -> _AppRow:
        digest = self._hashes[index * HASH_LEN : (index + 1) * HASH_LEN]
        return digest, self._kinds[index], self._forms[index], held.get(index, "")


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What ``run_turn`` decided: the body to send and the state to write.

    Attributes:
        index: the request's index in its session.
        prepared: the pipeline's result.
        state: the session state after this request.
        cache_break: the break this request causes, if any.
        learned: the first volatile span this request taught, if any (all of them: ``learned_all``).
        learned_all: every volatile span this request taught.
        adopted: the fleet's spans this request started with (``sessions/learning/fleet.py``), verified.
        facts: what this request learned, to share with the fleet (``fleet.facts_of``).
        wire: this request's conversation as sent, for the session's ``WireLedger`` (kept once the
            state is written).
    """

    index: int
    prepared: Prepared
    state: SessionState
    cache_break: CacheBreak | None
    learned: VolatileSpan | None
    learned_all: tuple[VolatileSpan, ...] = ()
    wire: WireEntry | None = None
    adopted: tuple[VolatileSpan, ...] = ()
    facts: tuple[Fact, ...] = ()


def run_turn(
    state: SessionState,
    api: Api,
    body: Mapping[str, Any],
    options: PrepareOptions,
    *,
    pins: Mapping[str, str],
    now: float,
    learn_volatility: bool = True,
    diagnostics: bool = False,
    commit: bool = True,
    memo: HistoryMemo | None = None,
    ledger: WireLedger | None = None,
    own: OwnReferences = _NO_OWN,
    own_history_only: bool = False,
    fleet: Sequence[Fact] = (),
    lengths: Lengths | None = None,
    context: ContextPolicy | None = None,
    key: bytes = SHARED_KEY,
) -> TurnResult:
    """Prepare request ``state.requests`` of the session (see module docstring).

    ``commit=False`` is a dry run (``session.mark()``): nothing is learned and the state is unchanged.
    ``memo`` is the session's in-memory history memo (a cache: it never changes what is sent).
    ``ledger`` holds what this process sent for the previous request: a settled message not re-sent
    byte for byte is recorded as a ``telos_rewrote`` break (``sessions/turns/wire_i2.py``); it is read,
    never updated here (the caller keeps ``TurnResult.wire`` once the state is written).
    ``own``: the ref-pool stubs and entries this process emitted for the session, the only texts
    lifted as references (``refpool.emitted_references``; docs/security.md).
    ``own_history_only``: learn from the previous request only if this one extends its history (an
    implicit session where nothing tells users apart: two users who open alike share it, and one
    must never teach telos what to move in the other's prompt; docs/security.md).
    ``fleet``: facts other conversations of the application learned (``sessions/learning/fleet.py``), used
    only by the first request of a conversation, each verified here (``fleet.adopt``, then the lift
    must cut exactly that) or ignored.
    ``lengths``: how long the application's conversations ran (fleet learning); with the
    ``expected_turns`` hint, tells whether this request is expected to be the conversation's last,
    which then writes nothing past what an earlier request wrote (``sessions/learning/lengths.py``).
    ``context``: the session's context policy: old tool results folded under pressure, decided here
    and recorded in the state returned (``sessions/turns/pressure.py``).
    ``key``: the tenant's digest key (``digests.space_key``): what is learned is kept as digests
    made with it. ``TurnResult.facts`` (what the fleet may learn) are only spans learned comparing
    two consecutive requests of one conversation (this request's messages extend the previous
    one's), whatever the session id says.
    Raises ``TelosStageError`` when a pipeline stage fails (the bridge re-checks every invariant).
    """
    index = state.requests
    if diagnostics and api == "anthropic" and commit:
        body = {**body, "diagnostics": {"previous_message_id": state.last_response_id}}
    volatile = state.volatile
    memo = memo if commit else None
    last = _final_reason(index, options, lengths) if commit else None
    pressure = _pressure(context, options.engine)
    in_place = learn_volatility and len(volatile) < MAX_LEARNED and clock_stays(options.engine, body)
    hooks = StateHooks(
        state,
        pins,
        volatile,
        memo=memo,
        own=own,
        last=last is not None,
        pressure=pressure,
        key=key,
        clock_in_place=in_place,
    )
    hooks.body = body
    prepared = prepare(api, body, options, hooks)
    if not commit:
        return TurnResult(index, prepared, state, None, None)
    suspects = state.suspects
    learned: tuple[VolatileSpan, ...] = ()
    adopted: tuple[VolatileSpan, ...] = ()
    facts: tuple[Fact, ...] = ()
    if fleet and learn_volatility and index == 0 and state.app is None and not volatile:
        # -- fleet learning (sessions/learning/fleet.py): start with the application's verified facts --
        hooks, prepared, adopted = _adopt_fleet(
            state, api, body, options, hooks, prepared, fleet, pins, memo, own, key
        )
        volatile = adopted
    previous = state.app.system if state.app is not None else None
    if learn_volatility and len(volatile) < MAX_LEARNED:
        check_budget("session.learn")
        known = {span.where for span in volatile}
        fresh = [
            span
            for span in present_spans(hooks.system_view, index, key, clock_in_place=in_place)
            if span.where not in known
        ]
        # One conversation: this request's messages extend the previous request's. Only what changed
        # between two such requests is shared with the fleet (``local`` spans are not).
        extends = state.app is not None and extends_previous(state.app, hooks.app_hashes, hooks.held)
        if (
            previous is not None
            and own_history_only
            and not _same_conversation(
                state.app, hooks.app_hashes, previous, fingerprint(hooks.system_view, key)
            )
        ):
            previous = None
            prepared = replace(
                prepared,
                plan=replace(
                    prepared.plan,
                    notes=(
                        *prepared.plan.notes,
                        "nothing learned from the previous request: this one does not extend its "
                        "history with only values changed in the system prompt, and nothing in it "
                        "(user fields, isolation hint) tells users apart, so it may be another "
                        "conversation; name the conversation to learn across such requests",
                    ),
                ),
            )
        if previous is not None:
            found = learn(previous, hooks.system_view, index, suspects, key=key, local=not extends)
            suspects = found.suspects
            fresh += [span for span in found.learned if span.where not in known]
        fresh = list({span.where: span for span in fresh}.values())[: MAX_LEARNED - len(volatile)]
        if fresh:
            again = StateHooks(
                state,
                pins,
                (*volatile, *fresh),
                memo=memo,
                own=own,
                last=hooks.last,
                pressure=pressure,
                key=key,
                clock_in_place=in_place,
            )
            again.body = body
            retried = prepare(api, body, options, again)
            # The lift applies the spans learned at one request as one layer, to the text the earlier
            # layers left (the text they were learned on): use them only if they cut there exactly
            # what they cut from the lifted text (a span may also fit elsewhere in the request).
            wanted = tuple(t for t in expected_view(hooks.system_view, fresh, key) if t != "")
            if again.system_view == wanted:
                # only what one conversation saw change, described on the text before any cut
                facts = _facts(api, body, options, hooks, volatile, fresh, key) if extends else ()
                hooks, prepared, learned = again, retried, tuple(fresh)
                volatile = (*volatile, *learned)
    if last is not None and prepared.plan.final_request:
        prepared = replace(
            prepared,
            plan=replace(prepared.plan, notes=(*prepared.plan.notes, f"expected last request: {last}")),
        )
    hooks.after_settle(prepared.ir)
    current = prompt_print(prepared, options.engine, now, memo=hooks.history_memo())
    if prepared.untouched is not None:
        # Sent as built, below any minimum: nothing was cached, so nothing can break next turn.
        current = replace(current, cached_upto=-1, breakpoints=())
    elif state.last is not None and state.last.cached_upto < 0 and state.requests > 0:
        prepared = replace(
            prepared,
            plan=replace(
                prepared.plan,
                notes=(
                    *prepared.plan.notes,
                    "first request telos touches in this session: from here on its changes can pay "
                    "(the requests before were left as built, and cached nothing)",
                ),
            ),
        )
    cache_break = detect_break(state.last, current, index)
    route = (api, options.engine, str(prepared.ir.params.get("model", "")))
    wire = (
        None
        if prepared.untouched is not None
        else conversation_entry(
            index, prepared.ir.messages, prepared.body, hooks.app_hashes, hooks.forms, HASH_LEN, route
        )
    )
    # Range folds renumber the messages after the lift: wire index and application index differ.
    # A context fold decided now rewrites settled messages on purpose (the break says so below).
    if (
        ledger is not None
        and wire is not None
        and state.last is not None
        and not state.range_folds
        and not hooks.new_clear
        and hooks.file_fold is None
    ):
        mismatch = ledger.check(wire)
        if mismatch is not None:
            cache_break = _telos_rewrote(state.last, mismatch, index)
    if cache_break is not None and learned and cache_break.reason == "system_changed":
        where = ", ".join(caller_place(span, prepared.ir, body, key) for span in learned)
        cache_break = replace(
            cache_break,
            detail=cache_break.detail
            + f"; the changing span ({where}) is now learned as volatile, so later requests keep the "
            "system cache",
        )
    if cache_break is not None and hooks.new_clear:
        cache_break = _context_folded(cache_break, hooks.new_clear, state.range_folds)
    if (
        cache_break is not None
        and hooks.file_fold is not None
        and cache_break.reason == "history_rewritten"
        and cache_break.message is not None
        and cache_break.message >= _wire_index(state.range_folds, hooks.file_fold)
    ):
        cache_break = replace(
            cache_break,
            reason="context_folded",
            detail=f"session.fold(slugs=...) replaced a file block's content from message "
            f"{cache_break.message} on: one rewrite of ~{cache_break.tokens_at_risk} cached tokens after "
            "it, then the prefix is read again (a fold the session recorded, not a break)",
        )
    app = AppPrint(
        messages=hooks.app_hashes,
        kinds=hooks.kinds,
        system=fingerprint(hooks.system_view, key),
        slugs=hooks.slugs,
        dropped=hooks.dropped,
    )
    by_engine = dict(state.by_engine)
    by_engine[options.engine] = by_engine.get(options.engine, 0) + 1
    filtered = _with_filtered(state.filtered, prepared)
    new_state = replace(
        state,
        filtered=filtered,
        requests=index + 1,
        refreshes_since_request=0,
        by_engine=by_engine,
        last=current,
        app=app,
        volatile=volatile,
        suspects=suspects,
        orders=_with_orders(state.orders, hooks.new_orders),
        clear_folds=(*state.clear_folds, *hooks.new_clear) if hooks.new_clear else state.clear_folds,
    )
    if cache_break is not None:
        new_state = new_state.with_break(cache_break)
    if cache_break is not None and cache_break.reason == "telos_rewrote":
        new_state = replace(new_state, telos_rewrites=new_state.telos_rewrites + 1)
    first = learned[0] if learned else None
    return TurnResult(index, prepared, new_state, cache_break, first, learned, wire, adopted, facts)


def _with_filtered(recorded: Mapping[str, str], prepared: Prepared) -> Mapping[str, str]:
    """The session's record of filtered tool results, with those this request filtered first
    (docs/output-filter.md). A request sent as built (below the minimum) is recorded too: it cached
    nothing, and the history memo keeps its messages as bridged, which later requests then send."""
    fresh = [o for o in prepared.ir.outputs if o.fresh and o.filter_id is not None and o.key not in recorded]
    if not fresh:
        return recorded
    return {**recorded, **{o.key: f"{o.filter_id}|{o.before}|{o.after}" for o in fresh}}


def _facts(
    api: Api,
    body: Mapping[str, Any],
    options: PrepareOptions,
    hooks: StateHooks,
    volatile: Sequence[VolatileSpan],
    fresh: Sequence[VolatileSpan],
    key: bytes,
) -> tuple[Fact, ...]:
    """The facts to share of the spans ``fresh`` learned on ``hooks.system_view``, described on this
    request's system segment before any learned cut (what the next conversation's first request
    shows: ``fleet.adopt``). Where earlier spans cut text, that segment is lifted again without them
    (once per request that learned something new, a few per conversation)."""
    if not any(span.kind in ("value", "list", "lines", "region") and not span.local for span in fresh):
        return ()
    if not volatile:
        return facts_of(hooks.system_view, fresh, key)
    check_budget("session.learn")
    try:
        uncut = system_view(
            lift_request(
                api,
                body,
                session_id=options.session_id,
                hints=options.hints,
                patterns=DEFAULT_PATTERNS.with_clock_in_place() if hooks.clock_in_place else DEFAULT_PATTERNS,
                refpool_threshold=options.refpool_threshold,
                own=hooks.own_references(),
            )
        )
    except TelosUnreadableError:  # lifted already with the session's spans: not expected; share nothing
        return ()
    return facts_of(uncut, on_uncut_view(hooks.system_view, uncut, fresh, key), key)


def clock_stays(engine: str, body: Mapping[str, Any]) -> bool:
    """Whether a clock to the second that ends the system segment stays in place until it changes.

    Where the engine's cache reads any token prefix without anchors (automatic caching, no telos
    breakpoints: OpenAI before gpt-5.6, vLLM, SGLang, DeepSeek, generic servers), a final line left
    in place costs nothing while it rests and, at its first change, only what followed it (the
    conversation so far: one request's turns when it is rendered for each request); moved on sight,
    its tokens leave every request's cached prefix, and whole 128-token steps with them
    (docs/sessions.md, *A clock that ends the system prompt*). Where telos anchors the cache
    (breakpoints), a first change would miss the anchor: the line moves on sight as before."""
    try:
        adapter = get_engine(engine)
    except Exception:
        return False  # an engine that cannot be built is the engine stage's failure, counted there
    if adapter.profile.caching != "automatic":
        return False
    anchored = getattr(adapter, "places_breakpoints", None)
    return not (callable(anchored) and anchored(body.get("model")))


def _pressure(context: ContextPolicy | None, engine: str) -> Pressure | None:
    if context is None:
        return None
    profile = get_engine(engine).profile
    return context, profile.read_multiplier, profile.write_multiplier


def _final_reason(index: int, options: PrepareOptions, lengths: Lengths | None) -> str | None:
    """Why request ``index`` is planned as its conversation's last (``lengths.final_reason``), or ``None``."""
    if options.hints.expected_turns is None and not lengths:
        return None
    profile = get_engine(options.engine).profile
    return final_reason(
        index + 1,
        options.hints.expected_turns,
        lengths,
        (profile.read_multiplier, profile.write_multiplier),
    )


def _adopt_fleet(
    state: SessionState,
    api: Api,
    body: Mapping[str, Any],
    options: PrepareOptions,
    hooks: StateHooks,
    prepared: Prepared,
    facts: Sequence[Fact],
    pins: Mapping[str, str],
    memo: HistoryMemo | None,
    own: OwnReferences,
    key: bytes,
) -> tuple[StateHooks, Prepared, tuple[VolatileSpan, ...]]:
    """The fleet's facts that cut exactly a whole unit here (``fleet.adopt``), used only if the lift
    then cuts exactly what they cut from the lifted text; else nothing is adopted."""
    adopted = adopt(hooks.system_view, facts, key)
    if not adopted:
        return hooks, prepared, ()
    again = StateHooks(
        state,
        pins,
        adopted,
        memo=memo,
        own=own,
        last=hooks.last,
        pressure=hooks.pressure,
        key=key,
        clock_in_place=hooks.clock_in_place,
    )
    again.body = body
    retried = prepare(api, body, options, again)
    if again.system_view != expected_layers(hooks.system_view, adopted, key):
        return hooks, prepared, ()
    return again, retried, adopted


def _with_orders(entries: tuple[str, ...], new: Mapping[str, str]) -> tuple[str, ...]:
    if not new or len(entries) >= MAX_ORDERS:
        return entries
    return (*entries, *(f"{key}:{order}" for key, order in new.items()))[:MAX_ORDERS]


def _context_folded(brk: CacheBreak, folds: Sequence[ClearFold], ranges: Sequence[RangeFold]) -> CacheBreak:
    """``brk`` as the ``context_folded`` outcome when the policy's new fold is its cause: the first
    difference is in the messages at or after the first message folded (a difference before it is
    the caller's own, and stays what it is)."""
    first = min(fold.message for fold in folds)
    if brk.reason != "history_rewritten" or brk.message is None or brk.message < _wire_index(ranges, first):
        return brk
    thinking = sum(1 for fold in folds if fold.thinking)
    files = sum(1 for fold in folds if fold.file)
    results = len(folds) - thinking - files
    what = " and ".join(
        part
        for part in (
            f"{results} old tool result(s)" if results else "",
            f"the thinking of {thinking} earlier assistant turn(s)" if thinking else "",
            f"{files} file block(s)" if files else "",
        )
        if part
    )
    return replace(
        brk,
        reason="context_folded",
        detail=f"the session's context policy folded {what} from message {brk.message} on: "
        f"one rewrite of ~{brk.tokens_at_risk} cached tokens after the fold point, then the prefix "
        "is read again (a planned fold, not a break of the caller's doing)",
    )


def _wire_index(ranges: Sequence[RangeFold], app_index: int) -> int:
    """The wire index of application message ``app_index``: each range fold before it sends its
    messages as one summary (an upper bound if one was not applied: the break then stays as it is)."""
    return app_index - sum(fold.end - fold.start - 1 for fold in ranges if fold.end <= app_index)


def _telos_rewrote(previous: PromptPrint, mismatch: WireMismatch, index: int) -> CacheBreak:
    """The break of a request that did not re-send settled message ``mismatch.message`` byte for byte."""
    start = previous.n_tools + previous.n_system + sum(previous.msg_blocks[: mismatch.message])
    cached = previous.bytes_through(previous.cached_upto) if previous.cached_upto >= 0 else 0
    at_risk = max(0, cached - previous.bytes_through(start - 1)) // BYTES_PER_TOKEN
    return CacheBreak(
        request=index,
        reason="telos_rewrote",
        segment="messages",
        message=mismatch.message,
        block=0,
        tokens_at_risk=at_risk,
        detail=(
            f"telos did not re-send message {mismatch.message} as it sent it on the previous request "
            f"(first different byte at {mismatch.offset} of its wire form): a telos bug, please report "
            "it; the cached prefix from that message on must be written again"
        ),
    )


_BLOCK_ID = re.compile(r"(system|messages)\[(\d+)\](?:\[(\d+)\])?")
_POOLED = re.compile(r"ref:system-doc-(\d+)")


def caller_place(span: VolatileSpan, ir: TelosIR, body: Mapping[str, Any], key: bytes = SHARED_KEY) -> str:
    """Where ``span`` is in the caller's own prompt: ``system[i] line n``, the block as the caller
    indexed it and the line counted from 1 in the text as the caller wrote it (moved envelope lines
    included) — the convention of every telos message (breaks, ``explain``, the pytest report)."""
    # ``span.block`` counts the lifted segment's PIN blocks; bridged, a long one is a pool entry.
    pins = [block for block in ir.system if block.band is not Band.DROP]
    block_id = pins[span.block].id if span.block < len(pins) else ""
    pooled = _POOLED.match(block_id)  # the ref-pool renders a long block under its slug
    if pooled is not None:
        block_id = f"{'system' if 'system' in body else 'messages'}[{pooled.group(1)}]"
    found = _BLOCK_ID.match(block_id)
    text: Any = None
    if found is not None:
        segment, index, part = found.group(1), int(found.group(2)), found.group(3)
        raw = body.get(segment)
        if segment == "system" and isinstance(raw, str):
            text = raw
        elif isinstance(raw, list) and index < len(raw):
            item = raw[index]
            content = item.get("content") if segment == "messages" and isinstance(item, Mapping) else item
            if isinstance(content, list) and part is not None and int(part) < len(content):
                content = content[int(part)]
            text = content.get("text") if isinstance(content, Mapping) else content
        where = f"{segment}[{index}]" + (f".content[{part}]" if part is not None else "")
    elif isinstance(body.get("instructions"), str):
        text, where = body["instructions"], "instructions"
    else:
        where = f"system block {span.block}"
    line = span.line + 1
    if isinstance(text, str):
        place = locate(span, block_lines(key, text))
        if place is not None:
            line = place[0] + 1
    return f"{where} line {line}"
