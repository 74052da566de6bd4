"""``POST /v1/chat/completions`` for every OpenAI-compatible flavour.

Shapes follow the installed ``openai`` SDK: ``types/chat/chat_completion.py``,
``chat_completion_chunk.py`` and ``completion_usage.py``.  Streaming sends
``chat.completion.chunk`` events and ends with ``data: [DONE]``; the usage chunk (``choices``
empty) is sent only when ``stream_options.include_usage`` is true, and then every other chunk
carries ``"usage": null`` (docs/vendor-facts.md §2.5, *Streaming*; the same convention on
DeepSeek/vLLM/SGLang).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from .chat_flavour import ChatFlavour
from .render import render_chat
from .replies import Replier, count_tool_results
from .tokens import estimate_tokens
from .windows import check_chat
from .wire import Handled, json_response, reply_text, split_words, sse_event, sse_response


def _max_tokens(body: Mapping[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def handle_chat(
    flavour: ChatFlavour,
    body: Mapping[str, Any],
    now: float,
    next_id: Callable[[], int],
    replier: Replier | None = None,
) -> Handled:
    """Validate, run the flavour's cache rules, and answer with a completion or a chunk stream."""
    if not isinstance(body.get("model"), str):
        raise flavour.error("you must provide a model parameter", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise flavour.error("'messages' must be a non-empty array", "messages")
    prompt = render_chat(body, mode=flavour.mode)
    flavour.validate(body, prompt)
    check_chat(str(body["model"]), prompt.total_tokens)  # docs/vendor-facts.md §9.3
    scripted = replier("openai_chat", body) if replier is not None else None
    calls: list[dict[str, Any]] = []
    if scripted is None:
        text, truncated = reply_text(_max_tokens(body))
        finish = "length" if truncated else "stop"
    else:
        text, seed = scripted.text, count_tool_results("openai_chat", body)
        calls = [
            {
                "id": c.call_id("openai_chat", f"{seed}:{i}"),
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json()},
            }
            for i, c in enumerate(scripted.tool_calls)
        ]
        finish = "tool_calls" if calls else "stop"
    prompt_tokens, prompt_fields = flavour.prompt_usage(body, prompt, text, now)
    completion_tokens = estimate_tokens(text + "".join(c["function"]["arguments"] for c in calls))
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        **prompt_fields,
    }
    details = flavour.completion_details()
    if details is not None:
        usage["completion_tokens_details"] = details
    completion_id = f"chatcmpl-emu-{next_id()}"
    base = {"id": completion_id, "created": int(time.time()), "model": body["model"]}
    headers = (("x-request-id", f"req_emu_{completion_id[13:]}"),)
    if body.get("stream"):
        options = body.get("stream_options")
        include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
        response = sse_response(_chunks(base, text, finish, usage if include_usage else None, calls), headers)
    else:
        completion = {
            **base,
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": _message(text, calls),
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": usage,
            "system_fingerprint": None,
        }
        response = json_response(200, completion, headers)
    return Handled(response, usage=usage, response_id=completion_id, model=str(body["model"]))


def _message(text: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message: ``content`` is null when it only calls tools."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text or (None if calls else ""),
        "refusal": None,
    }
    if calls:
        message["tool_calls"] = calls
    return message


def _chunks(
    base: Mapping[str, Any],
    text: str,
    finish: str,
    usage: dict[str, Any] | None,
    calls: list[dict[str, Any]] | None = None,
) -> list[bytes]:
    """The chunk stream; ``usage`` is the final usage chunk's payload, or None when not requested."""
    extra: dict[str, Any] = {"usage": None} if usage is not None else {}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return sse_event({**base, "object": "chat.completion.chunk", "choices": [choice], **extra})

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in split_words(text)]
    for index, call in enumerate(calls or ()):
        # First delta names the call; its arguments follow as a second delta.
        head = {"index": index, "id": call["id"], "type": "function"}
        events.append(
            chunk({"tool_calls": [{**head, "function": {"name": call["function"]["name"], "arguments": ""}}]})
        )
        events.append(
            chunk(
                {"tool_calls": [{"index": index, "function": {"arguments": call["function"]["arguments"]}}]}
            )
        )
    events.append(chunk({}, finish))
    if usage is not None:
        events.append(sse_event({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}))
    events.append(sse_event("[DONE]"))
    return events
