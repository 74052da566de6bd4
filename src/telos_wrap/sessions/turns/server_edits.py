"""What Anthropic's server-side context editing will clear from a request (pure: no SDK, no I/O).

A caller who sets Anthropic's ``context_management`` keeps it as sent: telos never edits it. The
server applies the edits afresh to every request before the prompt reaches the model and the cache
(docs/vendor-facts.md §9.2), so the bytes the model sees differ from the bytes sent, and each time
the edit reaches further (a tool use leaves the ``keep`` window, a thinking turn leaves its own),
the cached prefix from there on is written again. ``predict(ir, measured)`` reads the caller's
edits and the request and says, with telos' token estimates:

* what the server clears on this request (tool results, thinking turns, tokens, the first message);
* the **frontier**: the first message it does not clear now but may clear on a later request (the
  oldest kept tool result, or with ``clear_tool_inputs`` its call; the oldest kept thinking turn).
  The prefix before the frontier reads the same on this request and the next, so the session marks
  it (the Anthropic engine's BP-fork on the last block before it): the next request reads it from
  the cache instead of writing everything after the last point the server edited.

Only while the server edits something now is the frontier marked: below the trigger the edit
changes nothing and the usual breakpoints read the whole prefix. Edits telos cannot read (an
unknown type, a malformed value) predict nothing: the request goes out as sent either way. So do
edits the vendor refuses (``refused(ir)``: ``clear_thinking_20251015`` without extended thinking
enabled, or not first among several edits; docs/vendor-facts.md §9.2): the vendor answers 400, which
reaches the caller untouched, and there is no prefix of theirs to mark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from telos_wrap.ir.canon import canonical_json
from telos_wrap.ir.model import BlockKind, TelosIR
from telos_wrap.sessions.turns.clearing import Measured

__all__ = ["ServerEdits", "predict", "refused"]

_TOOL_USES = "clear_tool_uses_20250919"
_THINKING = "clear_thinking_20251015"
_THINKING_TYPES = ("thinking", "redacted_thinking")


@dataclass(frozen=True, slots=True)
class ServerEdits:
    """What the caller's ``context_management`` clears from this request (estimates).

    Attributes:
        results: tool results the server clears on this request.
        thinking: assistant turns whose thinking it clears.
        tokens: estimated tokens those hold.
        first: the first message it edits on this request (``None``: none).
        frontier: the first message it may edit on a later request but not on this one (``None``:
            none, or nothing is edited now).
    """

    results: int = 0
    thinking: int = 0
    tokens: int = 0
    first: int | None = None
    frontier: int | None = None

    def describe(self, marked: bool = True) -> str:
        """One sentence for ``explain`` (counts and positions, no text); ``marked``: the session put
        BP-fork before the frontier (not when the request already diverged or folded there)."""
        parts = []
        if self.results:
            parts.append(f"{self.results} tool result(s)")
        if self.thinking:
            parts.append(f"the thinking of {self.thinking} assistant turn(s)")
        what = " and ".join(parts) or "nothing"
        where = f" from message {self.first} on" if self.first is not None else ""
        mark = (
            f"; the prefix before message {self.frontier} (the first it may clear on a later request) "
            "is marked so the next request reads it from the cache"
            if self.frontier is not None and marked
            else ""
        )
        return (
            f"the caller's context_management (Anthropic's server-side context editing, sent as written) "
            f"clears {what}{where} (~{self.tokens:,} tokens) before the prompt reaches the cache; "
            f"not a cache break{mark}"
        )


def _value(spec: Any, default: int | None) -> int | None:
    if spec is None:
        return default
    if (
        isinstance(spec, Mapping)
        and isinstance(spec.get("value"), int)
        and not isinstance(spec["value"], bool)
    ):
        return int(spec["value"])
    return None


def _edits(ir: TelosIR) -> Sequence[Mapping[str, Any]]:
    management = ir.params.get("context_management")
    edits = management.get("edits") if isinstance(management, Mapping) else None
    return [e for e in edits if isinstance(e, Mapping)] if isinstance(edits, list) else ()


def refused(ir: TelosIR) -> str | None:
    """Why Anthropic refuses the request's ``context_management`` (``None``: it does not, as far as
    telos knows): ``clear_thinking_20251015`` needs extended thinking enabled (a ``thinking`` object
    of a type other than ``"disabled"``) and, with other edits, must come first (§9.2)."""
    kinds = [edit.get("type") for edit in _edits(ir)]
    if _THINKING not in kinds:
        return None
    thinking = ir.params.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") in (None, "disabled"):
        return f"{_THINKING} without extended thinking enabled"
    if kinds[0] != _THINKING:
        return f"{_THINKING} not the first of several edits"
    return None


def predict(ir: TelosIR, measured: Measured) -> ServerEdits | None:
    """The caller's edits on ``ir`` (Anthropic Messages), or ``None`` when it sets none telos reads
    (or none the vendor accepts: ``refused``)."""
    if ir.api != "anthropic":
        return None
    edits = _edits(ir)
    if not edits or refused(ir) is not None:
        return None
    results = thinking = tokens = 0
    first: list[int] = []
    frontier: list[int] = []
    known = False
    for edit in edits:
        kind = edit.get("type")
        if kind == _THINKING:
            found = _thinking(ir, edit.get("keep"))
        elif kind == _TOOL_USES:
            found = _tool_uses(edit, measured)
        else:
            continue
        if found is None:
            return None  # a value telos cannot read: predict nothing rather than guess
        known = True
        count, cleared, at, nxt = found
        if kind == _THINKING:
            thinking += count
        else:
            results += count
        tokens += cleared
        first += at
        frontier += nxt
    if not known:
        return None
    edited = results or thinking
    return ServerEdits(
        results=results,
        thinking=thinking,
        tokens=tokens,
        first=min(first) if first else None,
        frontier=min(frontier) if edited and frontier else None,
    )


def _thinking(ir: TelosIR, keep: Any) -> tuple[int, int, list[int], list[int]] | None:
    """Thinking turns cleared, their tokens, where, and the oldest kept turn (the next to go)."""
    if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
        return 0, 0, [], []
    kept = _value(keep, 1)
    if kept is None or kept < 0:
        return None
    turns: list[tuple[int, int]] = []
    for index, message in enumerate(ir.messages):
        if message.role != "assistant":
            continue
        size = sum(
            len(canonical_json(block.payload)) // 4
            for block in message.blocks
            if block.kind is BlockKind.THINKING
            or (isinstance(block.payload, Mapping) and block.payload.get("type") in _THINKING_TYPES)
        )
        if size:
            turns.append((index, size))
    cleared = turns[: max(0, len(turns) - kept)]
    kept_turns = turns[len(cleared) :]
    nxt = [kept_turns[0][0]] if kept and len(kept_turns) >= kept else []
    return len(cleared), sum(size for _, size in cleared), [i for i, _ in cleared[:1]], nxt


def _tool_uses(edit: Mapping[str, Any], measured: Measured) -> tuple[int, int, list[int], list[int]] | None:
    """Tool results cleared, their tokens, where, and the oldest clearable one kept (the next to go)."""
    trigger = edit.get("trigger")
    keep = _value(edit.get("keep"), 3)
    at_least = _value(edit.get("clear_at_least"), 0)
    excluded = edit.get("exclude_tools") or ()
    inputs = edit.get("clear_tool_inputs", False)
    if keep is None or at_least is None or not isinstance(excluded, (list, tuple)):
        return None
    units = measured.results  # the tool results only: thinking and file blocks are no tool uses
    if isinstance(trigger, Mapping) and trigger.get("type") == "tool_uses":
        limit = _value(trigger, None)
        if limit is None:
            return None
        past = len(measured.uses) > limit
    else:
        limit = _value(trigger, 100_000)
        if limit is None:
            return None
        past = measured.total > limit
    clearable = [unit for unit in units if unit.name not in set(excluded)]
    older = {unit.key() for unit in units[: max(0, len(units) - keep)]}
    cleared = [unit for unit in clearable if unit.key() in older]
    kept = [unit for unit in clearable if unit.key() not in older]

    def calls(unit: Any) -> bool:
        return inputs is True or (isinstance(inputs, list) and unit.name in inputs)

    size = sum(unit.tokens + (unit.input_tokens if calls(unit) else 0) for unit in cleared)
    if not past or not cleared or size < at_least:
        return 0, 0, [], []
    at = [min(measured.uses.get(u.call, u.message) if calls(u) else u.message for u in cleared)]
    nxt = []
    if kept:
        unit = kept[0]
        nxt = [min(measured.uses.get(unit.call, unit.message), unit.message) if calls(unit) else unit.message]
    return len(cleared), size, at, nxt
