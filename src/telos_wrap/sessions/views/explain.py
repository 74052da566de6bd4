"""What a session remembers of its requests in this process, and ``explain``'s text of one.

Read-only views: nothing here reads a store or changes a session's state. ``RequestRecord`` is
kept per request by ``core.Session`` (the last ``history_limit``); ``explain`` renders one of them
with the state's recent cache breaks (docs/sessions.md, "What a session keeps in this process").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from telos_wrap.engines.base import Breakpoint
from telos_wrap.ir.canon import canonical_json
from telos_wrap.ir.model import Api, Transformation, UsageReport
from telos_wrap.pipeline import Prepared, Untouched
from telos_wrap.sessions.durable.records import CacheBreak, VolatileSpan

__all__ = ["Anchor", "Change", "Explained", "RequestRecord", "anchor", "change", "explain"]

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

    untouched: Untouched | None
    breakpoints: tuple[Anchor, ...]
    notes: tuple[str, ...]
    records: tuple[Change, ...]
    #: Characters the output filter took out of the tool results it filtered first in this request
    #: (``telos.output_filter.removed``; a result re-sent as first filtered is not counted again).
    filtered_chars: int = 0

    @classmethod
    def of(cls, prepared: Prepared) -> Explained:
        """What ``explain`` keeps of ``prepared``: why it went out untouched (``None``: rewritten), its
        breakpoints, notes and records as plain tuples (``anchor``, ``change``), and the characters the output
        filter took out of results first filtered in it; nothing of its wire body or IR."""
        return cls(
            prepared.untouched,
            tuple(map(anchor, prepared.plan.breakpoints)),
            prepared.plan.notes,
            tuple(map(change, prepared.ir.records)),
            sum(
                o.before - o.after
                for o in prepared.ir.outputs
                if o.fresh and o.filter_id is not None and not o.fallback
            ),
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
        adopted: the fleet's spans the request started with (``sessions/learning/fleet.py``).
        application: what per-conversation text early in the system prompt costs the application
            (``sessions/learning/fleet_shape.py``), at a conversation's first request.
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
    application: str | None = None


def explain(
    session_id: str,
    n: int,
    record: RequestRecord | None,
    index: int,
    recent: Sequence[CacheBreak],
    *,
    total: int | None = None,
    known: Sequence[int] = (),
) -> str:
    """The text of ``Session.explain(n)``: ``record`` is request ``index`` as this process knows it
    (``None``: not prepared here, or too old), ``recent`` the state's recent cache breaks, ``total``
    the session's requests (every worker's), ``known`` the indexes this process holds."""
    brk = next((b for b in recent if b.request == index), None)
    if record is None:
        asked = f"request {index}" + (f" (explain({n}))" if n != index else "")
        if total == 0:
            lines = [f"session {session_id}: no {asked}: the session has no requests yet"]
        elif total is not None and not 0 <= index < total:
            lines = [
                f"session {session_id}: no {asked}: the session has {total} request(s), 0 to {total - 1}"
            ]
        else:
            here = (
                f"this process holds requests {known[0]} to {known[-1]}"
                if known
                else "this process prepared none of them"
            )
            count = f"; the session has {total} request(s), {here}" if total is not None else ""
            lines = [f"session {session_id}: {asked} was not prepared in this process (or is too old){count}"]
        if brk is not None:
            lines.append(_break_line(brk))
        return "\n".join(lines)
    lines = [f"session {session_id} request {record.index} ({record.api}, engine {record.engine})"]
    explained = record.explained
    if explained is None:
        lines.append(
            "  pre-warm refresh (max_tokens=0), sent as built"
            if record.kind == "refresh"
            else "  sent unchanged (telos disabled for it, or it failed open)"
        )
    elif explained.untouched is not None:
        lines.append(f"  left untouched (sent as the SDK built it): {explained.untouched.detail}")
    else:
        for name, segment, message, block, ttl in explained.breakpoints:
            where = segment if message is None else f"messages[{message}]"
            lines.append(f"  breakpoint {name:7} at {where}[{block}] ttl={ttl}")
        lines.extend(f"  note: {note}" for note in explained.notes)
        # A count of characters only where text moved or was replaced: a reorder moves none.
        lines.extend(
            f"  {kind}: {where}{f' ({chars} chars)' if chars else ''} — {detail}"
            for kind, where, detail, chars in explained.records
        )
    if record.learned is not None:
        lines.append(f"  learned volatile span: {record.learned.describe()}")
    lines.extend(
        f"  adopted from the fleet (learned by another conversation of this application at its "
        f"request {span.learned_at}, verified here): {span.describe()}"
        for span in record.adopted
    )
    if record.application is not None:
        lines.append(f"  application: {record.application}")
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
    if brk.reason == "context_folded":  # planned by the session's policy, not a break to chase
        return (
            f"  CONTEXT FOLD (context_folded) at {brk.where} (~{brk.tokens_at_risk} tokens rewritten "
            f"once): {brk.detail}"
        )
    return f"  CACHE BREAK {brk.reason} at {brk.where} (~{brk.tokens_at_risk} tokens): {brk.detail}"
