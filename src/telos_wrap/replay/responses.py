"""Chat-shaped traces as OpenAI Responses requests, and the careless harness of the Responses API.

``to_responses`` turns one Chat Completions request (a trace line with ``"api": "openai"``) into the
``responses.create`` arguments an agent on the Responses API would send for the same conversation:

* the leading ``system`` / ``developer`` messages → ``instructions`` (their texts joined by a blank line);
* ``user`` / ``assistant`` / mid-conversation ``system`` messages → message items; ``text`` parts become
  ``input_text`` (``output_text`` for the assistant), ``image_url`` parts ``input_image``, ``file`` parts
  ``input_file``; an assistant's ``tool_calls`` → one ``function_call`` item each, after its text;
* ``tool`` messages → ``function_call_output`` items (their text joined);
* ``tools`` → flat function tools (``{"type": "function", "name", "description", "parameters"}``);
* ``model``, ``temperature``, ``top_p``, ``parallel_tool_calls``, ``user``, ``prompt_cache_key``... as
  they are; ``max_tokens`` / ``max_completion_tokens`` → ``max_output_tokens``; a chat ``tool_choice``
  naming a function → ``{"type": "function", "name"}``. Fields Responses does not have (``n``,
  ``stop``, ``seed``, ``frequency_penalty``, ``response_format``...) are left out.

``jitter_responses`` is ``telos_wrap.replay.traces.jitter`` for the Responses API: the live clock and
environment envelope rebuilt at the top of ``instructions`` every turn, tools and every JSON key
reshuffled.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping, Sequence
from typing import Any

from telos_wrap.replay.traces import TraceRequest, envelope, shuffle_keys

__all__ = ["RESPONSES_API", "jitter_responses", "responses_sessions", "to_responses"]

#: The ``api`` of a converted trace request.
RESPONSES_API = "responses"
_KEPT = (
    "model",
    "temperature",
    "top_p",
    "parallel_tool_calls",
    "user",
    "metadata",
    "store",
    "prompt_cache_key",
    "prompt_cache_retention",
    "safety_identifier",
    "service_tier",
)
_SYSTEM_ROLES = ("system", "developer")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping) and "text" in part
        )
    return ""


def _part(part: Any, text_type: str) -> Any:
    if not isinstance(part, Mapping):
        return part
    kind = part.get("type")
    if kind == "text":
        return {"type": text_type, "text": part.get("text", "")}
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        converted = {"type": "input_image", "image_url": url}
        if isinstance(image, Mapping) and "detail" in image:
            converted["detail"] = image["detail"]
        return converted
    if kind == "file":
        file = part.get("file")
        return {"type": "input_file", **(dict(file) if isinstance(file, Mapping) else {})}
    return dict(part)


def _content(content: Any, text_type: str) -> Any:
    if isinstance(content, list):
        return [_part(part, text_type) for part in content]
    return content if isinstance(content, str) else ""


def _items(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    if role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": str(message.get("tool_call_id", "")),
                "output": _text_of(message.get("content")),
            }
        ]
    if role == "assistant":
        items: list[dict[str, Any]] = []
        content = message.get("content")
        if content:
            items.append({"role": "assistant", "content": _content(content, "output_text")})
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                items.append(
                    {
                        "type": "function_call",
                        "call_id": str(call.get("id", "")),
                        "name": str(function.get("name", "")),
                        "arguments": str(function.get("arguments", "")),
                    }
                )
        return items or [{"role": "assistant", "content": ""}]
    return [{"role": str(role or "user"), "content": _content(message.get("content"), "input_text")}]


def _tool(tool: Any) -> Any:
    function = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(function, Mapping):
        return tool
    flat = {
        "type": "function",
        **{k: v for k, v in function.items() if k in ("name", "description", "strict")},
    }
    flat["parameters"] = function.get("parameters") or {"type": "object", "properties": {}}
    return flat


def to_responses(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The ``responses.create`` arguments for one chat request (see module docstring)."""
    messages = [m for m in kwargs.get("messages") or [] if isinstance(m, Mapping)]
    leading = 0
    while leading < len(messages) and messages[leading].get("role") in _SYSTEM_ROLES:
        leading += 1
    request: dict[str, Any] = {key: kwargs[key] for key in _KEPT if key in kwargs}
    instructions = "\n\n".join(_text_of(m.get("content")) for m in messages[:leading])
    if instructions:
        request["instructions"] = instructions
    request["input"] = [item for message in messages[leading:] for item in _items(message)]
    tools = kwargs.get("tools")
    if isinstance(tools, list) and tools:
        request["tools"] = [_tool(tool) for tool in tools]
    limit = kwargs.get("max_completion_tokens", kwargs.get("max_tokens"))
    if isinstance(limit, int):
        request["max_output_tokens"] = max(limit, 16)  # the Responses minimum
    choice = kwargs.get("tool_choice")
    if isinstance(choice, str):
        request["tool_choice"] = choice
    elif isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        request["tool_choice"] = {"type": "function", "name": choice["function"].get("name")}
    return copy.deepcopy(request)


def responses_sessions(sessions: Sequence[Sequence[TraceRequest]]) -> list[list[TraceRequest]]:
    """``sessions`` on the Responses API: chat (``"openai"``) requests converted, Responses requests (a
    recording of a Responses agent) as they are; other APIs are left out."""
    converted = [
        [
            r
            if r.api == RESPONSES_API
            else TraceRequest(r.session, r.turn, RESPONSES_API, to_responses(r.kwargs))
            for r in session
            if r.api in ("openai", RESPONSES_API)
        ]
        for session in sessions
    ]
    return [session for session in converted if session]


def jitter_responses(kwargs: Mapping[str, Any], turn: int, seed: int = 0) -> dict[str, Any]:
    """A Responses request as a careless harness sends it on ``turn`` (the input is not modified)."""
    rng = random.Random(f"{seed}:{turn}")
    request = copy.deepcopy(dict(kwargs))
    clock, env = envelope(turn, rng)
    instructions = request.get("instructions")
    volatile = f"{clock}\n{env}"
    request["instructions"] = f"{volatile}\n{instructions}" if isinstance(instructions, str) else volatile
    tools = request.get("tools")
    if isinstance(tools, list):
        rng.shuffle(tools)
    shuffled: dict[str, Any] = shuffle_keys(request, rng)
    return shuffled
