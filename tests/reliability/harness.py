"""The reliability harness: one fake vendor behind the real SDKs, and every entry point as data.

``Wire`` is an ``sdk_http.MockTransport`` handler that answers both vendors' endpoints the way they
answer (JSON or server-sent events, usage included) and records every request exactly as it went
on the wire — method, path, headers, body bytes. ``ENTRIES`` lists every public entry point telos
patches, for both SDKs, sync and async, streaming or not, as a function that makes the call *and
consumes it the way an application would* (iterates the stream, calls ``.parse()`` on a raw
response...) and returns what the caller saw (``Outcome``).

Replies echo a ``[req:...]`` tag found in the request, so a test can tell which request a response
answers (crossed state would show). The API keys are distinctive fakes, so a leak can be grepped.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

from tests.canned import anthropic_message
from tests.sdk_http import sdk_http

ANTHROPIC_KEY = "sk-ant-TESTKEY-reliability-4f1c9e2a7b3d5c6e"
OPENAI_KEY = "sk-proj-TESTKEY-reliability-8d2e6b1f0a9c7e5d"
#: Substrings that must never appear in anything the suite writes (cassettes, recordings, logs).
SECRETS = ("TESTKEY", ANTHROPIC_KEY, OPENAI_KEY)

ANTHROPIC_MODEL = "claude-opus-5"
OPENAI_MODEL = "gpt-4.1"
_ECHO = re.compile(r"\[req:[A-Za-z0-9_.-]+\]")
ANTHROPIC_USAGE = {
    "input_tokens": 12,
    "output_tokens": 2,
    "cache_read_input_tokens": 5,
    "cache_creation_input_tokens": 3,
}
OPENAI_USAGE = {
    "prompt_tokens": 20,
    "completion_tokens": 2,
    "total_tokens": 22,
    "prompt_tokens_details": {"cached_tokens": 8},
}


@dataclass
class Sent:
    """One request as it went on the wire."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw) if self.raw else None


Failure = Callable[[sdk_http.Request, int], sdk_http.Response | None]


class Wire:
    """A fake Anthropic + OpenAI backend for ``sdk_http.MockTransport`` (thread-safe recording).

    Args:
        fail: optional ``(request, attempt) -> Response | None``: a response to return instead of the
            normal one (an error status), or ``None`` for the normal answer; it may also raise an
            ``httpx2`` transport exception (timeout, connection error).
    """

    def __init__(self, fail: Failure | None = None) -> None:
        self.sent: list[Sent] = []
        self.requests: list[sdk_http.Request] = []
        self.fail = fail
        self._lock = threading.Lock()

    # -- recording ------------------------------------------------------------------------------

    def __call__(self, request: sdk_http.Request) -> sdk_http.Response:
        raw = request.read()
        with self._lock:
            self.sent.append(Sent(request.method, request.url.path, dict(request.headers), raw))
            self.requests.append(request)
            attempt = len(self.sent)
        if self.fail is not None:
            failed = self.fail(request, attempt)
            if failed is not None:
                return failed
        body = json.loads(raw) if raw else {}
        path = request.url.path
        if path.endswith("/count_tokens"):
            return sdk_http.Response(200, json={"input_tokens": 42})
        if path.endswith("/v1/messages"):
            return _anthropic_stream(body) if body.get("stream") else _anthropic_message(body)
        if path.endswith("/chat/completions"):
            return _openai_stream(body) if body.get("stream") else _openai_completion(body)
        if path.endswith("/responses/input_tokens"):
            return sdk_http.Response(200, json={"object": "response.input_tokens", "input_tokens": 42})
        if path.endswith("/responses/compact"):
            return sdk_http.Response(200, json=_responses_json(body, object_="response.compaction"))
        if path.endswith("/responses"):
            return (
                _responses_stream(body)
                if body.get("stream")
                else sdk_http.Response(200, json=_responses_json(body))
            )
        return sdk_http.Response(404, json={"error": {"message": f"no route {path}"}})

    @property
    def bodies(self) -> list[Any]:
        return [sent.body for sent in self.sent]

    def clear(self) -> None:
        with self._lock:
            self.sent.clear()
            self.requests.clear()


def _echo(body: Any) -> str:
    found = _ECHO.findall(json.dumps(body, ensure_ascii=False))
    return found[-1] if found else "ok"


def _anthropic_message(body: dict[str, Any]) -> sdk_http.Response:
    return sdk_http.Response(200, json=anthropic_message_json(_echo(body), body.get("model")))


def anthropic_message_json(text: str = "ok", model: Any = None) -> dict[str, Any]:
    return anthropic_message(ANTHROPIC_USAGE, id="msg_reliability", model=model or ANTHROPIC_MODEL, text=text)


def _sse(events: Iterable[tuple[str | None, Any]]) -> bytes:
    lines = []
    for name, data in events:
        if name is not None:
            lines.append(f"event: {name}")
        lines.append("data: " + (data if isinstance(data, str) else json.dumps(data)))
        lines.append("")
    return ("\n".join(lines) + "\n").encode()


def _anthropic_stream(body: dict[str, Any]) -> sdk_http.Response:
    text = _echo(body)
    message = anthropic_message_json("", body.get("model"))
    message["content"] = []
    message["stop_reason"] = None
    message["usage"] = {**ANTHROPIC_USAGE, "output_tokens": 1}
    half = max(1, len(text) // 2)
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        ("ping", {"type": "ping"}),
    ]
    for piece in (text[:half], text[half:]):
        events.append(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
            )
        )
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return sdk_http.Response(200, content=_sse(events), headers={"content-type": "text/event-stream"})


def _openai_completion(body: dict[str, Any]) -> sdk_http.Response:
    return sdk_http.Response(
        200,
        json={
            "id": "chatcmpl-reliability",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model") or OPENAI_MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": _echo(body), "refusal": None},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": dict(OPENAI_USAGE),
        },
    )


def _openai_stream(body: dict[str, Any]) -> sdk_http.Response:
    text = _echo(body)
    half = max(1, len(text) // 2)
    base = {
        "id": "chatcmpl-reliability",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": body.get("model") or OPENAI_MODEL,
    }
    chunks: list[tuple[str | None, Any]] = [
        (
            None,
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": text[:half]},
                        "finish_reason": None,
                    }
                ],
            },
        ),
        (None, {**base, "choices": [{"index": 0, "delta": {"content": text[half:]}, "finish_reason": None}]}),
        (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        chunks.append((None, {**base, "choices": [], "usage": dict(OPENAI_USAGE)}))
    chunks.append((None, "[DONE]"))
    return sdk_http.Response(200, content=_sse(chunks), headers={"content-type": "text/event-stream"})


RESPONSES_USAGE = {
    "input_tokens": 20,
    "input_tokens_details": {"cached_tokens": 8, "cache_write_tokens": 0},
    "output_tokens": 2,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 22,
}


def _responses_json(
    body: dict[str, Any], *, object_: str = "response", text: str | None = None
) -> dict[str, Any]:
    """An OpenAI Responses ``Response`` (or ``compact`` result) answering ``body``."""
    message = {
        "type": "message",
        "id": "msg_reliability",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": _echo(body) if text is None else text, "annotations": []}
        ],
    }
    if object_ != "response":
        return {
            "id": "resp_reliability",
            "object": object_,
            "created_at": 1_700_000_000,
            "output": [message],
            "usage": dict(RESPONSES_USAGE),
        }
    return {
        "id": "resp_reliability",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": body.get("model") or OPENAI_MODEL,
        "output": [message],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": dict(RESPONSES_USAGE),
    }


def _responses_stream(body: dict[str, Any]) -> sdk_http.Response:
    """The Responses event sequence; usage only on ``response.completed``."""
    text = _echo(body)
    final = _responses_json(body)
    pending = {**final, "status": "in_progress", "output": [], "usage": None}
    item = final["output"][0]
    base = {"item_id": item["id"], "output_index": 0, "content_index": 0}
    events: list[tuple[str | None, Any]] = [
        ("response.created", {"type": "response.created", "sequence_number": 0, "response": pending}),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "sequence_number": 1,
                "output_index": 0,
                "item": {**item, "content": [], "status": "in_progress"},
            },
        ),
        (
            "response.content_part.added",
            {
                "type": "response.content_part.added",
                "sequence_number": 2,
                "part": {"type": "output_text", "text": "", "annotations": []},
                **base,
            },
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": 2,
                "delta": text,
                "logprobs": [],
                **base,
            },
        ),
        (
            "response.output_text.done",
            {"type": "response.output_text.done", "sequence_number": 3, "text": text, "logprobs": [], **base},
        ),
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "sequence_number": 4, "output_index": 0, "item": item},
        ),
        ("response.completed", {"type": "response.completed", "sequence_number": 5, "response": final}),
    ]
    return sdk_http.Response(200, content=_sse(events), headers={"content-type": "text/event-stream"})


# -- clients ------------------------------------------------------------------------------------


def anthropic_client(wire: Wire, *, is_async: bool = False, max_retries: int = 0) -> Any:
    if is_async:
        return anthropic.AsyncAnthropic(
            api_key=ANTHROPIC_KEY,
            max_retries=max_retries,
            http_client=sdk_http.AsyncClient(transport=sdk_http.MockTransport(wire)),
        )
    return anthropic.Anthropic(
        api_key=ANTHROPIC_KEY,
        max_retries=max_retries,
        http_client=sdk_http.Client(transport=sdk_http.MockTransport(wire)),
    )


def openai_client(wire: Wire, *, is_async: bool = False, max_retries: int = 0) -> Any:
    if is_async:
        return openai.AsyncOpenAI(
            api_key=OPENAI_KEY,
            max_retries=max_retries,
            http_client=sdk_http.AsyncClient(transport=sdk_http.MockTransport(wire)),
        )
    return openai.OpenAI(
        api_key=OPENAI_KEY,
        max_retries=max_retries,
        http_client=sdk_http.Client(transport=sdk_http.MockTransport(wire)),
    )


def client_for(sdk: str, wire: Wire, *, is_async: bool = False, max_retries: int = 0) -> Any:
    """A client of ``sdk``: ``"anthropic"``, ``"openai"`` or ``"responses"`` (the openai client)."""
    make = anthropic_client if sdk == "anthropic" else openai_client
    return make(wire, is_async=is_async, max_retries=max_retries)


# -- requests -----------------------------------------------------------------------------------

#: A long tool description puts every reference request above the largest minimum cacheable prefix
#: of its model (docs/engines.md, "Touch only what pays"), so telos rewrites it under the default
#: ``patch()``; the system prompt stays short (below the ref-pool threshold).
TOOL_MANUAL = "".join(
    f"Rule {n}: call a_tool only for the records the user names, and quote what it returns.\n"
    for n in range(48)
)


def _last_question(tag: str) -> dict[str, Any]:
    """The request's last user turn: its tag (echoed back by the vendor double) and a reminder."""
    return {
        "role": "user",
        "content": f"second question [req:{tag}]\n<system-reminder>be brief</system-reminder>",
    }


def _strict_parameters() -> tuple[dict[str, Any], dict[str, Any]]:
    """``b_tool``'s and ``a_tool``'s parameters for OpenAI's strict tools (fresh dicts each call)."""
    b_params = {
        "type": "object",
        "required": ["y", "x"],
        "additionalProperties": False,
        "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
    }
    a_params = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    return b_params, a_params


def anthropic_kwargs(tag: str = "r") -> dict[str, Any]:
    """A request telos visibly rewrites: unsorted tools, a clock line in the system prompt, a reminder."""
    return {
        "model": ANTHROPIC_MODEL,
        "max_tokens": 64,
        "system": "You are terse.\nCurrent time: 2026-11-21T10:00:00",
        "tools": [
            {
                "name": "b_tool",
                "description": "B",
                "input_schema": {
                    "type": "object",
                    "required": ["y", "x"],
                    "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
                },
            },
            {"name": "a_tool", "description": TOOL_MANUAL, "input_schema": {"type": "object"}},
        ],
        "messages": [
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            _last_question(tag),
        ],
    }


def openai_kwargs(tag: str = "r") -> dict[str, Any]:
    """The OpenAI twin of ``anthropic_kwargs`` (strict tools, so ``parse()`` accepts them)."""
    b_params, a_params = _strict_parameters()
    return {
        "model": OPENAI_MODEL,
        "tools": [
            {"type": "function", "function": {"name": "b_tool", "strict": True, "parameters": b_params}},
            {
                "type": "function",
                "function": {
                    "name": "a_tool",
                    "description": TOOL_MANUAL,
                    "strict": True,
                    "parameters": a_params,
                },
            },
        ],
        "messages": [
            {"role": "system", "content": "You are terse.\nCurrent time: 2026-11-21T10:00:00"},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            _last_question(tag),
        ],
    }


def responses_kwargs(tag: str = "r") -> dict[str, Any]:
    """The Responses twin: a clock line in ``instructions``, unsorted flat tools, items of several kinds."""
    b_params, a_params = _strict_parameters()
    return {
        "model": OPENAI_MODEL,
        # The manual here too: ``compact`` sends no tools, and must still be above the minimum.
        "instructions": f"You are terse.\n{TOOL_MANUAL}Current time: 2026-11-21T10:00:00",
        "tools": [
            {"type": "function", "name": "b_tool", "strict": True, "parameters": b_params},
            {"type": "web_search"},
            {
                "type": "function",
                "name": "a_tool",
                "description": TOOL_MANUAL,
                "strict": True,
                "parameters": a_params,
            },
        ],
        "input": [
            {"role": "user", "content": "first question"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque=="},
            {"type": "function_call", "call_id": "c1", "name": "a_tool", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "done"},
            {"role": "assistant", "content": "first answer"},
            _last_question(tag),
        ],
    }


def kwargs_for(sdk: str, tag: str = "r") -> dict[str, Any]:
    if sdk == "responses":
        return responses_kwargs(tag)
    return anthropic_kwargs(tag) if sdk == "anthropic" else openai_kwargs(tag)


# -- entry points ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the caller got: the object returned, the object ``usage_of`` reads, the events seen."""

    result: Any
    holder: Any
    events: list[Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _dump(item: Any) -> Any:
    # warnings=False: anthropic 0.x's ParsedMessage unions make pydantic >= 2.12 warn on dump.
    return item.model_dump(mode="json", warnings=False) if hasattr(item, "model_dump") else repr(item)


async def _parsed(raw: Any) -> Any:
    """``raw.parse()`` of an async raw response: awaited, except anthropic 0.x's LegacyAPIResponse."""
    result = raw.parse()
    return (await result) if inspect.isawaitable(result) else result


def _count_kwargs(kw: dict[str, Any]) -> dict[str, Any]:
    """``count_tokens`` takes the request without ``max_tokens``."""
    return {k: v for k, v in kw.items() if k != "max_tokens"}


# Anthropic, sync.
def a_create(c: Any, kw: dict[str, Any]) -> Outcome:
    m = c.messages.create(**kw)
    return Outcome(m, m)


def a_create_stream(c: Any, kw: dict[str, Any]) -> Outcome:
    with c.messages.create(**kw, stream=True) as stream:
        events = [_dump(e) for e in stream]
    return Outcome(stream, stream, events)


def a_stream_helper(c: Any, kw: dict[str, Any]) -> Outcome:
    with c.messages.stream(**kw) as stream:
        events = [_dump(e) for e in stream]
        final = stream.get_final_message()
    return Outcome(stream, final, events, {"text": final.content[0].text})


def a_parse(c: Any, kw: dict[str, Any]) -> Outcome:
    m = c.messages.parse(**kw)
    return Outcome(m, m)


def a_raw(c: Any, kw: dict[str, Any]) -> Outcome:
    raw = c.messages.with_raw_response.create(**kw)
    return Outcome(raw, raw.parse())


def a_raw_stream(c: Any, kw: dict[str, Any]) -> Outcome:
    raw = c.messages.with_raw_response.create(**kw, stream=True)
    stream = raw.parse()
    events = [_dump(e) for e in stream]
    return Outcome(raw, stream, events)


def a_streaming_response(c: Any, kw: dict[str, Any]) -> Outcome:
    with c.messages.with_streaming_response.create(**kw) as response:
        m = response.parse()
    return Outcome(response, m)


def a_beta_create(c: Any, kw: dict[str, Any]) -> Outcome:
    m = c.beta.messages.create(**kw)
    return Outcome(m, m)


def a_beta_stream(c: Any, kw: dict[str, Any]) -> Outcome:
    with c.beta.messages.stream(**kw) as stream:
        events = [_dump(e) for e in stream]
        final = stream.get_final_message()
    return Outcome(stream, final, events)


def _runner_kwargs(c: Any, kw: dict[str, Any]) -> dict[str, Any]:
    """The tool runner without a server-held thread, where the SDK has them (anthropic >= 2.13 starts
    one by default; telos sends thread requests as built, docs/engines.md): the runner's own
    requests are what this matrix checks."""
    if "thread" in inspect.signature(c.beta.messages.tool_runner).parameters:
        return {**kw, "thread": False}
    return kw


def a_tool_runner(c: Any, kw: dict[str, Any]) -> Outcome:
    final = c.beta.messages.tool_runner(**_runner_kwargs(c, kw)).until_done()
    return Outcome(final, final)


def a_count_tokens(c: Any, kw: dict[str, Any]) -> Outcome:
    counted = c.messages.count_tokens(**_count_kwargs(kw))
    return Outcome(counted, None)


def a_beta_count_tokens(c: Any, kw: dict[str, Any]) -> Outcome:
    counted = c.beta.messages.count_tokens(**_count_kwargs(kw))
    return Outcome(counted, None)


# Anthropic, async.
async def aa_create(c: Any, kw: dict[str, Any]) -> Outcome:
    m = await c.messages.create(**kw)
    return Outcome(m, m)


async def aa_create_stream(c: Any, kw: dict[str, Any]) -> Outcome:
    stream = await c.messages.create(**kw, stream=True)
    async with stream:
        events = [_dump(e) async for e in stream]
    return Outcome(stream, stream, events)


async def aa_stream_helper(c: Any, kw: dict[str, Any]) -> Outcome:
    async with c.messages.stream(**kw) as stream:
        events = [_dump(e) async for e in stream]
        final = await stream.get_final_message()
    return Outcome(stream, final, events, {"text": final.content[0].text})


async def aa_parse(c: Any, kw: dict[str, Any]) -> Outcome:
    m = await c.messages.parse(**kw)
    return Outcome(m, m)


async def aa_raw(c: Any, kw: dict[str, Any]) -> Outcome:
    raw = await c.messages.with_raw_response.create(**kw)
    return Outcome(raw, await _parsed(raw))


async def aa_raw_stream(c: Any, kw: dict[str, Any]) -> Outcome:
    raw = await c.messages.with_raw_response.create(**kw, stream=True)
    stream = await _parsed(raw)
    events = [_dump(e) async for e in stream]
    return Outcome(raw, stream, events)


async def aa_streaming_response(c: Any, kw: dict[str, Any]) -> Outcome:
    async with c.messages.with_streaming_response.create(**kw) as response:
        m = await response.parse()
    return Outcome(response, m)


async def aa_beta_create(c: Any, kw: dict[str, Any]) -> Outcome:
    m = await c.beta.messages.create(**kw)
    return Outcome(m, m)


async def aa_beta_stream(c: Any, kw: dict[str, Any]) -> Outcome:
    async with c.beta.messages.stream(**kw) as stream:
        events = [_dump(e) async for e in stream]
        final = await stream.get_final_message()
    return Outcome(stream, final, events)


async def aa_tool_runner(c: Any, kw: dict[str, Any]) -> Outcome:
    final = await c.beta.messages.tool_runner(**_runner_kwargs(c, kw)).until_done()
    return Outcome(final, final)


async def aa_count_tokens(c: Any, kw: dict[str, Any]) -> Outcome:
    counted = await c.messages.count_tokens(**_count_kwargs(kw))
    return Outcome(counted, None)


async def aa_beta_count_tokens(c: Any, kw: dict[str, Any]) -> Outcome:
    counted = await c.beta.messages.count_tokens(**_count_kwargs(kw))
    return Outcome(counted, None)


# OpenAI, sync.
def o_create(c: Any, kw: dict[str, Any]) -> Outcome:
    m = c.chat.completions.create(**kw)
    return Outcome(m, m)


def o_create_stream(c: Any, kw: dict[str, Any]) -> Outcome:
    stream = c.chat.completions.create(**kw, stream=True)
    with stream:
        events = [_dump(e) for e in stream]
    return Outcome(stream, stream, events)


def o_parse(c: Any, kw: dict[str, Any]) -> Outcome:
    m = c.chat.completions.parse(**kw)
    return Outcome(m, m)


def o_stream_helper(c: Any, kw: dict[str, Any]) -> Outcome:
    with c.chat.completions.stream(**kw) as stream:
        events = [_dump(e) for e in stream]
        final = stream.get_final_completion()
    return Outcome(stream, stream, events, {"final": final})


def o_raw(c: Any, kw: dict[str, Any]) -> Outcome:
    raw = c.chat.completions.with_raw_response.create(**kw)
    return Outcome(raw, raw.parse())


def o_raw_stream(c: Any, kw: dict[str, Any]) -> Outcome:
    raw = c.chat.completions.with_raw_response.create(**kw, stream=True)
    stream = raw.parse()
    events = [_dump(e) for e in stream]
    return Outcome(raw, stream, events)


def o_streaming_response(c: Any, kw: dict[str, Any]) -> Outcome:
    with c.chat.completions.with_streaming_response.create(**kw) as response:
        m = response.parse()
    return Outcome(response, m)


# OpenAI, async.
async def ao_create(c: Any, kw: dict[str, Any]) -> Outcome:
    m = await c.chat.completions.create(**kw)
    return Outcome(m, m)


async def ao_create_stream(c: Any, kw: dict[str, Any]) -> Outcome:
    stream = await c.chat.completions.create(**kw, stream=True)
    async with stream:
        events = [_dump(e) async for e in stream]
    return Outcome(stream, stream, events)


async def ao_parse(c: Any, kw: dict[str, Any]) -> Outcome:
    m = await c.chat.completions.parse(**kw)
    return Outcome(m, m)


async def ao_stream_helper(c: Any, kw: dict[str, Any]) -> Outcome:
    async with c.chat.completions.stream(**kw) as stream:
        events = [_dump(e) async for e in stream]
        final = await stream.get_final_completion()
    return Outcome(stream, stream, events, {"final": final})


async def ao_raw(c: Any, kw: dict[str, Any]) -> Outcome:
    raw = await c.chat.completions.with_raw_response.create(**kw)
    return Outcome(raw, raw.parse())  # LegacyAPIResponse.parse() is synchronous on AsyncOpenAI too


async def ao_raw_stream(c: Any, kw: dict[str, Any]) -> Outcome:
    raw = await c.chat.completions.with_raw_response.create(**kw, stream=True)
    stream = raw.parse()
    events = [_dump(e) async for e in stream]
    return Outcome(raw, stream, events)


async def ao_streaming_response(c: Any, kw: dict[str, Any]) -> Outcome:
    async with c.chat.completions.with_streaming_response.create(**kw) as response:
        m = await response.parse()
    return Outcome(response, m)


@dataclass(frozen=True)
class Entry:
    """One public entry point of one SDK, sync or async.

    Attributes:
        sdk: ``"anthropic"`` or ``"openai"``.
        name: the entry point (``create``, ``create_stream``, ``stream_helper``...).
        is_async: uses the async client.
        streaming: the caller consumes a stream of events.
        count_only: a token count (no turn, no usage).
        call: makes the call and consumes it; a coroutine function when ``is_async``.
        turn: a turn of the session (False for a token count and for Responses ``compact``).
    """

    sdk: str
    name: str
    is_async: bool
    streaming: bool
    count_only: bool
    call: Callable[..., Any]
    turn: bool = True

    @property
    def id(self) -> str:
        return f"{self.sdk}-{'async' if self.is_async else 'sync'}-{self.name}"

    @property
    def has_usage(self) -> bool:
        """The response carries a ``usage`` field that telos parses (non-stream, not a count)."""
        return not self.streaming and not self.count_only

    def run(self, client: Any, kwargs: dict[str, Any]) -> Outcome:
        """Make the call (on a fresh event loop for async entries)."""
        if self.is_async:
            result: Outcome = asyncio.run(self.call(client, kwargs))
            return result
        return self.call(client, kwargs)


_A = [
    ("create", a_create, aa_create, False, False),
    ("create_stream", a_create_stream, aa_create_stream, True, False),
    ("stream_helper", a_stream_helper, aa_stream_helper, True, False),
    ("parse", a_parse, aa_parse, False, False),
    ("with_raw_response", a_raw, aa_raw, False, False),
    ("with_raw_response_stream", a_raw_stream, aa_raw_stream, True, False),
    ("with_streaming_response", a_streaming_response, aa_streaming_response, False, False),
    ("beta_create", a_beta_create, aa_beta_create, False, False),
    ("beta_stream", a_beta_stream, aa_beta_stream, True, False),
    ("beta_tool_runner", a_tool_runner, aa_tool_runner, False, False),
    ("count_tokens", a_count_tokens, aa_count_tokens, False, True),
    ("beta_count_tokens", a_beta_count_tokens, aa_beta_count_tokens, False, True),
]
_O = [
    ("create", o_create, ao_create, False),
    ("create_stream", o_create_stream, ao_create_stream, True),
    ("parse", o_parse, ao_parse, False),
    ("stream_helper", o_stream_helper, ao_stream_helper, True),
    ("with_raw_response", o_raw, ao_raw, False),
    ("with_raw_response_stream", o_raw_stream, ao_raw_stream, True),
    ("with_streaming_response", o_streaming_response, ao_streaming_response, False),
]

ENTRIES: tuple[Entry, ...] = (
    *(
        Entry("anthropic", name, is_async, streaming, count, a_call if not is_async else aa_call)
        for name, a_call, aa_call, streaming, count in _A
        for is_async in (False, True)
    ),
    *(
        Entry("openai", name, is_async, streaming, False, o_call if not is_async else ao_call)
        for name, o_call, ao_call, streaming in _O
        for is_async in (False, True)
    ),
)
ENTRY_IDS = [entry.id for entry in ENTRIES]


# OpenAI Responses (``sdk="responses"``: the openai client's ``responses`` resource).
def r_create(c: Any, kw: dict[str, Any]) -> Outcome:
    m = c.responses.create(**kw)
    return Outcome(m, m)


def r_create_stream(c: Any, kw: dict[str, Any]) -> Outcome:
    stream = c.responses.create(**kw, stream=True)
    with stream:
        events = [_dump(e) for e in stream]
    return Outcome(stream, stream, events)


def _dump_event(event: Any) -> Any:
    """A Responses helper event; its ``ParsedResponse`` snapshot does not match the declared union, which
    pydantic warns about on every dump (an SDK quirk, not what is being tested)."""
    try:
        return event.model_dump(mode="json", warnings=False)
    except TypeError:
        # pydantic 2.7 (the floor) leaves generic classes with a placeholder serializer ("'MockValSer'
        # object cannot be converted to 'SchemaSerializer'"), patched or not: build them.
        _rebuild(event)
        return event.model_dump(mode="json", warnings=False)


def _rebuild(value: Any) -> None:
    """``model_rebuild`` every pydantic model class inside ``value`` (innermost first)."""
    if isinstance(value, list):
        for item in value:
            _rebuild(item)
    elif hasattr(type(value), "model_rebuild") and hasattr(value, "__dict__"):
        for item in vars(value).values():
            _rebuild(item)
        type(value).model_rebuild(force=True)


def r_stream_helper(c: Any, kw: dict[str, Any]) -> Outcome:
    with c.responses.stream(**kw) as stream:
        events = [_dump_event(e) for e in stream]
        final = stream.get_final_response()
    return Outcome(stream, stream, events, {"text": final.output_text})


def r_parse(c: Any, kw: dict[str, Any]) -> Outcome:
    m = c.responses.parse(**kw)
    return Outcome(m, m)


def r_raw(c: Any, kw: dict[str, Any]) -> Outcome:
    raw = c.responses.with_raw_response.create(**kw)
    return Outcome(raw, raw.parse())


def r_streaming_response(c: Any, kw: dict[str, Any]) -> Outcome:
    with c.responses.with_streaming_response.create(**kw) as response:
        m = response.parse()
    return Outcome(response, m)


def r_count(c: Any, kw: dict[str, Any]) -> Outcome:
    return Outcome(c.responses.input_tokens.count(**kw), None)


def r_compact(c: Any, kw: dict[str, Any]) -> Outcome:
    m = c.responses.compact(**{k: v for k, v in kw.items() if k != "tools"})
    return Outcome(m, m)


async def ar_create(c: Any, kw: dict[str, Any]) -> Outcome:
    m = await c.responses.create(**kw)
    return Outcome(m, m)


async def ar_create_stream(c: Any, kw: dict[str, Any]) -> Outcome:
    stream = await c.responses.create(**kw, stream=True)
    async with stream:
        events = [_dump(e) async for e in stream]
    return Outcome(stream, stream, events)


async def ar_stream_helper(c: Any, kw: dict[str, Any]) -> Outcome:
    async with c.responses.stream(**kw) as stream:
        events = [_dump_event(e) async for e in stream]
        final = await stream.get_final_response()
    return Outcome(stream, stream, events, {"text": final.output_text})


async def ar_parse(c: Any, kw: dict[str, Any]) -> Outcome:
    m = await c.responses.parse(**kw)
    return Outcome(m, m)


async def ar_raw(c: Any, kw: dict[str, Any]) -> Outcome:
    raw = await c.responses.with_raw_response.create(**kw)
    return Outcome(raw, raw.parse())


async def ar_streaming_response(c: Any, kw: dict[str, Any]) -> Outcome:
    async with c.responses.with_streaming_response.create(**kw) as response:
        m = await response.parse()
    return Outcome(response, m)


async def ar_count(c: Any, kw: dict[str, Any]) -> Outcome:
    return Outcome(await c.responses.input_tokens.count(**kw), None)


async def ar_compact(c: Any, kw: dict[str, Any]) -> Outcome:
    m = await c.responses.compact(**{k: v for k, v in kw.items() if k != "tools"})
    return Outcome(m, m)


# name, sync call, async call, streaming, count_only, turn
_R = [
    ("create", r_create, ar_create, False, False, True),
    ("create_stream", r_create_stream, ar_create_stream, True, False, True),
    ("stream_helper", r_stream_helper, ar_stream_helper, True, False, True),
    ("parse", r_parse, ar_parse, False, False, True),
    ("with_raw_response", r_raw, ar_raw, False, False, True),
    ("with_streaming_response", r_streaming_response, ar_streaming_response, False, False, True),
    ("input_tokens_count", r_count, ar_count, False, True, False),
    ("compact", r_compact, ar_compact, False, False, False),
]


def sdk_has_responses_entry(name: str) -> bool:
    """Whether the installed openai SDK has this Responses entry point (openai 2.0 has neither
    ``responses.input_tokens`` nor ``responses.compact``; telos skips such patch targets too)."""
    from openai.resources.responses import Responses

    needs = {"input_tokens_count": "input_tokens", "input_tokens": "input_tokens", "compact": "compact"}
    return hasattr(Responses, needs.get(name, "create"))


#: Every Responses entry point the installed SDK has (kept apart from ``ENTRIES``:
#: ``test_responses_reliability.py``).
RESPONSES_ENTRIES: tuple[Entry, ...] = tuple(
    Entry("responses", name, is_async, streaming, count, r_call if not is_async else ar_call, turn)
    for name, r_call, ar_call, streaming, count, turn in _R
    for is_async in (False, True)
    if sdk_has_responses_entry(name)
)


def entry(entry_id: str) -> Entry:
    return next(e for e in (*ENTRIES, *RESPONSES_ENTRIES) if e.id == entry_id)
