"""Scripted replies: what an emulated model answers, decided by a pure function of the request.

By default every completion is :data:`~telos_wrap.emulator.wire.REPLY_TEXT`. A *replier* lets a test
drive an agent's tool loop: ``Emulator(replier=f)`` calls ``f(api, body)`` for each completion
(``api`` is ``"anthropic"`` or ``"openai_chat"``, ``body`` the decoded request) and answers with the
:class:`Reply` it returns — text, tool calls, or both — or with the fixed text when it returns
``None``. The replier must be deterministic (a function of the body, e.g. how many tool results the
conversation holds), so a run gives the same answers patched and unpatched. The reply never
influences the cache accounting, which depends on the prompt alone. See docs/emulator.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Replier", "Reply", "ToolCall", "count_tool_results", "tool_loop"]

Api = Literal["anthropic", "openai_chat"]


@dataclass(frozen=True)
class ToolCall:
    """One tool call in a reply: the tool's ``name`` and its JSON ``arguments``."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def call_id(self, api: Api, seed: str) -> str:
        """A deterministic id (``toolu_…`` / ``call_…``) derived from ``seed`` and the call."""
        digest = hashlib.sha256(f"{seed}|{self.name}|{self.arguments_json()}".encode()).hexdigest()[:24]
        return f"toolu_emu_{digest}" if api == "anthropic" else f"call_emu_{digest}"

    def arguments_json(self) -> str:
        """The arguments as compact JSON, keys sorted (OpenAI sends arguments as a JSON string)."""
        return json.dumps(dict(self.arguments), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Reply:
    """What the model answers: optional text, then tool calls (``stop_reason`` follows from them)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


#: ``(api, body) -> Reply | None``; ``None`` means the fixed default reply.
Replier = Callable[[Api, Mapping[str, Any]], "Reply | None"]


def count_tool_results(api: Api, body: Mapping[str, Any]) -> int:
    """How many tool results the request's conversation holds (``tool_result`` blocks / ``tool`` turns)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    if api == "openai_chat":
        return sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "tool")
    total = 0
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            total += sum(1 for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result")
    return total


def tool_loop(calls: list[ToolCall], final_text: str = "Done.") -> Replier:
    """A replier that asks for ``calls[k]`` once the conversation holds ``k`` tool results, then
    answers ``final_text``: an agent running it makes ``len(calls) + 1`` model requests."""
    script = tuple(calls)

    def replier(api: Api, body: Mapping[str, Any]) -> Reply | None:
        done = count_tool_results(api, body)
        if done < len(script):
            return Reply(tool_calls=(script[done],))
        return Reply(text=final_text)

    return replier
