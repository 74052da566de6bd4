"""Which request shapes the lift reads faithfully; anything else is refused before it is rewritten.

telos rewrites a request only when it can read every part of it the way the vendor will: a message
with no content, content of a wrong type, a block of a type the API does not define, a role it does
not know, a tool result that answers no tool call. A lenient server (a local engine, a proxy) may
answer such a request; rewritten, it would answer a prompt the caller never wrote (the clock line of
the system prompt moved into a message that cannot hold it, or into nothing). So the check raises
``TelosUnreadableError`` and the request goes out exactly as the SDK built it: the vendor gives its
own error (docs/reliability.md, promise 1, "Malformed requests").

The shapes are the vendors' documented request types, as the SDKs define them (anthropic 0.7x
``types/content_block_param.py`` and ``types/beta/beta_content_block_param.py``; openai 3.54
``chat_completion_*_param.py`` and ``responses/response_input_*_param.py``). A type added by a
later SDK is refused until it is listed here (the request is then sent as built: safe, and
``tests/reliability/test_bad_input.py`` fails on the newer SDK).

Only what is new to a turn is checked (``start``): a session's settled history was checked on the
turn it was fresh. Errors name a path and a Python type, never the caller's text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from telos_wrap.errors import TelosUnreadableError

__all__ = [
    "ANTHROPIC_BLOCK_TYPES",
    "CHAT_PART_TYPES",
    "RESPONSES_PART_TYPES",
    "check_anthropic",
    "check_chat",
    "check_responses",
]

#: Content block types of an Anthropic Messages request (GA and beta unions of the SDK).
ANTHROPIC_BLOCK_TYPES = frozenset(
    {
        "text",
        "image",
        "document",
        "search_result",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "tool_result",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "container_upload",
        "advisor_tool_result",
        "compaction",
        "fallback",
        "mcp_tool_listing",
        "mcp_tool_use",
        "mcp_tool_result",
        "tool_addition",
        "tool_removal",
    }
)
#: Blocks whose ``id`` a ``tool_result`` may answer (client, server and MCP tool calls).
_TOOL_CALLS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_ANTHROPIC_ROLES = frozenset({"user", "assistant"})

#: Content-part types of a Chat Completions message (user parts, and an assistant's ``refusal``).
CHAT_PART_TYPES = frozenset({"text", "image_url", "input_audio", "file", "refusal"})
_CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

#: Content-part types of a Responses message item (input parts, and an assistant's output parts).
RESPONSES_PART_TYPES = frozenset({"input_text", "input_image", "input_file", "output_text", "refusal"})
_RESPONSES_ROLES = frozenset({"user", "assistant", "system", "developer"})


def _refuse(path: str, what: str) -> TelosUnreadableError:
    return TelosUnreadableError(path, what)


def _type_name(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def _text_field(block: Mapping[str, Any], path: str, key: str = "text") -> None:
    if not isinstance(block.get(key), str):
        raise _refuse(f"{path}.{key}", f"is {_type_name(block.get(key))}, not a string")


def _typed(block: Any, path: str, known: frozenset[str] | None) -> str:
    """The ``type`` of a block that is an object with a known string type."""
    if not isinstance(block, Mapping):
        raise _refuse(path, f"is {_type_name(block)}, not a block object")
    kind = block.get("type")
    if not isinstance(kind, str):
        raise _refuse(f"{path}.type", f"is {_type_name(kind)}, not a string")
    if known is not None and kind not in known:
        raise _refuse(f"{path}.type", "is not a block type of this API")
    return kind


# -- Anthropic Messages ----------------------------------------------------------------------------


def check_anthropic(body: Mapping[str, Any], start: int = 0) -> None:
    """Raise ``TelosUnreadableError`` unless the lift reads ``body`` (a Messages request) faithfully."""
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list):
            raise _refuse("system", f"is {_type_name(system)}, not a string or a list of text blocks")
        for index, block in enumerate(system):
            path = f"system[{index}]"
            if _typed(block, path, None) != "text":
                raise _refuse(f"{path}.type", "is not 'text' (a system prompt holds text blocks)")
            _text_field(block, path)
    tools = body.get("tools")
    if tools is not None:
        _objects(tools, "tools")
    if "messages" not in body:
        return
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _refuse("messages", f"is {_type_name(messages)}, not a list")
    for index in range(start, len(messages)):
        _anthropic_message(messages, index)


def _objects(value: Any, path: str) -> None:
    if not isinstance(value, list):
        raise _refuse(path, f"is {_type_name(value)}, not a list")
    for index, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise _refuse(f"{path}[{index}]", f"is {_type_name(item)}, not an object")


def _anthropic_message(messages: Sequence[Any], index: int) -> None:
    path = f"messages[{index}]"
    message = messages[index]
    if not isinstance(message, Mapping):
        raise _refuse(path, f"is {_type_name(message)}, not a message object")
    role = message.get("role")
    if role not in _ANTHROPIC_ROLES:
        raise _refuse(f"{path}.role", "is not 'user' or 'assistant'")
    if "content" not in message:
        raise _refuse(path, "has no content")
    content = message["content"]
    if isinstance(content, str):
        if not content and role == "user":
            raise _refuse(f"{path}.content", "is empty")
        return
    if not isinstance(content, list):
        raise _refuse(f"{path}.content", f"is {_type_name(content)}, not a string or a list of blocks")
    if not content and role == "user":
        raise _refuse(f"{path}.content", "is an empty list")
    answers: list[tuple[int, Any]] = []
    for position, block in enumerate(content):
        where = f"{path}.content[{position}]"
        kind = _typed(block, where, ANTHROPIC_BLOCK_TYPES)
        if kind == "text":
            _text_field(block, where)
        elif kind == "tool_result":
            _tool_result(block, where)
            answers.append((position, block.get("tool_use_id")))
    if answers:
        _answered(messages, index, answers)


def _tool_result(block: Mapping[str, Any], path: str) -> None:
    if not isinstance(block.get("tool_use_id"), str):
        raise _refuse(f"{path}.tool_use_id", f"is {_type_name(block.get('tool_use_id'))}, not a string")
    if "content" not in block or isinstance(block["content"], str):
        return
    inner = block["content"]
    if not isinstance(inner, list):
        raise _refuse(f"{path}.content", f"is {_type_name(inner)}, not a string or a list of blocks")
    for position, item in enumerate(inner):
        where = f"{path}.content[{position}]"
        if _typed(item, where, None) == "text":
            _text_field(item, where)


def _answered(messages: Sequence[Any], index: int, answers: list[tuple[int, Any]]) -> None:
    """Each ``tool_result`` answers a tool call of the message just before (an assistant's)."""
    previous = messages[index - 1] if index > 0 else None
    calls: set[Any] = set()
    if isinstance(previous, Mapping) and previous.get("role") == "assistant":
        content = previous.get("content")
        if isinstance(content, list):
            calls = {
                block.get("id")
                for block in content
                if isinstance(block, Mapping) and block.get("type") in _TOOL_CALLS
            }
    for position, call_id in answers:
        if call_id not in calls:
            raise _refuse(
                f"messages[{index}].content[{position}]",
                "is a tool_result answering no tool_use of the message before",
            )


# -- OpenAI Chat Completions -----------------------------------------------------------------------


def check_chat(body: Mapping[str, Any], start: int = 0, leading: int = 0) -> None:
    """Raise ``TelosUnreadableError`` unless the lift reads ``body`` (a Chat Completions request)
    faithfully. ``leading``: the leading system messages (always checked); ``start``: the first
    conversation message new to this turn."""
    tools = body.get("tools")
    if tools is not None:
        _objects(tools, "tools")
    if "messages" not in body:
        return
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _refuse("messages", f"is {_type_name(messages)}, not a list")
    for index in range(min(leading, len(messages))):
        _chat_message(messages, index)
    for index in range(max(start, leading), len(messages)):
        _chat_message(messages, index)


def _chat_message(messages: Sequence[Any], index: int) -> None:
    path = f"messages[{index}]"
    message = messages[index]
    if not isinstance(message, Mapping):
        raise _refuse(path, f"is {_type_name(message)}, not a message object")
    role = message.get("role")
    if role not in _CHAT_ROLES:
        raise _refuse(f"{path}.role", "is not a Chat Completions role")
    content = message.get("content")
    if content is None:
        # An assistant's turn may be tool calls only; every other message needs its content.
        if role != "assistant":
            raise _refuse(path, "has no content")
    elif isinstance(content, list):
        if not content and role != "assistant":
            raise _refuse(f"{path}.content", "is an empty list")
        for position, part in enumerate(content):
            where = f"{path}.content[{position}]"
            kind = _typed(part, where, CHAT_PART_TYPES)
            if kind == "text":
                _text_field(part, where)
            elif kind == "refusal":
                _text_field(part, where, "refusal")
    elif not isinstance(content, str):
        raise _refuse(f"{path}.content", f"is {_type_name(content)}, not a string or a list of parts")
    if role == "tool":
        _chat_answered(messages, index)


def _chat_answered(messages: Sequence[Any], index: int) -> None:
    """A ``tool`` message answers a tool call of the assistant message before its run of tool messages."""
    call_id = messages[index].get("tool_call_id")
    if not isinstance(call_id, str):
        raise _refuse(f"messages[{index}].tool_call_id", f"is {_type_name(call_id)}, not a string")
    before = index - 1
    while before >= 0 and isinstance(messages[before], Mapping) and messages[before].get("role") == "tool":
        before -= 1
    previous = messages[before] if before >= 0 else None
    calls = previous.get("tool_calls") if isinstance(previous, Mapping) else None
    if previous is None or previous.get("role") != "assistant" or not isinstance(calls, list):
        calls = []
    if not any(isinstance(call, Mapping) and call.get("id") == call_id for call in calls):
        raise _refuse(
            f"messages[{index}]", "is a tool message answering no tool call of the assistant before"
        )


# -- OpenAI Responses ------------------------------------------------------------------------------


def check_responses(body: Mapping[str, Any]) -> None:
    """Raise ``TelosUnreadableError`` unless the lift reads ``body`` (a Responses request) faithfully.

    Item types the lift does not model still pass through whole, in place (a documented
    transformation: ``Transformation("passthrough-item")``); message items and their parts are checked.
    A function call output is not checked against the calls in ``input`` (the server may hold them).
    """
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, (str, list)):
        raise _refuse("instructions", f"is {_type_name(instructions)}, not a string")
    tools = body.get("tools")
    if tools is not None:
        _objects(tools, "tools")
    items = body.get("input")
    if items is None or isinstance(items, str):
        return
    if not isinstance(items, list):
        raise _refuse("input", f"is {_type_name(items)}, not a string or a list of items")
    for index, item in enumerate(items):
        path = f"input[{index}]"
        if not isinstance(item, Mapping):
            raise _refuse(path, f"is {_type_name(item)}, not an input item object")
        kind = item.get("type")
        if kind is None and "role" not in item:
            continue  # an item of no type and no role passes through whole (``passthrough-item``)
        if kind is None or kind == "message":
            _responses_message(item, path)
        elif not isinstance(kind, str):
            raise _refuse(f"{path}.type", f"is {_type_name(kind)}, not a string")
        # An output answering no call in ``input`` is not refused here: the server may hold the call
        # (``previous_response_id``, ``conversation``, ``item_reference``, stored items).


def _responses_message(item: Mapping[str, Any], path: str) -> None:
    if item.get("role") not in _RESPONSES_ROLES:
        raise _refuse(f"{path}.role", "is not a Responses message role")
    content = item.get("content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _refuse(f"{path}.content", f"is {_type_name(content)}, not a string or a list of parts")
    if not content:
        raise _refuse(f"{path}.content", "is an empty list")
    for position, part in enumerate(content):
        where = f"{path}.content[{position}]"
        kind = _typed(part, where, RESPONSES_PART_TYPES)
        if kind in ("input_text", "output_text"):
            _text_field(part, where)
        elif kind == "refusal":
            _text_field(part, where, "refusal")
