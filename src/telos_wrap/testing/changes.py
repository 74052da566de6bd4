"""A cache break explained in the application's own terms: what it changed between two requests.

Telos' ``CacheBreak`` speaks of the prompt telos emitted; a failing cache test should also say what
the application did (``system[0] line 2 changed: 'Now: 10:01' → 'Now: 10:02'``). This compares two
requests as the application sent them and names the first difference: model, tools, a system line,
a history item, or a request field.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from telos_wrap.ir.canon import canonical_bytes, tool_label
from telos_wrap.replay.traces import TraceRequest
from telos_wrap.testing.conversations import conversation_items

__all__ = ["caller_change"]


def _texts(value: Any) -> list[str]:
    """The text of a system prompt / message content, one entry per caller block."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        out: list[str] = []
        for block in value:
            if isinstance(block, str):
                out.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                out.append(block["text"])
            else:
                out.append(canonical_bytes(block).decode("utf-8") if _canonicalizable(block) else repr(block))
        return out
    if value is None:
        return []
    return [canonical_bytes(value).decode("utf-8") if _canonicalizable(value) else repr(value)]


def _canonicalizable(value: Any) -> bool:
    try:
        canonical_bytes(value)
    except (TypeError, ValueError):
        return False
    return True


def _clip(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _line_change(where: str, before: str, after: str) -> str:
    old, new = before.splitlines(), after.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace":
            was, now = " / ".join(old[i1:i2]), " / ".join(new[j1:j2])
            return f"{where} line {i1 + 1} changed: {_clip(was)} → {_clip(now)}"
        if tag == "delete":
            return f"{where} line {i1 + 1} removed: {_clip(' / '.join(old[i1:i2]))}"
        return f"{where} line {i1 + 1} inserted: {_clip(' / '.join(new[j1:j2]))}"
    return f"{where} changed (whitespace or line endings only)"


def _system_of(request: TraceRequest) -> list[str]:
    body = request.kwargs
    if request.api == "anthropic":
        return _texts(body.get("system"))
    if request.api == "responses":
        return _texts(body.get("instructions"))
    listed = body.get("messages")
    messages: list[Any] = listed if isinstance(listed, list) else []
    out: list[str] = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") not in ("system", "developer"):
            break
        out.append("\n".join(_texts(message.get("content"))))
    return out


def _order_kept(tools: list[Any]) -> bool:
    """Whether telos sends these tools in the caller's order: it sorts them (``bridge.canonicalize``)
    unless the caller put cache markers of its own on a tool."""
    return any(
        isinstance(tool, Mapping) and ("cache_control" in tool or "prompt_cache_breakpoint" in tool)
        for tool in tools
    )


def _description(tool: Any) -> Any:
    function = tool.get("function") if isinstance(tool, Mapping) else None
    return (
        function.get("description")
        if isinstance(function, Mapping)
        else (tool.get("description") if isinstance(tool, Mapping) else None)
    )


def _tool_edit(name: str, before: Any, after: Any) -> str | None:
    """How one tool's definition changed (``None`` if it did not)."""
    if not (_canonicalizable(before) and _canonicalizable(after)):
        return None if before == after else f"tool {name!r} definition changed"
    if canonical_bytes(before) == canonical_bytes(after):
        return None
    old, new = _description(before), _description(after)
    if isinstance(old, str) and isinstance(new, str) and old != new:
        return _line_change(f"tool {name!r} description", old, new)
    return f"tool {name!r} definition changed"


def _tools_change(before: TraceRequest, after: TraceRequest) -> str | None:
    old, new = before.kwargs.get("tools") or [], after.kwargs.get("tools") or []
    if not isinstance(old, list) or not isinstance(new, list):
        return None
    old_names, new_names = [tool_label(t) for t in old], [tool_label(t) for t in new]
    if sorted(old_names) != sorted(new_names):
        added = sorted(set(new_names) - set(old_names))
        removed = sorted(set(old_names) - set(new_names))
        return f"tools changed: added {added or 'none'}, removed {removed or 'none'}"
    kept = _order_kept(old) or _order_kept(new)
    reordered = old_names != new_names
    if reordered and kept:
        # Sent in the caller's order: the order itself moved the cached prefix.
        return f"tools reordered: {old_names} → {new_names}"
    # telos sorts the tools itself, so their order is no cause: an edited definition is, named by
    # the tool (matched by name; by position when names repeat).
    if len(set(new_names)) == len(new_names):
        previous = dict(zip(old_names, old, strict=True))
        pairs = [(name, previous[name], tool) for name, tool in zip(new_names, new, strict=True)]
    else:
        pairs = list(zip(new_names, old, new, strict=True))
    for name, a, b in pairs:
        edit = _tool_edit(name, a, b)
        if edit is not None:
            return edit
    return None


def caller_change(before: TraceRequest, after: TraceRequest) -> str:
    """The first difference between two requests as the application sent them, in its own terms."""
    if before.kwargs.get("model") != after.kwargs.get("model"):
        return f"model changed: {before.kwargs.get('model')!r} → {after.kwargs.get('model')!r}"
    tools = _tools_change(before, after)
    if tools is not None:
        return tools
    old_system, new_system = _system_of(before), _system_of(after)
    for index, (a, b) in enumerate(zip(old_system, new_system, strict=False)):
        if a != b:
            return _line_change(f"system[{index}]", a, b)
    if len(old_system) != len(new_system):
        return f"system prompt went from {len(old_system)} to {len(new_system)} blocks"
    old_messages = conversation_items(before.api, before.kwargs) or []
    new_messages = conversation_items(after.api, after.kwargs) or []
    where = "input" if after.api == "responses" else "messages"
    skip = len(old_system) if before.api == "openai" else 0
    for index in range(skip, min(len(old_messages), len(new_messages))):
        a, b = old_messages[index], new_messages[index]
        if _canonicalizable(a) and _canonicalizable(b) and canonical_bytes(a) == canonical_bytes(b):
            continue
        a_text = "\n".join(_texts(a.get("content") if isinstance(a, Mapping) else a))
        b_text = "\n".join(_texts(b.get("content") if isinstance(b, Mapping) else b))
        if a_text != b_text:
            return _line_change(f"{where}[{index}]", a_text, b_text)
        return f"{where}[{index}] changed (role, name or non-text fields)"
    if len(new_messages) < len(old_messages):
        return f"history was cut from {len(old_messages)} to {len(new_messages)} {where} items"
    keys = sorted(
        k for k in set(before.kwargs) | set(after.kwargs) if before.kwargs.get(k) != after.kwargs.get(k)
    )
    return f"request fields changed: {keys}" if keys else "nothing the application sent changed"
