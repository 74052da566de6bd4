"""Scripted replies: what an emulated model answers, decided by a pure function of the request.

By default every completion is :data:`~telos_wrap.emulator.wire.REPLY_TEXT`. A *replier* lets a test
drive an agent's tool loop: ``Emulator(replier=f)`` calls ``f(api, body)`` for each completion
(``api`` is ``"anthropic"`` or ``"openai_chat"``, ``body`` the decoded request) and answers with the
:class:`Reply` it returns — text, tool calls, or both — or with the fixed text when it returns
``None``. The replier must be deterministic (a function of the body, e.g. how many tool results the
current question holds), so a run gives the same answers patched and unpatched.

A *question* is a user turn that is not a tool-result turn (a chat ``user`` message, an Anthropic
``user`` message holding no ``tool_result`` block) and that follows the model's finished answer or
opens the conversation: a user turn after a tool round (a per-turn envelope appended after the
results, as harnesses and telos' chat routes to Claude do) continues the question it belongs to.
:func:`tool_loop` and :func:`script` count from the newest question, so an agent that asks several
questions in one conversation gets the same script for each. The reply never influences the cache
accounting, which depends on the prompt alone. See docs/emulator.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Replier",
    "Reply",
    "ToolCall",
    "count_tool_results",
    "model_turns",
    "replies_from_json",
    "reply_from_json",
    "script",
    "tool_call_from_spec",
    "tool_loop",
]

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


def _messages(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    return [m for m in messages if isinstance(m, Mapping)]


def _tool_results_in(api: Api, message: Mapping[str, Any]) -> int:
    if api == "openai_chat":
        return 1 if message.get("role") == "tool" else 0
    content = message.get("content")
    if not isinstance(content, list):
        return 0
    return sum(1 for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result")


def _is_question(api: Api, message: Mapping[str, Any]) -> bool:
    """A user turn that asks (not one that only carries tool results)."""
    return message.get("role") == "user" and (api == "openai_chat" or not _tool_results_in(api, message))


def _calls_tools(api: Api, message: Mapping[str, Any]) -> bool:
    """An assistant turn that asks for tools (its results are due next)."""
    if message.get("role") != "assistant":
        return False
    if api == "openai_chat":
        return bool(message.get("tool_calls"))
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") == "tool_use" for b in content
    )


def _opens_question(api: Api, messages: list[Mapping[str, Any]], index: int) -> bool:
    """Whether the user turn at ``index`` asks anew: what came before it (past other user turns)
    is nothing or the model's finished answer, not a tool round. A user turn that follows tool
    results (a per-turn envelope a harness or telos appends after them) continues the question."""
    before = index - 1
    while before >= 0 and _is_question(api, messages[before]):
        before -= 1
    if before < 0:
        return True
    previous = messages[before]
    return previous.get("role") == "assistant" and not _calls_tools(api, previous)


def _since_question(api: Api, body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The messages after the newest question (all of them when there is none)."""
    messages = _messages(body)
    for index in range(len(messages) - 1, -1, -1):
        if _is_question(api, messages[index]) and _opens_question(api, messages, index):
            return messages[index + 1 :]
    return messages


def count_tool_results(api: Api, body: Mapping[str, Any], *, since_question: bool = False) -> int:
    """How many tool results the request's conversation holds (``tool_result`` blocks / ``tool`` turns).

    ``since_question=True`` counts only those after the newest question (see module docstring).
    """
    messages = _since_question(api, body) if since_question else _messages(body)
    return sum(_tool_results_in(api, message) for message in messages)


def model_turns(api: Api, body: Mapping[str, Any]) -> int:
    """How many assistant turns the current question already holds (the model's replies to it)."""
    return sum(1 for message in _since_question(api, body) if message.get("role") == "assistant")


def tool_loop(calls: Sequence[ToolCall], final_text: str = "Done.") -> Replier:
    """A replier that asks for ``calls[k]`` once the current question holds ``k`` tool results, then
    answers ``final_text``: an agent running it makes ``len(calls) + 1`` model requests per question."""
    steps = tuple(calls)

    def replier(api: Api, body: Mapping[str, Any]) -> Reply | None:
        done = count_tool_results(api, body, since_question=True)
        if done < len(steps):
            return Reply(tool_calls=(steps[done],))
        return Reply(text=final_text)

    return replier


def script(replies: Sequence[Reply]) -> Replier:
    """A replier that answers ``replies[k]`` to the ``k``-th model request of each question (counted by
    the assistant turns since the question), then :data:`~telos_wrap.emulator.wire.REPLY_TEXT`.

    Unlike :func:`tool_loop` a step may hold text and several tool calls at once (parallel calls).
    """
    steps = tuple(replies)

    def replier(api: Api, body: Mapping[str, Any]) -> Reply | None:
        turn = model_turns(api, body)
        return steps[turn] if turn < len(steps) else None

    return replier


# -- scripts from the command line (``telos-wrap emulator --tool-call`` / ``--replies``) -------------


def tool_call_from_spec(spec: str) -> ToolCall:
    """``"NAME"`` or ``"NAME:JSON"`` (a JSON object of arguments) as a :class:`ToolCall`."""
    name, sep, arguments = spec.partition(":")
    name = name.strip()
    if not name:
        raise ValueError(f'{spec!r}: expected NAME or NAME:JSON, e.g. \'get_weather:{{"city": "Paris"}}\'')
    if not sep or not arguments.strip():
        return ToolCall(name)
    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        raise ValueError(f"{spec!r}: the arguments after {name}: are not JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{spec!r}: the arguments must be a JSON object, not {type(parsed).__name__}")
    return ToolCall(name, parsed)


def reply_from_json(item: Any) -> Reply:
    """One step of a ``--replies`` file: ``{"text": "...", "tool_calls": [{"name", "arguments"}]}``."""
    if not isinstance(item, Mapping) or not set(item) <= {"text", "tool_calls"} or not item:
        raise ValueError(f'each reply is an object with "text" and/or "tool_calls", not {item!r}')
    text = item.get("text", "")
    if not isinstance(text, str):
        raise ValueError(f'"text" must be a string, not {text!r}')
    calls = item.get("tool_calls", [])
    if not isinstance(calls, list):
        raise ValueError(f'"tool_calls" must be a list, not {calls!r}')
    parsed: list[ToolCall] = []
    for call in calls:
        if (
            not isinstance(call, Mapping)
            or not isinstance(call.get("name"), str)
            or not call["name"]
            or not set(call) <= {"name", "arguments"}
            or not isinstance(call.get("arguments", {}), Mapping)
        ):
            raise ValueError(f'a tool call is {{"name": "...", "arguments": {{...}}}}, not {call!r}')
        parsed.append(ToolCall(call["name"], dict(call.get("arguments", {}))))
    return Reply(text=text, tool_calls=tuple(parsed))


def replies_from_json(data: Any) -> tuple[Reply, ...]:
    """A ``--replies`` file's content (a JSON list of :func:`reply_from_json` steps)."""
    if not isinstance(data, list) or not data:
        raise ValueError("a replies file holds a non-empty JSON list of replies")
    return tuple(reply_from_json(item) for item in data)
