"""The Anthropic engine: explicit ``cache_control`` breakpoints (the only vendor with them).

Vendor facts this module relies on (docs/engines.md, *Anthropic breakpoints*; docs/emulator.md, the
Anthropic rules; anthropic 2.12):

* the prompt renders ``tools → system → messages``; a cache entry is written only at a block that
  carries ``cache_control`` and covers the whole prefix up to it;
* a read looks back from each breakpoint over at most 20 positions (a run of consecutive
  ``tool_use`` blocks counts as one position, so does a run of ``tool_result`` blocks);
* at most 4 breakpoints per request, a top-level ``cache_control`` (automatic caching) using one;
* no ``cache_control`` on ``thinking`` / ``redacted_thinking`` or empty text (R6);
* a longer TTL must come before a shorter one in render order.

Plan (seeds: plan_marks): BP-T end of tools, BP-S last PIN system block, BP-R last FOLD system
block (the ref-pool), BP-mid at fixed message positions every 19 (so the lookback keeps finding an
entry written by an earlier request however far the conversation jumps), BP-X on the last non-DROP
block before the DROP tail, and BP-fork when the request diverges from the session's previous
one (``plan(fork=...)``: a rewind or a sibling branch) on the last cacheable non-DROP block before
the first message that differs: the prefix both requests share. Each request reads (and so
refreshes, docs/engines.md) the entries at its breakpoints only, so without BP-fork two
branches alternating slower than the TTL each refresh only their own part and the shared entry
expires (BENCHMARKS.md, *Sibling branches*). Alternating branches keep diverging from their
previous request at the same message, so BP-fork lands on the same block every turn. The
caller's own markers count against the 4 and are kept (the oldest are trimmed only if the caller
alone exceeds the limit). Over budget, ours are dropped by priority
BP-T < BP-S < BP-mid(2nd) < BP-R < BP-mid < BP-fork < BP-X (BP-fork covers system and tools too,
and is only there on a divergent request).

No write nobody reads (issue 34): a cache write costs 1.25x the uncached price and pays only if a
later request reads it (docs/vendor-facts.md §1.4). The tail of a conversation (its own messages past
what an earlier request wrote) is read by no other conversation, so on the request the session
expects to be the conversation's last (``plan(final=N)``: a ``telos_hint`` ``expected_turns``, or
what the fleet saw of the application's conversation lengths, ``sessions/learning/lengths.py``)
BP-X goes on the last block of the first ``N`` messages, which an earlier request wrote: that
prefix is read, the new tail is paid uncached (1x instead of 1.25x), and BP-T / BP-S / BP-R — the
tools and system text other conversations of the application read — are placed as always.

Why one module of ~580 lines: the plan is one priority-ordered choice under the 4-marker budget
(the caller's markers, TTL order, lookback anchors, the fork), and ``emit`` must put each marker at
exactly the location the plan chose (a ``Location`` per breakpoint, ``_block_at``, a caller's
marker kept where it was); split apart, the two would share those private helpers. The usage
parser is already its own module (``anthropic_usage``), and the OpenAI-wire routers reuse this
planner rather than copy it (``chat_breakpoints``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import replace
from operator import itemgetter
from typing import Any, Literal

from telos_wrap.engines.anthropic_usage import AnthropicStreamUsage, parse_anthropic_usage
from telos_wrap.engines.base import Breakpoint, EmitPlan, EngineProfile, PrefixTables, emit_messages
from telos_wrap.errors import TelosInvariantError
from telos_wrap.ir.context import SERVER_EDITS
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Band, BlockKind, TelosBlock, TelosIR, TelosMessage, UsageReport

__all__ = ["FINAL_NOTE", "LOOKBACK", "MAX_BREAKPOINTS", "MID_ANCHOR_STRIDE", "AnthropicEngine"]

MAX_BREAKPOINTS = 4
LOOKBACK = 20
MID_ANCHOR_STRIDE = 19
#: How a plan note starts when BP-X was kept off the conversation's tail (``plan(final=...)``).
FINAL_NOTE = "no cache write past the first"

# Content block types that accept ``cache_control`` (anthropic 2.12 *_block_param types).
_CACHEABLE_TYPES = frozenset(
    {
        "text",
        "image",
        "document",
        "search_result",
        "tool_use",
        "tool_result",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "container_upload",
        "tool_reference",
        "mcp_tool_use",
        "mcp_tool_result",
    }
)
_TTL_RANK = {"5m": 0, "1h": 1}
# Consecutive blocks of these kinds in one message are one lookback position (docs/vendor-facts.md §1.4).
_RUN_KINDS = frozenset({BlockKind.TOOL_USE, BlockKind.TOOL_RESULT})
Segment = Literal["tools", "system", "messages"]
Location = tuple[Segment, int | None, int]
_SEGMENT_RANK = {"tools": 0, "system": 1, "messages": 2}


def _order(bp: Breakpoint) -> tuple[int, int, int]:
    """Render order of a breakpoint's block."""
    return _SEGMENT_RANK[bp.segment], bp.message if bp.message is not None else -1, bp.block


def _cacheable(block: TelosBlock, segment: str) -> bool:
    if segment == "tools":
        return True
    payload = block.payload
    if not isinstance(payload, Mapping) or payload.get("type") not in _CACHEABLE_TYPES:
        return False
    if payload.get("type") == "text":
        text = payload.get("text")
        return isinstance(text, str) and bool(text.strip())
    return True


def _marker_ttl(marker: Any) -> str:
    if isinstance(marker, Mapping) and marker.get("ttl") == "1h":
        return "1h"
    return "5m"


class AnthropicEngine:
    """Engine adapter for the Anthropic Messages API."""

    profile = EngineProfile(
        name="anthropic",
        caching="explicit",
        max_breakpoints=MAX_BREAKPOINTS,
        read_multiplier=0.1,
        write_multiplier=1.25,
    )

    # -- planning -------------------------------------------------------------------------------

    def plan(
        self,
        ir: TelosIR,
        hints: TelosHints,
        *,
        reuse: PrefixTables | None = None,
        fork: int | None = None,
        final: int | None = None,
    ) -> EmitPlan:
        """Decide the breakpoints for ``ir`` (see module docstring).

        With ``reuse`` (a session's ``PrefixTables``) the settled history's summaries come from
        earlier turns, so planning costs what is new in the request, not the conversation's length.
        ``fork`` (from the session): the first message that differs from its previous request.
        ``final`` (from the session): the request is expected to be the conversation's last, and an
        earlier request wrote its first ``final`` messages: BP-X goes on the last block of those
        (a read, no write), so the tail nobody will read is paid uncached instead of at the write
        price (module docstring, *No write nobody reads*).
        """
        notes: list[str] = []
        summaries = _summaries(ir, reuse)
        caller = self._caller_markers(ir, summaries)
        caller = self._keep_ttl_order(ir, caller, notes)
        top_level = 1 if ir.params.get("cache_control") else 0
        allowed = MAX_BREAKPOINTS - top_level
        if len(caller) > allowed:
            dropped = caller[: len(caller) - allowed]
            caller = caller[len(caller) - allowed :]
            notes.append(
                f"trimmed {len(dropped)} of the caller's oldest cache_control markers: the API accepts "
                f"{MAX_BREAKPOINTS} per request"
            )
        taken = {(bp.segment, bp.message, bp.block) for bp in caller}
        slots = allowed - len(caller)
        stable_ttl = "1h" if hints.ttl == "1h" else "5m"
        ours: list[Breakpoint] = []
        candidates, final_request = self._candidates(ir, summaries, stable_ttl, fork, final, notes)
        for name, location, ttl in candidates:
            if slots <= 0:
                break
            if location is None or location in taken:
                continue
            segment, message, block = location
            ours.append(Breakpoint(name=name, segment=segment, message=message, block=block, ttl=ttl))
            if name == "BP-fork":
                where = f"{segment}[{block}]" if message is None else f"messages[{message}][{block}]"
                if any(r.kind == SERVER_EDITS and r.where == f"messages[{fork}:]" for r in ir.records):
                    notes.append(
                        f"BP-fork on {where}: before message {fork}, the first one the caller's "
                        "context_management may clear on a later request (Anthropic edits server side, "
                        "afresh each request); the prefix before it reads the same then, so it is read "
                        "from the cache instead of written again"
                    )
                else:
                    notes.append(
                        f"BP-fork on {where}: this request differs from the session's previous one from "
                        f"message {fork} on (a rewind or a sibling branch); the marker keeps the shared "
                        "prefix read, so its cache entry stays alive for the other branch"
                    )
            taken.add(location)
            slots -= 1
        breakpoints = tuple(caller) + tuple(self._fix_ttl_order(ours, caller))
        self._check(breakpoints, top_level)
        return EmitPlan(breakpoints=breakpoints, notes=tuple(notes), final_request=final_request)

    @staticmethod
    def _keep_ttl_order(ir: TelosIR, caller: list[Breakpoint], notes: list[str]) -> list[Breakpoint]:
        """The caller's markers in an order the API accepts, after telos moved the blocks they are on.

        Telos moves a few blocks (a pooled system document goes after the PIN system blocks, an
        envelope to the end of its message or of the latest turn), and a marker moves with its
        block: a 1h marker can land after a 5m one, which the API rejects (longer TTLs must come
        first, docs/engines.md). Such a marker is placed, with its TTL, on the last cacheable
        non-DROP block before the earliest shorter marker in front of it: the longest prefix a
        marker of that TTL can validly cover. If that block already carries a marker, or there
        is none, the moved marker is dropped. Each case is a plan note (``session.explain``).
        TTLs are never changed.
        """
        kept: list[Breakpoint] = []
        for bp in caller:
            rank = _TTL_RANK[bp.ttl or "5m"]
            shorter = next((k for k in kept if _TTL_RANK[k.ttl or "5m"] < rank), None)
            if shorter is None:
                kept.append(bp)
                continue
            here = (
                f"{bp.segment}[{bp.block}]" if bp.message is None else f"messages[{bp.message}][{bp.block}]"
            )
            target = _cacheable_before(ir, (shorter.segment, shorter.message, shorter.block))
            if target is None or target in {(k.segment, k.message, k.block) for k in kept}:
                notes.append(
                    f"the caller's {bp.ttl} cache_control at {here} follows a shorter one once telos "
                    "moved its block, and no earlier block can take it: dropped (longer TTLs must come "
                    "first)"
                )
                continue
            segment, message, block = target
            moved = Breakpoint(
                "caller", segment, message, block, bp.ttl, origin=(bp.segment, bp.message, bp.block)
            )
            kept.append(moved)
            kept.sort(key=_order)
            there = f"{segment}[{block}]" if message is None else f"messages[{message}][{block}]"
            notes.append(
                f"the caller's {bp.ttl} cache_control at {here} follows a shorter one once telos moved "
                f"its block: placed on {there}, the last block before the shorter one"
            )
        return kept

    @staticmethod
    def _check(breakpoints: tuple[Breakpoint, ...], top_level: int) -> None:
        """Refuse a plan the API would reject (the call then fails open with the caller's request)."""
        if len(breakpoints) + top_level > MAX_BREAKPOINTS:
            raise TelosInvariantError(
                f"{len(breakpoints) + top_level} breakpoints planned; the API accepts {MAX_BREAKPOINTS}",
                segment="prompt",
            )
        longest_after = "5m"
        for bp in sorted(breakpoints, key=_order, reverse=True):
            ttl = bp.ttl or "5m"
            if _TTL_RANK[ttl] < _TTL_RANK[longest_after]:
                where = bp.segment if bp.message is None else f"messages[{bp.message}]"
                raise TelosInvariantError(
                    f"a {longest_after} cache breakpoint would follow a {ttl} one at {where}[{bp.block}] "
                    "(longer TTLs must come first); the caller's markers are never re-timed",
                    segment=bp.segment,
                    index=bp.block,
                )
            longest_after = max(longest_after, ttl, key=_TTL_RANK.__getitem__)

    @staticmethod
    def _caller_markers(ir: TelosIR, summaries: list[_Summary]) -> list[Breakpoint]:
        """The caller's own ``cache_control`` markers, in render order."""
        found = [
            Breakpoint("caller", "tools", None, index, _marker_ttl(block.extra["cache_control"]))
            for index, block in enumerate(ir.tools)
            if "cache_control" in block.extra
        ]
        found.extend(
            Breakpoint("caller", "system", None, index, _marker_ttl(block.extra["cache_control"]))
            for index, block in enumerate(ir.system)
            if "cache_control" in block.extra
        )
        in_messages: list[Breakpoint] = []
        _, _, m_index = summaries[-1] if summaries else _NOTHING
        while m_index >= 0:  # the chain of marked messages, newest first
            blocks = ir.messages[m_index].blocks
            for index in range(len(blocks) - 1, -1, -1):
                if "cache_control" in blocks[index].extra:
                    ttl = _marker_ttl(blocks[index].extra["cache_control"])
                    in_messages.append(Breakpoint("caller", "messages", m_index, index, ttl))
            _, _, m_index = summaries[m_index - 1] if m_index > 0 else _NOTHING
        return found + in_messages[::-1]

    def _candidates(
        self,
        ir: TelosIR,
        summaries: list[_Summary],
        stable_ttl: str,
        fork: int | None,
        final: int | None = None,
        notes: list[str] | None = None,
    ) -> tuple[list[tuple[str, Location | None, str]], bool]:
        """The breakpoint candidates in priority order, and whether ``final`` moved BP-X."""
        x_location = _last_cacheable_before_drop(ir, summaries)
        bp_x: Location | None = None if x_location is None else ("messages", *x_location)
        final_request = False
        if final is not None and bp_x is not None:
            covered = _fork_anchor(ir, final, bp_x) if final > 0 else None
            if covered != bp_x:
                final_request = True
                x_location = None if covered is None else (covered[1] or 0, covered[2])
                if notes is not None:
                    where = (
                        "not placed (no earlier request wrote any of them; the tools and system "
                        "text are marked as always)"
                        if covered is None
                        else f"on messages[{covered[1]}][{covered[2]}], the end of what an earlier "
                        "request wrote (read, not written again)"
                    )
                    notes.append(
                        f"{FINAL_NOTE} {final} messages: the session expects this to be the "
                        f"conversation's last request, so a cache entry of its tail would not be "
                        f"read; BP-X {where}"
                    )
                bp_x = covered
        bp_fork = _fork_anchor(ir, fork, bp_x)
        mids = _mid_anchors(ir, summaries, x_location)
        system_pin = [
            i for i, block in enumerate(ir.system) if block.band is Band.PIN and _cacheable(block, "system")
        ]
        system_fold = [
            i for i, block in enumerate(ir.system) if block.band is Band.FOLD and _cacheable(block, "system")
        ]
        bp_s: Location | None = ("system", None, system_pin[-1]) if system_pin else None
        bp_r: Location | None = ("system", None, system_fold[-1]) if system_fold else None
        bp_t: Location | None = ("tools", None, len(ir.tools) - 1) if ir.tools else None
        return [
            ("BP-X", bp_x, "5m"),
            ("BP-fork", bp_fork, "5m"),
            ("BP-mid", mids[0] if mids else None, "5m"),
            ("BP-R", bp_r, stable_ttl),
            ("BP-S", bp_s, stable_ttl),
            ("BP-mid", mids[1] if len(mids) > 1 else None, "5m"),
            ("BP-T", bp_t, stable_ttl),
        ], final_request

    @staticmethod
    def _fix_ttl_order(ours: list[Breakpoint], caller: list[Breakpoint]) -> list[Breakpoint]:
        """Fit our TTLs around the caller's markers (longer TTLs must come first in render order).

        Ours may never be longer than a caller's marker before them, and are raised to match a
        longer one after them; the caller's own TTLs are never changed.
        """
        if not caller and len({_TTL_RANK[bp.ttl or "5m"] for bp in ours}) <= 1:
            return list(ours)  # one TTL and no caller's marker: nothing to cap or raise
        tagged = sorted(
            [*((bp, True) for bp in ours), *((bp, False) for bp in caller)], key=lambda p: _order(p[0])
        )
        cap = "1h"
        capped: list[tuple[Breakpoint, bool]] = []
        for bp, is_ours in tagged:
            ttl = bp.ttl or "5m"
            if not is_ours:
                cap = min(cap, ttl, key=_TTL_RANK.__getitem__)
            elif _TTL_RANK[ttl] > _TTL_RANK[cap]:
                bp = replace(bp, ttl=cap)
            capped.append((bp, is_ours))
        longest_after = "5m"
        fixed: dict[tuple[int, int, int], Breakpoint] = {}
        for bp, is_ours in reversed(capped):
            ttl = bp.ttl or "5m"
            if is_ours and _TTL_RANK[longest_after] > _TTL_RANK[ttl]:
                ttl = longest_after
                bp = replace(bp, ttl=ttl)
            longest_after = max(longest_after, ttl, key=_TTL_RANK.__getitem__)
            if is_ours:
                fixed[_order(bp)] = bp
        return [fixed[_order(bp)] for bp in ours]

    # -- emitting -------------------------------------------------------------------------------

    def emit(self, ir: TelosIR, plan: EmitPlan, *, reuse: PrefixTables | None = None) -> dict[str, Any]:
        """Write the Anthropic body for ``ir`` with ``plan``'s markers; keys in canonical order.

        With ``reuse`` (a session's ``PrefixTables``) the wire form of each settled history message
        is built once and shared by later turns (read-only); only messages carrying a marker this
        turn, and the new ones, are written afresh.
        """
        markers: dict[Location, Any] = {}
        for bp in plan.breakpoints:
            location: Location = (bp.segment, bp.message, bp.block)
            if bp.name == "caller":
                markers[location] = self._block_at(ir, bp.origin or location).extra["cache_control"]
            else:
                markers[location] = (
                    {"type": "ephemeral", "ttl": "1h"} if bp.ttl == "1h" else {"type": "ephemeral"}
                )
        body: dict[str, Any] = dict(ir.params)
        if ir.tools_form == "list":
            body["tools"] = [
                _with_marker(t.payload, markers.get(("tools", None, i))) for i, t in enumerate(ir.tools)
            ]
        if ir.system_form != "absent" or ir.system:
            # Always blocks, even for a string system prompt: see ``_emit_message``.
            body["system"] = [
                _with_marker(b.payload, markers.get(("system", None, i))) for i, b in enumerate(ir.system)
            ]
        marked = {bp.message for bp in plan.breakpoints if bp.message is not None}
        body["messages"] = emit_messages(
            ir,
            lambda message, index, marks: self._emit_message(message, index, markers if marks else {}),
            marked,
            reuse,
            _WIRE_TABLE,
        )
        if plan.extras:
            body.update(plan.extras)
        return dict(sorted(body.items()))

    @staticmethod
    def _emit_message(message: TelosMessage, m_index: int, markers: Mapping[Location, Any]) -> dict[str, Any]:
        wire: dict[str, Any] = dict(message.extra)
        wire["role"] = message.role
        if message.content_form in ("absent", "null"):
            return dict(sorted(wire.items()))
        # String content is always sent as its one text block (the API's own equivalent of the
        # string, docs/engines.md): any message can carry a breakpoint on some turn (BP-X on each
        # user turn, BP-mid at fixed positions, the moved envelope on the latest turn) and not on
        # the next, and a string that became a list for one turn would re-send it in another shape.
        wire["content"] = [
            _with_marker(b.payload, markers.get(("messages", m_index, i)))
            for i, b in enumerate(message.blocks)
        ]
        return dict(sorted(wire.items()))

    @staticmethod
    def _block_at(ir: TelosIR, location: Location) -> TelosBlock:
        segment, message, block = location
        if segment == "tools":
            return ir.tools[block]
        if segment == "system":
            return ir.system[block]
        assert message is not None
        return ir.messages[message].blocks[block]

    # -- usage ----------------------------------------------------------------------------------

    def parse_usage(
        self, usage: Mapping[str, Any] | None, *, diagnostics: Mapping[str, Any] | None = None
    ) -> UsageReport | None:
        """The ``UsageReport`` of a Messages response's ``usage`` (``anthropic_usage.py``)."""
        return parse_anthropic_usage(usage, diagnostics=diagnostics)

    def stream_usage(self) -> AnthropicStreamUsage:
        """A fresh accumulator of a Messages stream's usage (``message_start`` then ``message_delta``)."""
        return AnthropicStreamUsage()


_PLAN_TABLE = "anthropic.plan"
_WIRE_TABLE = "anthropic.wire"


#: What planning needs of messages ``0..i`` (a prefix property, so settled entries stay valid):
#: ``(positions, first_drop, marked)``, read by unpacking (``_NOTHING`` before the first message).
#:
#: * positions: lookback positions in messages ``0..i`` (a run of tool_use or of tool_result blocks
#:   in one message counts as one, like the API's lookback);
#: * first_drop: the first message with a DROP block among ``0..i``, or -1;
#: * marked: the last message carrying a caller's ``cache_control`` among ``0..i``, or -1.
#:
#: A plain tuple, not a NamedTuple: a session keeps one per message, and CPython's collector stops
#: tracking an exact tuple of ints but never a NamedTuple (docs/sessions.md;
#: tests/sessions/test_gc_footprint.py counts the tracked objects a turn leaves).
_Summary = tuple[int, int, int]
#: The summary of no message at all.
_NOTHING: _Summary = (0, -1, -1)


#: A summary's lookback positions (the key ``_mid_anchors`` bisects the summaries on).
_positions = itemgetter(0)


def _run_ends(blocks: Sequence[TelosBlock], limit: int) -> list[int]:
    """Index of the last block of each lookback position among ``blocks[:limit]``."""
    ends: list[int] = []
    previous: BlockKind | None = None
    for index in range(limit):
        kind = blocks[index].kind
        if kind is previous and kind in _RUN_KINDS:
            ends[-1] = index
        else:
            ends.append(index)
        previous = kind
    return ends


def _summaries(ir: TelosIR, reuse: PrefixTables | None) -> list[_Summary]:
    """One ``_Summary`` per message; the rows ``reuse`` still holds for these messages are reused."""
    table: list[_Summary] = reuse.rows(_PLAN_TABLE, ir.messages) if reuse is not None else []
    positions, first_drop, marked = table[-1] if table else _NOTHING
    for m_index in range(len(table), len(ir.messages)):
        blocks = ir.messages[m_index].blocks
        positions += len(_run_ends(blocks, len(blocks)))
        if first_drop < 0 and any(block.band is Band.DROP for block in blocks):
            first_drop = m_index
        if any("cache_control" in block.extra for block in blocks):
            marked = m_index
        table.append((positions, first_drop, marked))
    return table


def _cacheable_at_or_before(ir: TelosIR, m_index: int, b_index: int) -> tuple[int, int] | None:
    """The last message block that can carry a marker at or before ``(m_index, b_index)``."""
    while m_index >= 0:
        blocks = ir.messages[m_index].blocks
        for index in range(min(b_index, len(blocks) - 1), -1, -1):
            if _cacheable(blocks[index], "messages"):
                return m_index, index
        m_index -= 1
        b_index = len(ir.messages[m_index].blocks) - 1 if m_index >= 0 else -1
    return None


def _cacheable_before(ir: TelosIR, location: Location) -> Location | None:
    """The last block before ``location`` in render order that can carry a marker and is not DROP."""
    segment, m_index, b_index = location
    if segment == "messages":
        assert m_index is not None
        while m_index >= 0:
            blocks = ir.messages[m_index].blocks
            for index in range(min(b_index, len(blocks)) - 1, -1, -1):
                if blocks[index].band is not Band.DROP and _cacheable(blocks[index], "messages"):
                    return "messages", m_index, index
            m_index -= 1
            b_index = len(ir.messages[m_index].blocks) if m_index >= 0 else 0
        segment, b_index = "system", len(ir.system)
    if segment == "system":
        for index in range(min(b_index, len(ir.system)) - 1, -1, -1):
            if ir.system[index].band is not Band.DROP and _cacheable(ir.system[index], "system"):
                return "system", None, index
        segment, b_index = "tools", len(ir.tools)
    return ("tools", None, min(b_index, len(ir.tools)) - 1) if min(b_index, len(ir.tools)) > 0 else None


def _last_cacheable_before_drop(ir: TelosIR, summaries: list[_Summary]) -> tuple[int, int] | None:
    """Where BP-X goes: the last cacheable message block before the first DROP block."""
    if not summaries:
        return None
    _, first_drop, _ = summaries[-1]
    if first_drop < 0:
        return _cacheable_at_or_before(ir, len(ir.messages) - 1, len(ir.messages[-1].blocks) - 1)
    blocks = ir.messages[first_drop].blocks
    drop_block = next(index for index, block in enumerate(blocks) if block.band is Band.DROP)
    return _cacheable_at_or_before(ir, first_drop, drop_block - 1)


def _fork_anchor(ir: TelosIR, fork: int | None, bp_x: Location | None) -> Location | None:
    """Where BP-fork goes: the last cacheable non-DROP block before message ``fork``.

    Never after BP-X (the last cacheable block before the first DROP block), so the marker never
    covers a DROP block (I3); ``None`` without a divergence or when no such block exists.
    """
    if fork is None or bp_x is None or not 0 < fork <= len(ir.messages):
        return None
    last = fork - 1  # the location just past the last block of message ``fork - 1``
    location = _cacheable_before(ir, ("messages", last, len(ir.messages[last].blocks)))
    if location is None or location[0] != "messages" or _order_of(location) > _order_of(bp_x):
        return None
    return location


def _order_of(location: Location) -> tuple[int, int, int]:
    segment, message, block = location
    return _SEGMENT_RANK[segment], message if message is not None else -1, block


def _mid_anchors(
    ir: TelosIR, summaries: list[_Summary], x_location: tuple[int, int] | None
) -> list[Location]:
    """The two latest fixed anchors before BP-X, at lookback positions STRIDE-1, 2*STRIDE-1, ...

    Positions count like the API's lookback and only depend on the content before them, so an
    anchor never moves as the conversation grows.
    """
    if x_location is None:
        return []
    x_message, x_block = x_location

    def before(m_index: int) -> int:  # positions in the messages before ``m_index``
        positions, _, _ = summaries[m_index - 1] if m_index > 0 else _NOTHING
        return positions

    x_run_ends = _run_ends(ir.messages[x_message].blocks, x_block)
    positions = before(x_message) + len(x_run_ends)  # positions strictly before BP-X's block
    anchors: list[Location] = []
    position = (positions // MID_ANCHOR_STRIDE) * MID_ANCHOR_STRIDE - 1
    while position >= 0 and len(anchors) < 2:
        if position >= before(x_message):
            m_index, ends = x_message, x_run_ends
        else:
            m_index = bisect_right(summaries, position, hi=x_message, key=_positions)
            blocks = ir.messages[m_index].blocks
            ends = _run_ends(blocks, len(blocks))
        found = _cacheable_at_or_before(ir, m_index, ends[position - before(m_index)])
        if found is not None:
            anchors.append(("messages", *found))
        position -= MID_ANCHOR_STRIDE
    return anchors


def _with_marker(payload: Any, marker: Any) -> Any:
    if marker is None or not isinstance(payload, Mapping):
        return payload
    return dict(sorted({**payload, "cache_control": marker}.items()))
