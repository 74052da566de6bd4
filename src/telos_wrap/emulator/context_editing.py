"""Anthropic's context editing, server side (docs/vendor-facts.md §9.2).

``apply_edits(body, total_tokens)`` returns the body as the model sees it after the request's
``context_management.edits``, and the applied edits' reports (``None`` when the request has no
edit telos emulates). The server holds no state: the client keeps sending its whole history, and
each request is edited afresh.

* ``clear_thinking_20251015``: the thinking blocks (``thinking``, ``redacted_thinking``) of every
  assistant turn but the ``keep`` most recent ones that hold thinking are removed (``keep``:
  ``{"type": "thinking_turns", "value": N}``, default 1; ``"all"`` or ``{"type": "all"}`` keeps
  every one). Reported as ``{"type", "cleared_thinking_turns", "cleared_input_tokens"}``. With
  other edits it must come first in ``edits``, and the request must enable extended thinking
  (``thinking`` set, of a type other than ``"disabled"``): a 400 otherwise, the vendor's
  ``invalid_request_error`` ("`clear_thinking_20251015` strategy requires `thinking` to be
  enabled", docs/vendor-facts.md §9.2).
* ``clear_tool_uses_20250919``: past the ``trigger`` (``{"type": "input_tokens", "value": N}``,
  default 100,000, or ``{"type": "tool_uses", "value": N}``: more tool uses than ``N``), every
  ``tool_result`` but the ``keep`` most recent (default 3) and those of ``exclude_tools`` has its
  content replaced by ``CLEARED``; ``clear_tool_inputs`` (``True``, or a list of tool names) clears
  those calls' inputs too; if that clears fewer than ``clear_at_least`` tokens, nothing is cleared.
  Reported as ``{"type", "cleared_tool_uses", "cleared_input_tokens"}``.

The thinking edit runs first, and the tool-use trigger reads the tokens it left.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import anthropic_error
from .tokens import estimate_tokens

__all__ = ["CLEARED", "THINKING_EDIT", "TOOL_USES_EDIT", "apply_edits", "clear_tool_uses", "thinking_enabled"]

#: What a cleared tool result holds (the emulator's wording; the vendor's own text is not documented).
CLEARED = "[cleared to save context]"
TOOL_USES_EDIT = "clear_tool_uses_20250919"
THINKING_EDIT = "clear_thinking_20251015"
_THINKING_BLOCKS = ("thinking", "redacted_thinking")


def _value(spec: Any, default: int) -> int:
    if isinstance(spec, Mapping) and isinstance(spec.get("value"), int):
        return int(spec["value"])
    return default


def _size(value: Any) -> int:
    return estimate_tokens(value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))


def _blocks(message: Any) -> Sequence[Any]:
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, list) else ()


def thinking_enabled(body: Mapping[str, Any]) -> bool:
    """Whether the request enables extended thinking: a ``thinking`` object whose type is not
    ``"disabled"`` (``enabled``, ``adaptive``; the SDK's ``ThinkingConfigParam``). Without it the
    vendor refuses ``clear_thinking_20251015`` (docs/vendor-facts.md §9.2)."""
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") not in (None, "disabled")


def apply_edits(
    body: Mapping[str, Any], total_tokens: int
) -> tuple[Mapping[str, Any], list[dict[str, Any]] | None]:
    """``body`` as the model sees it after its edits, and their reports (``None``: no edit)."""
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, Mapping) else None
    edits = [e for e in edits or () if isinstance(e, Mapping)]
    kinds = [e.get("type") for e in edits]
    if THINKING_EDIT in kinds and not thinking_enabled(body):
        raise anthropic_error(f"`{THINKING_EDIT}` strategy requires `thinking` to be enabled")
    if THINKING_EDIT in kinds and len(edits) > 1 and kinds[0] != THINKING_EDIT:
        raise anthropic_error(
            f"context_management.edits: {THINKING_EDIT} must be the first edit when several are given"
        )
    reports: list[dict[str, Any]] = []
    known = False
    for edit in edits:
        if edit.get("type") == THINKING_EDIT:
            body, report = clear_thinking(body, edit)
        elif edit.get("type") == TOOL_USES_EDIT:
            body, report = clear_tool_uses(body, total_tokens, edit)
        else:
            continue
        known = True
        total_tokens -= report.get("cleared_input_tokens", 0)
        reports.append(report)
    return body, reports if known else None


def clear_thinking(
    body: Mapping[str, Any], edit: Mapping[str, Any]
) -> tuple[Mapping[str, Any], dict[str, Any]]:
    """``body`` without the thinking of all but the ``keep`` latest thinking turns, and the report."""
    report = {"type": THINKING_EDIT, "cleared_thinking_turns": 0, "cleared_input_tokens": 0}
    keep = edit.get("keep", {"type": "thinking_turns", "value": 1})
    if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
        return body, report
    kept = _value(keep, 1)
    messages = list(body.get("messages") or [])
    turns = [
        i
        for i, message in enumerate(messages)
        if isinstance(message, Mapping)
        and message.get("role") == "assistant"
        and any(isinstance(b, Mapping) and b.get("type") in _THINKING_BLOCKS for b in _blocks(message))
    ]
    cleared = turns[: max(0, len(turns) - kept)]
    if not cleared:
        return body, report
    tokens = 0
    for i in cleared:
        content = []
        for block in _blocks(messages[i]):
            if isinstance(block, Mapping) and block.get("type") in _THINKING_BLOCKS:
                tokens += _size(block)
            else:
                content.append(block)
        messages[i] = {**messages[i], "content": content}
    report.update(cleared_thinking_turns=len(cleared), cleared_input_tokens=tokens)
    return {**body, "messages": messages}, report


def _tool_calls(messages: list[Any]) -> tuple[dict[str, str], list[tuple[int, int, str]]]:
    """Each tool_use id's tool name, and each tool_result's (message, block, tool_use id), in order."""
    names: dict[str, str] = {}
    results: list[tuple[int, int, str]] = []
    for i, message in enumerate(messages):
        for j, block in enumerate(_blocks(message)):
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
            elif block.get("type") == "tool_result":
                results.append((i, j, str(block.get("tool_use_id"))))
    return names, results


def _triggered(trigger: Any, tool_uses: int, total_tokens: int) -> bool:
    """Whether the edit's trigger is passed: a count of tool uses, or input tokens (100,000 by default)."""
    if isinstance(trigger, Mapping) and trigger.get("type") == "tool_uses":
        return tool_uses > _value(trigger, 0)
    return total_tokens > _value(trigger, 100_000)


def clear_tool_uses(
    body: Mapping[str, Any], total_tokens: int, edit: Mapping[str, Any]
) -> tuple[Mapping[str, Any], dict[str, Any]]:
    """``body`` as the model sees it after the tool-use edit, and its report (see the module docstring)."""
    report = {"type": TOOL_USES_EDIT, "cleared_tool_uses": 0, "cleared_input_tokens": 0}
    messages = body.get("messages") or []
    names, results = _tool_calls(messages)
    if not _triggered(edit.get("trigger"), len(names), total_tokens):
        return body, report
    keep = _value(edit.get("keep"), 3)
    at_least = _value(edit.get("clear_at_least"), 0)
    excluded = set(edit.get("exclude_tools") or ())
    inputs = edit.get("clear_tool_inputs")
    candidates = [r for r in results[: max(0, len(results) - keep)] if names.get(r[2]) not in excluded]
    cleared_ids = {r[2] for r in candidates}
    if isinstance(inputs, list):
        wanted = set(inputs)
        cleared_ids = {call for call in cleared_ids if names.get(call) in wanted}
    elif inputs is not True:
        cleared_ids = set()
    tokens = 0
    edited = [dict(m) for m in messages]
    for i, j, _ in candidates:
        content = list(edited[i]["content"])
        block = dict(content[j])
        tokens += max(0, _size(block.get("content", "")) - _size(CLEARED))
        block["content"] = CLEARED
        content[j] = block
        edited[i]["content"] = content
    for message in edited:
        if isinstance(message.get("content"), list):
            updated = []
            for b in message["content"]:
                if isinstance(b, Mapping) and b.get("type") == "tool_use" and b.get("id") in cleared_ids:
                    tokens += max(0, _size(b.get("input", {})) - _size({}))
                    b = {**b, "input": {}}
                updated.append(b)
            message["content"] = updated
    if not candidates or tokens < at_least:
        return body, report
    report.update(cleared_tool_uses=len(candidates), cleared_input_tokens=tokens)
    return {**body, "messages": edited}, report
