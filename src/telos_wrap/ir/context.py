"""``ContextPolicy``: when and how a session folds old tool results under pressure (pure values).

The vocabulary is Anthropic's context editing strategy ``clear_tool_uses_20250919``
(docs/vendor-facts.md §9.2): a **trigger** (input tokens, or a fraction of the model's context
window), how many recent tool uses to **keep**, the least to clear in one step (**clear_at_least**),
tools whose results are never cleared (**exclude_tools**), whether the tool calls' inputs are
cleared too (**clear_tool_inputs**); and, telos' own, an optional **summarizer**: the caller's
callable that writes the text put in place of a cleared result (telos makes no model call).

``parse_context`` accepts a ``ContextPolicy``, ``True`` (Anthropic's defaults), or a dict written
as Anthropic's edit, copied as is::

    {"type": "clear_tool_uses_20250919",
     "trigger": {"type": "input_tokens", "value": 100000},
     "keep": {"type": "tool_uses", "value": 3},
     "clear_at_least": {"type": "input_tokens", "value": 20000},
     "exclude_tools": ["read_plan"]}

or with plain numbers (``{"trigger": 100000, "keep": 3}``; a trigger in ``(0, 1]`` is a fraction
of the model's window, as is ``{"type": "window_fraction", "value": 0.8}``). Anthropic's whole
``context_management`` value is accepted too, ``{"edits": [<clear_thinking_20251015>,
<clear_tool_uses_20250919>]}``, and a lone ``clear_thinking_20251015`` edit: its ``keep``
(``{"type": "thinking_turns", "value": N}``, default 1; ``"all"``: never) becomes
``clear_thinking``, and without a tool-use edit the results are left alone (``clear_results``).
``None`` / ``False``: no policy. Anything else raises ``ContextPolicyError`` saying what is valid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from telos_wrap.errors import TelosError

__all__ = [
    "DEFAULT_KEEP",
    "DEFAULT_TRIGGER",
    "FOLDED_HERE",
    "SERVER_EDITS",
    "ContextPolicy",
    "ContextPolicyError",
    "fold_start",
    "parse_context",
]

#: The ``Transformation.kind`` of a request on which the context policy decided a new fold; its
#: ``where`` is ``"messages[i:]"``, ``i`` the first message it folded (engines read it: vLLM's
#: ``evict_span``, docs/engines.md).
FOLDED_HERE = "context-policy-fold"

#: The ``Transformation.kind`` of a request whose caller set Anthropic's ``context_management``: what
#: the server clears from it (``sessions/turns/server_edits.py``); its ``where`` is
#: ``"messages[f:]"``, ``f`` the first message the server may clear on a later request, before which
#: the Anthropic engine puts BP-fork (docs/sessions.md, "Context under pressure").
SERVER_EDITS = "vendor-context-edit"

#: Anthropic's defaults for ``clear_tool_uses_20250919`` (docs/vendor-facts.md §9.2).
DEFAULT_TRIGGER = 100_000
DEFAULT_KEEP = 3

#: ``summarizer(tool_name, result_text) -> str``: the text put in place of one cleared result.
Summarizer = Callable[[str, str], str]

_KEYS = (
    "type",
    "trigger",
    "keep",
    "clear_at_least",
    "exclude_tools",
    "clear_tool_inputs",
    "summarizer",
)
_EDIT_TYPE = "clear_tool_uses_20250919"
_THINKING_TYPE = "clear_thinking_20251015"


class ContextPolicyError(TelosError, ValueError):
    """A ``context=`` value telos cannot use (the message says what is valid)."""


@dataclass(frozen=True, slots=True)
class ContextPolicy:
    """When a session folds old tool results, and how much (see the module docstring).

    Attributes:
        trigger_tokens: fold when a request would carry more input tokens than this.
        trigger_fraction: or: fold past this fraction of the model's context window (used when
            ``trigger_tokens`` is ``None``; a model whose window telos does not know then never
            triggers, and ``explain`` says so).
        keep: the most recent tool uses whose results are never cleared.
        clear_at_least: a fold clears at least this many tokens, else it waits (a fold costs one
            rewrite of everything after its point: it must be worth it).
        exclude_tools: tool names whose results are never cleared.
        clear_tool_inputs: also clear the inputs of the cleared tool calls.
        summarizer: ``summarizer(tool_name, result_text) -> str``, called once per cleared result
            when the fold is decided; its text is recorded in the session instead of the
            placeholder.
        clear_results: fold old tool results (``False``: a policy of ``clear_thinking_20251015``
            alone folds thinking only).
        clear_thinking: fold the thinking blocks of earlier assistant turns too, keeping those of
            this many most recent thinking turns (``None``: thinking is never folded). The current
            turn's thinking is never touched (docs/vendor-facts.md §9.2).
    """

    trigger_tokens: int | None = DEFAULT_TRIGGER
    trigger_fraction: float | None = None
    keep: int = DEFAULT_KEEP
    clear_at_least: int = 0
    exclude_tools: tuple[str, ...] = ()
    clear_tool_inputs: bool = False
    summarizer: Summarizer | None = None
    clear_results: bool = True
    clear_thinking: int | None = None

    def trigger_for(self, window: int | None) -> int | None:
        """The trigger in tokens for a model whose context window is ``window`` (``None``: unknown)."""
        if self.trigger_tokens is not None:
            return self.trigger_tokens
        if self.trigger_fraction is None or window is None:
            return None
        return int(window * self.trigger_fraction)

    def describe(self) -> str:
        """One line for ``explain`` (no caller text but tool names the caller configured)."""
        trigger = (
            f"{self.trigger_tokens:,} input tokens"
            if self.trigger_tokens is not None
            else f"{self.trigger_fraction:.0%} of the model's window"
        )
        parts = [
            f"trigger {trigger}",
            f"keep {self.keep} tool uses" if self.clear_results else "tool results kept",
        ]
        if self.clear_thinking is not None:
            parts.append(f"thinking cleared but the latest {self.clear_thinking} thinking turn(s)")
        if self.clear_at_least:
            parts.append(f"clear at least {self.clear_at_least:,} tokens")
        if self.exclude_tools:
            parts.append(f"never {', '.join(self.exclude_tools)}")
        if self.clear_tool_inputs:
            parts.append("inputs cleared too")
        return "; ".join(parts)


def fold_start(records: Iterable[Any]) -> int | None:
    """The first message a fold decided for this request folds (``FOLDED_HERE`` record), or ``None``."""
    for record in records:
        if getattr(record, "kind", None) == FOLDED_HERE:
            where = str(record.where)
            if where.startswith("messages[") and where.endswith(":]") and where[9:-2].isdigit():
                return int(where[9:-2])
    return None


def parse_context(value: Any) -> ContextPolicy | None:
    """Validate a ``context=`` value (see the module docstring); raises ``ContextPolicyError``."""
    if value is None or value is False:
        return None
    if value is True:
        return ContextPolicy()
    if isinstance(value, ContextPolicy):
        _check(value)
        return value
    if not isinstance(value, Mapping):
        raise ContextPolicyError(
            f"context must be a dict written as Anthropic's clear_tool_uses_20250919 edit, a "
            f"telos_wrap.ContextPolicy, True or None; not {type(value).__name__}"
        )
    if "edits" in value or value.get("type") == _THINKING_TYPE:
        return _parse_edits(value)
    unknown = sorted(str(key) for key in value if key not in _KEYS)
    if unknown:
        raise ContextPolicyError(f"unknown context key(s) {unknown}; valid keys: {', '.join(_KEYS)}")
    kind = value.get("type", _EDIT_TYPE)
    if kind != _EDIT_TYPE:
        raise ContextPolicyError(
            f"context type {kind!r} is not supported: telos folds tool results as {_EDIT_TYPE!r} does"
        )
    tokens, fraction = _trigger(value.get("trigger", DEFAULT_TRIGGER))
    summarizer = value.get("summarizer")
    if summarizer is not None and not callable(summarizer):
        raise ContextPolicyError("context summarizer must be a callable summarizer(tool_name, text) -> str")
    exclude = value.get("exclude_tools", ())
    if isinstance(exclude, str) or not all(isinstance(name, str) for name in exclude):
        raise ContextPolicyError(f"context exclude_tools must be a list of tool names, not {exclude!r}")
    inputs = value.get("clear_tool_inputs", False)
    if not isinstance(inputs, bool):
        raise ContextPolicyError(
            f"context clear_tool_inputs must be True or False (clearing the inputs of only some "
            f"tools is not supported), not {inputs!r}"
        )
    policy = ContextPolicy(
        trigger_tokens=tokens,
        trigger_fraction=fraction,
        keep=_count(value.get("keep", DEFAULT_KEEP), "keep", "tool_uses"),
        clear_at_least=_count(value.get("clear_at_least", 0), "clear_at_least", "input_tokens"),
        exclude_tools=tuple(exclude),
        clear_tool_inputs=inputs,
        summarizer=summarizer,
    )
    _check(policy)
    return policy


def _parse_edits(value: Mapping[str, Any]) -> ContextPolicy:
    """Anthropic's ``context_management`` form (``{"edits": [...]}``) or a lone
    ``clear_thinking_20251015`` edit: the tool-use edit's options, and thinking's ``keep``."""
    if "edits" in value:
        if set(value) != {"edits"} or not isinstance(value["edits"], list) or not value["edits"]:
            raise ContextPolicyError(
                "context written as Anthropic's context_management takes one key, edits: a list of "
                f"{_EDIT_TYPE!r} and {_THINKING_TYPE!r} edits"
            )
        edits = value["edits"]
    else:
        edits = [value]
    thinking = [e for e in edits if isinstance(e, Mapping) and e.get("type") == _THINKING_TYPE]
    tools = [e for e in edits if not (isinstance(e, Mapping) and e.get("type") == _THINKING_TYPE)]
    if len(thinking) > 1 or len(tools) > 1:
        raise ContextPolicyError(f"context edits: at most one {_EDIT_TYPE!r} and one {_THINKING_TYPE!r}")
    policy = parse_context({"type": _EDIT_TYPE, **tools[0]}) if tools else None
    if policy is None:
        policy = ContextPolicy(clear_results=False)
    if thinking:
        unknown = sorted(str(key) for key in thinking[0] if key not in ("type", "keep"))
        if unknown:
            raise ContextPolicyError(f"unknown {_THINKING_TYPE} key(s) {unknown}; valid keys: type, keep")
        keep = thinking[0].get("keep", {"type": "thinking_turns", "value": 1})
        if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
            kept = None
        else:
            kept = _count(keep, "clear_thinking keep", "thinking_turns")
        policy = replace(policy, clear_thinking=kept)
    return policy


def _trigger(value: Any) -> tuple[int | None, float | None]:
    if isinstance(value, Mapping):
        kind, number = value.get("type"), value.get("value")
        if kind == "window_fraction":
            return None, _fraction(number)
        if kind != "input_tokens":
            raise ContextPolicyError(
                f"context trigger type {kind!r}: use 'input_tokens' or 'window_fraction'"
            )
        return _count(number, "trigger", "input_tokens"), None
    if isinstance(value, float) and 0 < value <= 1:
        return None, value
    return _count(value, "trigger", "input_tokens"), None


def _fraction(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ContextPolicyError(f"context trigger fraction must be in (0, 1], not {value!r}")
    return float(value)


def _count(value: Any, name: str, unit: str) -> int:
    if isinstance(value, Mapping):
        if value.get("type") != unit:
            raise ContextPolicyError(f"context {name} type must be {unit!r}, not {value.get('type')!r}")
        value = value.get("value")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ContextPolicyError(f"context {name} must be a whole number of {unit} >= 0, not {value!r}")
    return value


def _check(policy: ContextPolicy) -> None:
    if policy.trigger_tokens is None and policy.trigger_fraction is None:
        raise ContextPolicyError("context needs a trigger: input tokens, or a fraction of the window")
    if policy.trigger_tokens is not None and policy.trigger_tokens < 1:
        raise ContextPolicyError(f"context trigger must be at least 1 token, not {policy.trigger_tokens}")
