"""When and where a session folds old tool results under pressure: a pure planner (no SDK, no I/O).

``plan_folds(units, total, current, policy, window, folded)`` answers, before a request goes out,
which tool results the session clears now. Its inputs are plain numbers: each tool use of the
request in order (``Unit``: where its result is, its tool's name, its estimated tokens), the
request's estimated input tokens with the earlier folds applied, where the current turn starts, the
policy (``telos_wrap.ir.context.ContextPolicy``), the model's window and what was folded before.

The rule (docs/sessions.md, "Context under pressure"):

* nothing is cleared while the request stays at or below the trigger;
* past it, every tool result not already cleared is cleared at once, except the ``keep`` most recent
  tool uses, the tools in ``exclude_tools`` and the current turn (the latest assistant message and
  what answers it) — one large step, so folds are rare;
* a step that would clear fewer than ``clear_at_least`` tokens waits (each fold costs one rewrite of
  everything after its point), unless the request would not fit the model's window at all;
* what was cleared stays cleared: the answer only adds to ``folded`` (the session records it, and
  every later request and worker sends the same bytes).

Because the earlier folds are kept, the first result a new fold clears comes after everything the
earlier ones cleared: the cached prefix up to that point is read as before, and the fold costs one
write of what follows it. ``Decision.explain`` says it with numbers.

A tool use and its result stay a pair: a fold replaces a result's content (and, with
``clear_tool_inputs``, the call's input), never removes either block. Thinking is folded only with
``clear_thinking`` (a unit whose ``call`` is ``THINKING_CALL``: the thinking blocks of one earlier
assistant message, removed whole, as Anthropic lets a client omit earlier turns' thinking), in the
same step as the results, keeping the latest ``clear_thinking`` thinking turns; the current turn's
thinking is never a unit (Anthropic requires it sent back as it was; docs/vendor-facts.md §9.2).

**File blocks** (the seeds' ``<file path=…>`` rule, ``sessions/turns/files.py``; a unit whose
``call`` starts with ``FILE_CALL_PREFIX``: the file blocks of one path in the text of one message)
are folded with the results, by the same rule, only where the model no longer needs them:

* never in the kept window: the messages from the oldest of the ``keep`` latest tool uses (its
  call) on, and never in the current turn;
* never a file the kept window still names (a tool call that edits it, a message that mentions
  it: ``refs_until``, the last later message naming the path, at or after the window) unless a copy
  of it survives the fold: one the window carries itself, or a later copy in the text of a message
  (the latest such copy is named by the window too, so it stays): ``copy_until``;
* a file block before the step's fold point moves that point back, so what lies between (less the
  file itself) is written once more: it joins the step only when what it saves on later requests
  pays for that rewrite (``tokens x read x horizon >= extra x (write - read)``, the engine's
  multipliers; the horizon is the requests until the trigger is passed again with it folded, or the
  requests the session has sent so far if more: a session that has run N requests is expected to
  run about N more), or when the request would not fit the window otherwise. An engine whose
  cached reads are free (vLLM, SGLang) saves nothing that way, and folds such a file only then. A
  file block that waits is weighed again at the next fold;
* with ``clear_results`` off (a thinking-only policy) file blocks stay too.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from telos_wrap.ir.context import ContextPolicy
from telos_wrap.sessions.durable.records import FILE_CALL_PREFIX, THINKING_CALL

__all__ = ["Decision", "Unit", "plan_folds"]


@dataclass(frozen=True, slots=True)
class Unit:
    """One tool use of the request and its result, as the planner sees it.

    Attributes:
        message: the application message index of the result.
        call: the tool call's key (a digest of its id) within that message.
        name: the tool's name (compared with ``exclude_tools``).
        tokens: estimated tokens of the result as it would be sent now.
        input_tokens: estimated tokens of the call's input (cleared with ``clear_tool_inputs``).
        offset: estimated tokens of the request before the result's message (the fold point).
        use: the message holding the tool call (-1: the result's own message counts).
        refs_until: for a file unit, the last later message that names its path (-1: none).
        copy_until: for a file unit, the last later message carrying a copy of the file inside a
            tool result, or the message count when a later message carries one in its text (-1:
            none): a copy at or after the kept window survives the fold.
    """

    message: int
    call: str
    name: str
    tokens: int
    input_tokens: int = 0
    offset: int = 0
    use: int = -1
    refs_until: int = -1
    copy_until: int = -1

    def key(self) -> tuple[int, str]:
        """``(message, call)``: names the unit within the request, as ``ClearFold.key`` names the unit a
        recorded fold cleared (the planner skips units already folded by it)."""
        return self.message, self.call

    @property
    def file(self) -> bool:
        """Whether this unit is the file blocks of one path in one message."""
        return self.call.startswith(FILE_CALL_PREFIX)


@dataclass(frozen=True, slots=True)
class Decision:
    """What ``plan_folds`` decided.

    Attributes:
        fold: the units to clear now, in request order (empty: nothing to fold).
        cleared: estimated tokens the fold removes from this and every later request.
        rewrite: estimated tokens written again once, from the fold point to the end of the request.
        trigger: the trigger in tokens (``None`` when it cannot be known: a fraction of an unknown window).
        note: one sentence for ``explain`` (why a fold happened, or why none could).
    """

    fold: tuple[Unit, ...] = ()
    cleared: int = 0
    rewrite: int = 0
    trigger: int | None = None
    note: str = ""

    def explain(self, read: float, write: float) -> str:
        """The fold's expected cost and saving, with the engine's multipliers of the input price."""
        if not self.fold:
            return self.note
        extra = self.rewrite * (write - read)
        saved = self.cleared * read
        payback = f"; pays back after {extra / saved:.1f} requests" if saved > 0 else ""
        return (
            f"{self.note}: ~{self.cleared:,} tokens fewer on this and every later request "
            f"({saved:,.0f} uncached-token units saved per request at {read}x reads); one rewrite of "
            f"~{self.rewrite:,} tokens after the fold point ({extra:,.0f} units at {write}x writes){payback}"
        )


def plan_folds(
    units: Sequence[Unit],
    total: int,
    current: int,
    policy: ContextPolicy,
    window: int | None,
    folded: Collection[tuple[int, str]] = (),
    *,
    read: float = 0.1,
    write: float = 1.25,
    turn: int = 0,
    requests: int = 0,
) -> Decision:
    """The tool results (and thinking, and file blocks) to clear before this request goes out (see
    the module docstring). ``read`` / ``write``: the engine's multipliers of the input price;
    ``turn``: the tokens the latest turn added (the growth per request); ``requests``: the requests
    the session sent before this one."""
    trigger = policy.trigger_for(window)
    if trigger is None:
        return Decision(note="context policy: the trigger is a fraction of a window telos does not know")
    if total <= trigger:
        return Decision(trigger=trigger)
    results = [unit for unit in units if unit.call != THINKING_CALL and not unit.file]
    thinking = [unit for unit in units if unit.call == THINKING_CALL]
    kept_results = _latest(results, policy.keep if policy.clear_results else None)
    kept = {unit.key() for unit in kept_results}
    kept |= {unit.key() for unit in _latest(thinking, policy.clear_thinking)}
    excluded = set(policy.exclude_tools)
    candidates = tuple(
        unit
        for unit in units
        if not unit.file
        and unit.key() not in folded
        and unit.key() not in kept
        and unit.message < current
        and (unit.call == THINKING_CALL or unit.name not in excluded)
        and _size(unit, policy) > 0
    )
    over_window = window is not None and total > window
    files = _files(units, policy, folded, current, kept_results)
    if files:
        growth = (turn, requests)
        candidates = _with_files(candidates, files, total, trigger, growth, (read, write), over_window)
    cleared = sum(_size(unit, policy) for unit in candidates)
    if not candidates or cleared == 0:
        return Decision(
            trigger=trigger,
            note=f"context policy: {total:,} tokens is past the trigger ({trigger:,}) but no tool result "
            "can be cleared (the rest are kept, excluded or in the current turn)",
        )
    if cleared < policy.clear_at_least and not over_window:
        return Decision(
            trigger=trigger,
            note=f"context policy: {total:,} tokens is past the trigger ({trigger:,}), but clearing now "
            f"would remove only ~{cleared:,} tokens, fewer than clear_at_least ({policy.clear_at_least:,})",
        )
    rewrite = max(0, total - cleared - candidates[0].offset)
    return Decision(
        fold=candidates,
        cleared=cleared,
        rewrite=rewrite,
        trigger=trigger,
        note=f"context policy folded {_what(candidates)}: the request had ~{total:,} tokens, "
        f"past the trigger ({trigger:,})",
    )


def _files(
    units: Sequence[Unit],
    policy: ContextPolicy,
    folded: Collection[tuple[int, str]],
    current: int,
    kept: Sequence[Unit],
) -> list[Unit]:
    """The file units the policy may fold: before the kept window (its oldest kept tool use's call)
    and the current turn, and not one the window still names unless a copy of it survives."""
    if not policy.clear_results:
        return []
    start = min([current, *(unit.use if unit.use >= 0 else unit.message for unit in kept)])
    return [
        unit
        for unit in units
        if unit.file
        and unit.key() not in folded
        and unit.message < start
        and (unit.refs_until < start or unit.copy_until >= start)
        and unit.tokens > 0
    ]


def _with_files(
    base: Sequence[Unit],
    files: Sequence[Unit],
    total: int,
    trigger: int,
    growth: tuple[int, int],
    prices: tuple[float, float],
    over_window: bool,
) -> tuple[Unit, ...]:
    """``base`` (the results and thinking to clear) with the file units worth clearing with them:
    those at or after the fold point free, those before it when their saving on later requests pays
    for the extra rewrite (the module docstring)."""
    read, write = prices
    turn, requests = growth
    chosen = list(base)
    rest = list(files)
    if not chosen:  # files alone: the latest message's files set the fold point
        last = rest[-1].message
        chosen = [unit for unit in rest if unit.message == last]
        rest = [unit for unit in rest if unit.message != last]
    point = min(unit.offset for unit in chosen)
    cleared = sum(unit.tokens for unit in chosen)
    skipped: list[Unit] = []
    groups: dict[int, list[Unit]] = {}
    for unit in rest:  # a message's file blocks go together (one rewrite point)
        groups.setdefault(unit.message, []).append(unit)
    for message in sorted(groups, reverse=True):
        group = groups[message]
        offset, tokens = group[0].offset, sum(unit.tokens for unit in group)
        extra = max(0, point - offset - tokens)  # what stays between it and the point
        # The requests the saving is counted over: until the trigger is passed again (these files
        # folded too), or as many as the session has sent so far if more (a session that has run
        # N requests is expected to run about N more).
        room = trigger - (total - cleared - tokens)
        horizon = max(1, requests, room // turn + 1 if turn > 0 else 1)
        if over_window or tokens * read * horizon >= extra * (write - read):
            chosen += group
            point = min(point, offset)
            cleared += tokens
        else:
            skipped += group
    chosen += [unit for unit in skipped if unit.offset >= point]  # after a later-chosen point: free
    return tuple(sorted(chosen, key=lambda u: u.message))  # stable: the base's order within a message


def _what(units: Sequence[Unit]) -> str:
    thinking = sum(1 for unit in units if unit.call == THINKING_CALL)
    files = sum(1 for unit in units if unit.file)
    results = len(units) - thinking - files
    parts = [
        f"{results} tool result(s)" if results else "",
        f"the thinking of {thinking} turn(s)" if thinking else "",
        f"{files} file block(s)" if files else "",
    ]
    return " and ".join(part for part in parts if part)


def _latest(units: Sequence[Unit], keep: int | None) -> Sequence[Unit]:
    """The ``keep`` latest of ``units`` (``None``: all of them, that kind is never folded)."""
    if keep is None:
        return units
    return units[max(0, len(units) - keep) :] if keep else ()


def _size(unit: Unit, policy: ContextPolicy) -> int:
    return unit.tokens + (unit.input_tokens if policy.clear_tool_inputs else 0)
