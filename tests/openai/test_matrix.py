"""Engine by entry point by sync/async, through the real ``openai`` SDK and the engine emulator.

For each cell the same call is made twice: once with ``telos_hint={"disable": True}`` (the body exactly
as the SDK builds it: the baseline) and once rewritten. The rewritten wire body must be the canonical
baseline plus exactly the fields that engine adds — nothing else — and ``usage_of()`` must give the
numbers of that vendor's usage shape. Every call must be rewritten exactly once (``.stream()`` calls
``create`` inside) and a stream must never show the caller a usage chunk it did not ask for.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.ir.canon import canonical_bytes, canonical_json, canonicalize_payload, canonicalize_tool_def

from .conftest import ENDPOINTS, Endpoint

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


def _family_key() -> str:
    """The documented prompt_cache_key: sha256 over canonical tools, PIN system blocks, ref slugs."""
    material = {
        "tools": sorted(canonical_json(canonicalize_tool_def(tool)) for tool in TOOLS),
        "system": [canonical_json({"type": "text", "text": text}) for text in (SYSTEM_TEXT, DEVELOPER_TEXT)],
        "refs": [],
    }
    return "telos-" + hashlib.sha256(canonical_bytes(material)).hexdigest()[:16]


KEY = _family_key()


def _expected(name: str, baseline: Mapping[str, Any], stream: bool) -> dict[str, Any]:
    """The wire body telos must send for ``baseline`` on endpoint ``name``."""
    body: dict[str, Any] = canonicalize_payload(dict(baseline))
    body["tools"] = sorted(body["tools"], key=lambda tool: tool["function"]["name"])
    for tool in body["tools"]:
        tool["function"]["parameters"]["required"].sort()
    if stream and name != "generic":
        body["stream_options"] = {"include_usage": True}
    if name in ("openai", "azure", "openai-5.6"):
        body["prompt_cache_key"] = KEY
    if name == "openai-5.6":
        body["prompt_cache_options"] = {"mode": "implicit"}
        marker = {"mode": "explicit"}
        body["messages"][1]["content"] = [
            {"prompt_cache_breakpoint": marker, "text": DEVELOPER_TEXT, "type": "text"}
        ]
        last = body["messages"][-1]
        last["content"] = [{"prompt_cache_breakpoint": marker, "text": last["content"], "type": "text"}]
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
    write = {"vllm": details.get("created_cache_tokens"), "sglang": 0}.get(
        engine, details.get("cache_write_tokens") or 0
    )
    return prompt - read - (write or 0), read, write


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


def _run(
    emu: Emulator, call: Callable[[dict[str, Any]], tuple[Any, list[Any]]], endpoint: Endpoint
) -> tuple[dict[str, Any], dict[str, Any], Any, list[Any]]:
    """Baseline call (telos disabled) then the rewritten call; returns both wire bodies and the result."""
    kwargs = {"model": endpoint.model, "messages": copy.deepcopy(MESSAGES), "tools": copy.deepcopy(TOOLS)}
    before = copy.deepcopy(kwargs)
    call({**kwargs, "telos_hint": {"disable": True}})
    baseline = emu.requests[-1].body
    count = len(emu.requests)
    with telos_wrap.session() as session:
        result, items = call(kwargs)
    assert len(emu.requests) == count + 1, "one call must send exactly one request"
    assert session.stats.requests == 1, "the body must be rewritten exactly once"
    assert kwargs == before, "the caller's arguments must not be mutated"
    return baseline, emu.requests[-1].body, result, items


def _check(name: str, entry: str, stream: bool, emu: Emulator, run: tuple[Any, ...]) -> None:
    baseline, sent, result, items = run
    endpoint = ENDPOINTS[name]
    assert emu.requests[-1].status == 200, emu.requests[-1].error
    if name == "sglang":
        _check_sglang_control(sent)
    assert sent == _expected(name, baseline, stream)
    if entry == "create-stream":
        assert all(chunk.choices for chunk in items), "a usage-only chunk the caller did not ask for leaked"
    report = telos_wrap.usage_of(result)
    if stream and name == "generic":
        assert report is None  # no stream_options sent to an unknown server: no usage to report
        return
    assert report is not None
    usage = emu.requests[-1].usage
    assert usage is not None
    assert report.engine == endpoint.engine
    assert report.output == usage["completion_tokens"]
    assert (report.raw_input, report.cache_read, report.cache_write) == _expected_usage(
        endpoint.engine, usage
    )
    if report.cache_read is not None:
        assert report.total_input == usage["prompt_tokens"]


@pytest.mark.usefixtures("oai_patched")
@pytest.mark.parametrize("entry", list(SYNC_CALLS))
@pytest.mark.parametrize("name", list(ENDPOINTS))
def test_sync_matrix(
    name: str, entry: str, emu: Emulator, make_client: Callable[[Endpoint], openai.OpenAI]
) -> None:
    client = make_client(ENDPOINTS[name])
    call, stream = SYNC_CALLS[entry]
    run = _run(emu, lambda kwargs: call(client, kwargs), ENDPOINTS[name])
    _check(name, entry, stream, emu, run)


@pytest.mark.usefixtures("oai_patched")
@pytest.mark.parametrize("entry", list(SYNC_CALLS))
@pytest.mark.parametrize("name", list(ENDPOINTS))
def test_async_matrix(
    name: str, entry: str, emu: Emulator, make_async_client: Callable[[Endpoint], openai.AsyncOpenAI]
) -> None:
    async def main() -> tuple[Any, ...]:
        client = make_async_client(ENDPOINTS[name])
        try:
            kwargs = {
                "model": ENDPOINTS[name].model,
                "messages": copy.deepcopy(MESSAGES),
                "tools": copy.deepcopy(TOOLS),
            }
            before = copy.deepcopy(kwargs)
            await _acall(client, entry, {**kwargs, "telos_hint": {"disable": True}})
            baseline = emu.requests[-1].body
            count = len(emu.requests)
            async with telos_wrap.session() as session:
                result, items = await _acall(client, entry, kwargs)
            assert len(emu.requests) == count + 1
            assert session.stats.requests == 1
            assert kwargs == before
            return baseline, emu.requests[-1].body, result, items
        finally:
            await client.close()

    run = asyncio.run(main())
    _check(name, entry, SYNC_CALLS[entry][1], emu, run)
