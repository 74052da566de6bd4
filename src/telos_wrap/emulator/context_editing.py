"""Anthropic's context editing, server side: ``clear_tool_uses_20250919`` (docs/vendor-facts.md §9.2).

A request whose ``context_management.edits`` holds a ``clear_tool_uses_20250919`` edit and whose
prompt is past the edit's trigger (default 100,000 input tokens) has its oldest tool results
cleared before the cache rules see it: every ``tool_result`` but the ``keep`` most recent (default
3) and those of ``exclude_tools``, with ``clear_tool_inputs`` the calls' inputs too; if that clears
fewer than ``clear_at_least`` tokens, nothing is cleared. The server holds no state: the client
keeps sending its whole history, and each request is edited afresh. The response reports it as
``context_management.applied_edits`` (``cleared_tool_uses``, ``cleared_input_tokens``).

``clear_thinking_20251015`` is accepted and not applied (the emulator keeps every thinking block).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .tokens import estimate_tokens

__all__ = ["CLEARED", "clear_tool_uses"]

#: What a cleared tool result holds (the emulator's wording; the vendor's own text is not documented).
CLEARED = "[cleared to save context]"
_EDIT = "clear_tool_uses_20250919"


def _value(spec: Any, default: int) -> int:
    if isinstance(spec, Mapping) and isinstance(spec.get("value"), int):
        return int(spec["value"])
    return default


def _size(value: Any) -> int:
    return estimate_tokens(value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))


def clear_tool_uses(
    body: Mapping[str, Any], total_tokens: int
) -> tuple[Mapping[str, Any], dict[str, Any] | None]:
    """``body`` as the model sees it after the edit, and the applied edit's report (``None``: none)."""
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, Mapping) else None
    edit = next((e for e in edits or () if isinstance(e, Mapping) and e.get("type") == _EDIT), None)
    if edit is None:
        return body, None
    trigger = _value(edit.get("trigger"), 100_000)
    report = {"type": _EDIT, "cleared_tool_uses": 0, "cleared_input_tokens": 0}
    if total_tokens <= trigger:
        return body, report
    keep = _value(edit.get("keep"), 3)
    at_least = _value(edit.get("clear_at_least"), 0)
    excluded = set(edit.get("exclude_tools") or ())
    inputs = edit.get("clear_tool_inputs") is True
    messages = body.get("messages") or []
    names: dict[str, str] = {}
    results: list[tuple[int, int, str]] = []
    for i, message in enumerate(messages):
        for j, block in enumerate(message.get("content") if isinstance(message.get("content"), list) else ()):
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
            elif block.get("type") == "tool_result":
                results.append((i, j, str(block.get("tool_use_id"))))
    candidates = [r for r in results[: max(0, len(results) - keep)] if names.get(r[2]) not in excluded]
    cleared_ids = {r[2] for r in candidates}
    tokens = 0
    edited = [dict(m) for m in messages]
    for i, j, _ in candidates:
        content = list(edited[i]["content"])
        block = dict(content[j])
        tokens += max(0, _size(block.get("content", "")) - _size(CLEARED))
        block["content"] = CLEARED
        content[j] = block
        edited[i]["content"] = content
    if inputs:
        for message in edited:
            if isinstance(message.get("content"), list):
                message["content"] = [
                    {**b, "input": {}}
                    if isinstance(b, Mapping) and b.get("type") == "tool_use" and b.get("id") in cleared_ids
                    else b
                    for b in message["content"]
                ]
    if not candidates or tokens < at_least:
        return body, report
    report.update(cleared_tool_uses=len(candidates), cleared_input_tokens=tokens)
    return {**body, "messages": edited}, report
