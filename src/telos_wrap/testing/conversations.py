"""Which requests of a test form one conversation, as telos' implicit session would tell them apart.

A test may hold several conversations in one telos session; a budget judges each on its own. The key
is what stays fixed for a conversation (API, model, tool names, first non-system message;
``docs/sessions.md``, implicit sessions), computed over the bodies as the application sent them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from telos_wrap.ir.canon import canonical_bytes, tool_label
from telos_wrap.replay.traces import TraceRequest

__all__ = ["conversation_items", "conversation_key", "group_conversations"]


def conversation_items(api: str, body: Mapping[str, Any]) -> Any:
    """The conversation of a request: ``messages``, or a Responses request's ``input`` items."""
    if api != "responses":
        return body.get("messages")
    items = body.get("input")
    return [{"role": "user", "content": items}] if isinstance(items, str) else items


_MARKERS = ("cache_control", "prompt_cache_breakpoint")


def _without_envelopes(message: Any, patterns: Sequence[str]) -> Any:
    """``message``'s role and content, markers left out and text matching ``patterns`` removed."""
    if not isinstance(message, Mapping):
        return message
    content = message.get("content")
    blocks = [content] if isinstance(content, str) else content if isinstance(content, list) else None
    if blocks is None:
        return message
    kept: list[Any] = []
    for block in blocks:
        if isinstance(block, Mapping):
            block = {key: value for key, value in block.items() if key not in _MARKERS}
        text = block if isinstance(block, str) else block.get("text") if isinstance(block, Mapping) else None
        if not isinstance(text, str):
            kept.append(block)
            continue
        for pattern in patterns:
            text = re.sub(pattern, "", text, flags=re.MULTILINE)
        if text.strip():
            kept.append(text.strip())
    return {"role": message.get("role"), "content": kept}


def _first_turn(messages: Any) -> Any:
    if not isinstance(messages, list):
        return None
    for message in messages:
        if not (isinstance(message, Mapping) and message.get("role") in ("system", "developer")):
            return message
    return None


def conversation_key(api: str, body: Mapping[str, Any], drop_patterns: Sequence[str] = ()) -> str:
    """What stays fixed for a conversation: API, model, tool names (sorted), first non-system message.

    Like telos' implicit session (``docs/sessions.md``), minus OpenAI system/developer messages, which
    harnesses rebuild every turn (a clock in the system message must not split a conversation).
    With ``drop_patterns`` the first message is compared by its content only: cache markers left
    out, a string equal to one text block, and text matching a pattern (an envelope) removed.
    """
    tools = body.get("tools")
    first = _first_turn(conversation_items(api, body))
    material = {
        "api": api,
        "model": body.get("model"),
        "tools": sorted(map(tool_label, tools)) if isinstance(tools, list) else None,
        "first": _without_envelopes(first, drop_patterns) if drop_patterns else first,
    }
    try:
        return hashlib.sha256(canonical_bytes(material)).hexdigest()[:12]
    except (TypeError, ValueError):
        return "unhashable"


def group_conversations(
    requests: Iterable[TraceRequest], drop_patterns: Sequence[str] = ()
) -> list[list[TraceRequest]]:
    """``requests`` as conversations, in first-seen order: grouped by (session, API, ``conversation_key``),
    each renamed ``<session>~<key>`` and numbered from 0."""
    groups: dict[tuple[str, str, str], list[TraceRequest]] = {}
    for request in requests:
        key = (
            request.session,
            request.api,
            conversation_key(request.api, request.kwargs, drop_patterns=drop_patterns),
        )
        groups.setdefault(key, []).append(request)
    out: list[list[TraceRequest]] = []
    for (session, _, digest), group in groups.items():
        name = f"{session}~{digest}"
        out.append([TraceRequest(name, turn, r.api, r.kwargs) for turn, r in enumerate(group)])
    return out
