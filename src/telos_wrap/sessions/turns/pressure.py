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
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from telos_wrap.ir.context import ContextPolicy
from telos_wrap.sessions.durable.records import THINKING_CALL

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
    """

    message: int
    call: str
    name: str
    tokens: int
    input_tokens: int = 0
    offset: int = 0

    def key(self) -> tuple[int, str]:
        return self.message, self.call


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
) -> Decision:
    """The tool results to clear before this request goes out (see the module docstring)."""
    trigger = policy.trigger_for(window)
    if trigger is None:
        return Decision(note="context policy: the trigger is a fraction of a window telos does not know")
    if total <= trigger:
        return Decision(trigger=trigger)
    results = [unit for unit in units if unit.call != THINKING_CALL]
    thinking = [unit for unit in units if unit.call == THINKING_CALL]
    kept = {unit.key() for unit in _latest(results, policy.keep if policy.clear_results else None)}
    kept |= {unit.key() for unit in _latest(thinking, policy.clear_thinking)}
    excluded = set(policy.exclude_tools)
    candidates = tuple(
        unit
        for unit in units
        if unit.key() not in folded
        and unit.key() not in kept
        and unit.message < current
        and (unit.call == THINKING_CALL or unit.name not in excluded)
        and _size(unit, policy) > 0
    )
    cleared = sum(_size(unit, policy) for unit in candidates)
    over_window = window is not None and total > window
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


def _what(units: Sequence[Unit]) -> str:
    thinking = sum(1 for unit in units if unit.call == THINKING_CALL)
    results = len(units) - thinking
    parts = [
        f"{results} tool result(s)" if results else "",
        f"the thinking of {thinking} turn(s)" if thinking else "",
    ]
    return " and ".join(part for part in parts if part)


def _latest(units: Sequence[Unit], keep: int | None) -> Sequence[Unit]:
    """The ``keep`` latest of ``units`` (``None``: all of them, that kind is never folded)."""
    if keep is None:
        return units
    return units[len(units) - keep :] if keep else ()


def _size(unit: Unit, policy: ContextPolicy) -> int:
    return unit.tokens + (unit.input_tokens if policy.clear_tool_inputs else 0)
