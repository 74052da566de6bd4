"""Engine by entry point by sync/async, through the real ``openai`` SDK over real HTTP, in cassettes.

Each client is pointed at its engine's real base URL (so telos resolves the engine from the URL, or
from ``patch(engines=...)`` for self-hosted vLLM/SGLang, as for a user) and sends over a real
``httpx2`` HTTP transport that moves every request to the engine emulator served on 127.0.0.1 under
that engine's flavour prefix (``conftest.EmulatorRedirect``). vcrpy records those exchanges in
``cassettes/test_matrix_http/`` and replays them, matched on method, path and the exact body bytes,
with no server running.

For each cell the same call is made twice: once with ``telos_hint={"disable": True}`` (the body exactly
as the SDK builds it: the baseline) and once rewritten. The rewritten wire body must be the canonical
baseline plus exactly the fields that engine adds — nothing else — and ``usage_of()`` must give the
numbers of that vendor's own usage fields in the recorded response. Every call must be rewritten
exactly once (``.stream()`` calls ``create`` inside), send exactly one request, leave the caller's
arguments alone, and a stream must never show the caller a usage chunk it did not ask for.

Re-record (after an intended change in emitted bytes):

    python -m pytest tests/openai/test_matrix_http.py --record-mode=rewrite
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import openai
import pytest

import telos_wrap
from telos_wrap.ir.canon import canonicalize_payload

from .conftest import ENDPOINTS, Endpoint, HttpWire
from .matrix import arun_cell, assert_cassettes_cover, cassette_text, family_key, recorded, run_cell

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes" / "test_matrix_http"


TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "strict": True,
            "name": "lookup_order",
            "description": "Find an order.",
            "parameters": {
                "type": "object",
                "additionalProperties": False,
                "required": ["order_id", "region"],
                "properties": {"region": {"type": "string"}, "order_id": {"type": "integer"}},
            },
        },
    },
    {
        "function": {
            "name": "cancel_order",
            "strict": True,
            "parameters": {
                "properties": {"order_id": {"type": "integer"}},
                "type": "object",
                "required": ["order_id"],
                "additionalProperties": False,
            },
        },
        "type": "function",
    },
]
SYSTEM_TEXT = "You are the support agent of an online shop. Be precise."
DEVELOPER_TEXT = "Answer in one sentence."
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM_TEXT},
    {"role": "developer", "content": DEVELOPER_TEXT, "name": "policy"},
    {"role": "user", "content": "Where is order 42?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": '{"order_id": 42, "region": "eu"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "shipped on Monday"},
    {"role": "user", "content": "When will it arrive?"},
]

#: Where each endpoint's chat request lands on the emulator server: flavour prefix + the SDK's path.
WIRE_PATHS = {
    "openai": "/openai/v1/chat/completions",
    "openai-5.6": "/openai/v1/chat/completions",
    "azure": "/openai/openai/deployments/gpt-4.1/chat/completions",
    "deepseek": "/deepseek/v1/chat/completions",
    "vllm": "/vllm/v1/chat/completions",
    "sglang": "/sglang/v1/chat/completions",
    "generic": "/openai/v1/chat/completions",
    "openrouter": "/openrouter/api/v1/chat/completions",
    "litellm": "/litellm/v1/chat/completions",
}
#: Endpoints that get no ``stream_options`` (an unknown server; routers, whose upstreams differ).
NO_STREAM_OPTIONS = frozenset({"generic", "openrouter", "litellm"})
#: Routers to a Claude model: part-level ``cache_control`` (docs/engines.md, *Routes*).
CLAUDE_ROUTES = frozenset({"openrouter", "litellm"})


KEY = family_key(TOOLS)


def _expected(name: str, baseline: Mapping[str, Any], stream: bool) -> dict[str, Any]:
    """The wire body telos must send for ``baseline`` on endpoint ``name``."""
    body: dict[str, Any] = canonicalize_payload(dict(baseline))
    body["tools"] = sorted(body["tools"], key=lambda tool: tool["function"]["name"])
    for tool in body["tools"]:
        tool["function"]["parameters"]["required"].sort()
    if stream and name not in NO_STREAM_OPTIONS:
        body["stream_options"] = {"include_usage": True}
    if name in CLAUDE_ROUTES:
        # The Anthropic planner on the chat request: BP-S on the last system block (the developer
        # message), BP-X on the last user part; no BP-T. Breakpoints on: system, developer, user and
        # tool string content goes out as one text part on every turn.
        for message in body["messages"]:
            if message["role"] != "assistant" and isinstance(message.get("content"), str):
                message["content"] = [{"text": message["content"], "type": "text"}]
        ephemeral = {"type": "ephemeral"}
        body["messages"][1]["content"] = [
            {"cache_control": ephemeral, "text": DEVELOPER_TEXT, "type": "text"}
        ]
        last = body["messages"][-1]["content"]
        last[-1] = {"cache_control": ephemeral, **last[-1]}
        if name == "litellm":  # LiteLLM reads a tool's own cache_control: BP-T on the last tool too
            body["tools"][-1] = {"cache_control": ephemeral, **body["tools"][-1]}
    if name in ("openai", "azure", "openai-5.6"):
        body["prompt_cache_key"] = KEY
    if name == "openai-5.6":
        body["prompt_cache_options"] = {"mode": "implicit"}
        # Breakpoints on: every role a breakpoint can sit on sends its string content as one text
        # part on every turn, marked or not (docs/engines.md: no string/parts flip between turns).
        for message in body["messages"]:
            if message["role"] != "assistant" and isinstance(message.get("content"), str):
                message["content"] = [{"text": message["content"], "type": "text"}]
        marker = {"mode": "explicit"}
        body["messages"][1]["content"] = [
            {"prompt_cache_breakpoint": marker, "text": DEVELOPER_TEXT, "type": "text"}
        ]
        last = body["messages"][-1]["content"]
        last[-1] = {"prompt_cache_breakpoint": marker, **last[-1]}
    if name == "vllm":
        body["cache_policy"] = {"pin_prefix_until_block": {"message": 1, "part": 0}}
    if name == "sglang":
        body["tier_hint"] = "gpu"
    return body


def _check_sglang_control(body: dict[str, Any]) -> None:
    """``cache_control`` carries hashes; check their shape, then drop it for the exact comparison."""
    control = body.pop("cache_control")
    assert set(control) == {"affinity_key", "lock_radix_path", "path_hash", "prefer_tier"}
    assert control["affinity_key"] == KEY
    assert control["lock_radix_path"] is True and control["prefer_tier"] == "gpu"
    assert len(control["path_hash"]) == 32 and int(control["path_hash"], 16) >= 0


def _expected_usage(engine: str, usage: Mapping[str, Any]) -> tuple[int | None, int | None, int | None]:
    """``(raw_input, cache_read, cache_write)`` read from each vendor's own field names."""
    prompt = usage["prompt_tokens"]
    details = usage.get("prompt_tokens_details")
    if engine == "deepseek":
        return usage["prompt_cache_miss_tokens"], usage["prompt_cache_hit_tokens"], 0
    if details is None:
        return prompt, None, None
    read = details["cached_tokens"]
    write = {
        "vllm": details.get("created_cache_tokens"),
        "sglang": 0,
        "litellm": usage.get("cache_creation_input_tokens"),
    }.get(engine, details.get("cache_write_tokens") or 0)
    return prompt - read - (write or 0), read, write


# -- the recorded exchange -------------------------------------------------------------------------------


def _header(response: Mapping[str, Any], name: str) -> str:
    values = [v for k, vs in response["headers"].items() if k.lower() == name for v in vs]
    return values[0] if values else ""


def _sse_chunks(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``data:`` events of a recorded SSE response, ``[DONE]`` excluded."""
    lines = cassette_text(response["body"]["string"]).splitlines()
    data = [line.removeprefix("data:").strip() for line in lines if line.startswith("data:")]
    assert data and data[-1] == "[DONE]", "a recorded stream must end in [DONE]"
    return [json.loads(item) for item in data[:-1]]


def _recorded_usage(response: Mapping[str, Any]) -> dict[str, Any] | None:
    """The vendor's ``usage`` object in a recorded response: the JSON body's, or a stream's last one."""
    if _header(response, "content-type").startswith("text/event-stream"):
        usages = [chunk["usage"] for chunk in _sse_chunks(response) if chunk.get("usage")]
        return usages[-1] if usages else None
    usage: dict[str, Any] | None = json.loads(cassette_text(response["body"]["string"]))["usage"]
    return usage


# -- entry points --------------------------------------------------------------------------------------

Call = Callable[[openai.OpenAI, dict[str, Any]], tuple[Any, list[Any]]]


def _create(client: openai.OpenAI, kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
    return client.chat.completions.create(**kwargs), []


def _create_stream(client: openai.OpenAI, kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
    stream = client.chat.completions.create(**kwargs, stream=True)
    with stream:
        chunks = list(stream)
    return stream, chunks


def _parse(client: openai.OpenAI, kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
    return client.chat.completions.parse(**kwargs), []


def _stream_helper(client: openai.OpenAI, kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
    with client.chat.completions.stream(**kwargs) as stream:
        events = list(stream)
    return stream, events


def _raw(client: openai.OpenAI, kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
    return client.chat.completions.with_raw_response.create(**kwargs).parse(), []


def _streaming_response(client: openai.OpenAI, kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
    with client.chat.completions.with_streaming_response.create(**kwargs) as response:
        return response.parse(), []


SYNC_CALLS: dict[str, tuple[Call, bool]] = {
    "create": (_create, False),
    "create-stream": (_create_stream, True),
    "parse": (_parse, False),
    "stream": (_stream_helper, True),
    "with_raw_response": (_raw, False),
    "with_streaming_response": (_streaming_response, False),
}


async def _acall(client: openai.AsyncOpenAI, entry: str, kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
    completions = client.chat.completions
    if entry == "create":
        return await completions.create(**kwargs), []
    if entry == "create-stream":
        stream = await completions.create(**kwargs, stream=True)
        async with stream:
            return stream, [chunk async for chunk in stream]
    if entry == "parse":
        return await completions.parse(**kwargs), []
    if entry == "stream":
        async with completions.stream(**kwargs) as helper:
            return helper, [event async for event in helper]
    if entry == "with_raw_response":
        raw = await completions.with_raw_response.create(**kwargs)
        return raw.parse(), []  # LegacyAPIResponse.parse() is synchronous in AsyncOpenAI too
    async with completions.with_streaming_response.create(**kwargs) as response:
        return await response.parse(), []


# -- the matrix ----------------------------------------------------------------------------------------


def _kwargs(endpoint: Endpoint) -> dict[str, Any]:
    return {"model": endpoint.model, "messages": copy.deepcopy(MESSAGES), "tools": copy.deepcopy(TOOLS)}


def _check(
    name: str, entry: str, stream: bool, cassette: Any, wire: HttpWire, result: Any, items: list[Any]
) -> None:
    endpoint = ENDPOINTS[name]
    baseline, sent, response = recorded(cassette, wire)
    assert [r.path for r in cassette.requests] == [WIRE_PATHS[name]] * 2
    if name == "sglang":
        _check_sglang_control(sent)
    assert sent == _expected(name, baseline, stream)
    usage = _recorded_usage(response)
    if entry == "create-stream":
        assert all(chunk.choices for chunk in items), "a usage-only chunk the caller did not ask for leaked"
        usage_only = [chunk for chunk in _sse_chunks(response) if not chunk["choices"]]
        assert len(usage_only) == (0 if name in NO_STREAM_OPTIONS else 1)  # telos asked for it, and hid it
    report = telos_wrap.usage_of(result)
    if stream and name in NO_STREAM_OPTIONS:
        assert usage is None  # no stream_options sent: no usage in the stream
        assert report is None  # ... and none to report
        return
    assert report is not None
    assert usage is not None
    assert report.engine == endpoint.engine
    assert report.output == usage["completion_tokens"]
    assert (report.raw_input, report.cache_read, report.cache_write) == _expected_usage(
        endpoint.engine, usage
    )
    if report.cache_read is not None:
        assert report.total_input == usage["prompt_tokens"]


@pytest.mark.vcr
@pytest.mark.usefixtures("oai_patched")
@pytest.mark.parametrize("entry", list(SYNC_CALLS))
@pytest.mark.parametrize("name", list(ENDPOINTS))
def test_sync_matrix(name: str, entry: str, http_wire: HttpWire, vcr: Any) -> None:
    client = http_wire.client(ENDPOINTS[name])
    call, stream = SYNC_CALLS[entry]
    result, items = run_cell(http_wire, lambda kwargs: call(client, kwargs), _kwargs(ENDPOINTS[name]))
    _check(name, entry, stream, vcr, http_wire, result, items)


@pytest.mark.vcr
@pytest.mark.usefixtures("oai_patched")
@pytest.mark.parametrize("entry", list(SYNC_CALLS))
@pytest.mark.parametrize("name", list(ENDPOINTS))
def test_async_matrix(name: str, entry: str, http_wire: HttpWire, vcr: Any) -> None:
    async def main() -> tuple[Any, list[Any]]:
        client = http_wire.async_client(ENDPOINTS[name])
        try:
            return await arun_cell(
                http_wire, lambda kwargs: _acall(client, entry, kwargs), _kwargs(ENDPOINTS[name])
            )
        finally:
            await client.close()

    result, items = asyncio.run(main())
    _check(name, entry, SYNC_CALLS[entry][1], vcr, http_wire, result, items)


def test_cassettes_cover_the_matrix_and_hold_no_secrets() -> None:
    """One cassette per cell, and none holds the API key or an auth header (vcr_config filters them)."""
    assert_cassettes_cover(CASSETTES, ENDPOINTS, SYNC_CALLS)
