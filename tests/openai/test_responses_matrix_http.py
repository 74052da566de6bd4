"""OpenAI Responses: engine x entry point x sync/async through the real ``openai`` SDK over real HTTP.

The same arrangement as ``test_matrix_http.py`` (chat): each client points at its engine's real base URL
and sends over a real ``httpx2`` transport redirected to the engine emulator served on 127.0.0.1
(``conftest.EmulatorRedirect``); vcrpy records the exchanges in ``cassettes/test_responses_matrix_http/``
and replays them matched on method, path and the exact body bytes.

Each cell makes the same call twice: with ``telos_hint={"disable": True}`` (the SDK's own body: the
baseline) and rewritten. The rewritten body must be the canonical baseline plus exactly the fields that
engine adds; ``usage_of()`` must give the numbers of the recorded response's own usage fields; a turn is
rewritten exactly once and recorded as one turn, a token count and a compaction as none. DeepSeek does
not serve the Responses API and is not a cell.

Re-record (after an intended change in emitted bytes):

    python -m pytest tests/openai/test_responses_matrix_http.py --record-mode=rewrite
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import openai
import pytest

import telos_wrap
from telos_wrap.ir.canon import canonicalize_payload
from tests.reliability.harness import sdk_has_responses_entry

from .conftest import ENDPOINTS, HttpWire
from .matrix import arun_cell, assert_cassettes_cover, cassette_text, family_key, recorded, run_cell

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes" / "test_responses_matrix_http"
NAMES = ["openai", "openai-5.6", "azure", "vllm", "sglang", "generic"]

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
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
    {"type": "web_search"},
    {
        "name": "cancel_order",
        "strict": True,
        "parameters": {
            "properties": {"order_id": {"type": "integer"}},
            "type": "object",
            "required": ["order_id"],
            "additionalProperties": False,
        },
        "type": "function",
    },
]
INSTRUCTIONS = "You are the support agent of an online shop. Be precise."
QUESTION = "When will it arrive?"
INPUT: list[dict[str, Any]] = [
    {"role": "user", "content": "Where is order 42?"},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-opaque+/="},
    {"type": "function_call", "call_id": "call_1", "name": "lookup_order", "arguments": '{"order_id": 42}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "shipped on Monday"},
    {"role": "user", "content": [{"type": "input_text", "text": QUESTION}]},
]


KEY = family_key(TOOLS)
KEY_WITHOUT_TOOLS = family_key([])  # compact() takes no tools
#: Entry points: name → (is a stream, is a turn of the session, sends tools).
ENTRIES: dict[str, tuple[bool, bool, bool]] = {
    "create": (False, True, True),
    "create-stream": (True, True, True),
    "stream": (True, True, True),
    "parse": (False, True, True),
    "with_raw_response": (False, True, True),
    "with_streaming_response": (False, True, True),
    "with_options": (False, True, True),
    "input_tokens": (False, False, True),
    "compact": (False, False, False),
}


def _expected(name: str, baseline: Mapping[str, Any], entry: str) -> dict[str, Any]:
    body: dict[str, Any] = canonicalize_payload(dict(baseline))
    if "tools" in body:
        body["tools"] = sorted(
            body["tools"], key=lambda tool: (tool["type"] == "function", tool.get("name", ""))
        )
        for tool in body["tools"]:
            if "parameters" in tool:
                tool["parameters"]["required"].sort()
    count = entry == "input_tokens"
    if name in ("openai", "azure", "openai-5.6") and not count:
        body["prompt_cache_key"] = KEY if "tools" in body else KEY_WITHOUT_TOOLS
    if name == "openai-5.6":
        if not count:
            body["prompt_cache_options"] = {"mode": "implicit"}
        last = body["input"][-1]
        last["content"][0]["prompt_cache_breakpoint"] = {"mode": "explicit"}
    if name == "sglang" and not count:
        body["tier_hint"] = "gpu"
    return body


def _check_sglang_control(body: dict[str, Any]) -> None:
    control = body.pop("cache_control")
    assert control["affinity_key"] == (KEY if "tools" in body else KEY_WITHOUT_TOOLS)
    if "path_hash" in control:
        assert control["lock_radix_path"] is True and control["prefer_tier"] == "gpu"
        assert len(control["path_hash"]) == 32 and int(control["path_hash"], 16) >= 0


def _recorded_usage(response: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``usage`` of a recorded response: the JSON body's, or a stream's ``response.completed`` event's."""
    text = cassette_text(response["body"]["string"])
    if text.startswith("event:"):
        events = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
        completed = [event for event in events if event["type"] == "response.completed"]
        earlier = [event for event in events if event is not completed[0]]
        assert len(completed) == 1 and all((e.get("response") or {}).get("usage") is None for e in earlier)
        usage: dict[str, Any] | None = completed[0]["response"]["usage"]
        return usage
    return json.loads(text).get("usage")


# -- entry points ------------------------------------------------------------------------------------------


def _sync(client: openai.OpenAI, entry: str, kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
    responses = client.responses
    if entry == "create":
        return responses.create(**kwargs), []
    if entry == "create-stream":
        stream = responses.create(**kwargs, stream=True)
        with stream:
            return stream, list(stream)
    if entry == "stream":
        with responses.stream(**kwargs) as helper:
            return helper, list(helper)
    if entry == "parse":
        return responses.parse(**kwargs), []
    if entry == "with_raw_response":
        return responses.with_raw_response.create(**kwargs).parse(), []
    if entry == "with_streaming_response":
        with responses.with_streaming_response.create(**kwargs) as response:
            return response.parse(), []
    if entry == "with_options":
        return client.with_options(timeout=30.0).responses.create(**kwargs), []
    if entry == "input_tokens":
        return responses.input_tokens.count(**kwargs), []
    return responses.compact(**kwargs), []


async def _async(client: openai.AsyncOpenAI, entry: str, kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
    responses = client.responses
    if entry == "create":
        return await responses.create(**kwargs), []
    if entry == "create-stream":
        stream = await responses.create(**kwargs, stream=True)
        async with stream:
            return stream, [event async for event in stream]
    if entry == "stream":
        async with responses.stream(**kwargs) as helper:
            return helper, [event async for event in helper]
    if entry == "parse":
        return await responses.parse(**kwargs), []
    if entry == "with_raw_response":
        raw = await responses.with_raw_response.create(**kwargs)
        return raw.parse(), []
    if entry == "with_streaming_response":
        async with responses.with_streaming_response.create(**kwargs) as response:
            return await response.parse(), []
    if entry == "with_options":
        return await client.with_options(timeout=30.0).responses.create(**kwargs), []
    if entry == "input_tokens":
        return await responses.input_tokens.count(**kwargs), []
    return await responses.compact(**kwargs), []


def _kwargs(name: str, entry: str) -> dict[str, Any]:
    kwargs = {"model": ENDPOINTS[name].model, "instructions": INSTRUCTIONS, "input": copy.deepcopy(INPUT)}
    if ENTRIES[entry][2]:
        kwargs["tools"] = copy.deepcopy(TOOLS)
    return kwargs


def _check(name: str, entry: str, cassette: Any, wire: HttpWire, result: Any, items: list[Any]) -> None:
    endpoint = ENDPOINTS[name]
    baseline, sent, response = recorded(cassette, wire)
    paths = {r.path for r in cassette.requests}
    suffix = {"input_tokens": "/responses/input_tokens", "compact": "/responses/compact"}.get(
        entry, "/responses"
    )
    assert len(paths) == 1 and paths.pop().endswith(suffix)
    if name == "sglang" and entry != "input_tokens":
        _check_sglang_control(sent)
    assert sent == _expected(name, baseline, entry)
    report = telos_wrap.usage_of(result)
    if entry == "input_tokens":
        assert report is None and isinstance(result.input_tokens, int)
        return
    if ENTRIES[entry][0]:
        assert items and items[-1].type == "response.completed"
    usage = _recorded_usage(response)
    assert usage is not None and report is not None
    assert report.engine == endpoint.engine
    details = usage.get("input_tokens_details") or {}
    read, write = details.get("cached_tokens"), details.get("cache_write_tokens")
    assert (report.cache_read, report.cache_write) == (read, write)
    assert report.raw_input == usage["input_tokens"] - (read or 0) - (write or 0)
    assert report.output == usage["output_tokens"]
    assert report.reasoning == usage["output_tokens_details"]["reasoning_tokens"]


def _skip_if_the_sdk_lacks(entry: str) -> None:
    if not sdk_has_responses_entry(entry):
        pytest.skip(f"the installed openai SDK has no responses.{entry}")


@pytest.mark.vcr
@pytest.mark.usefixtures("oai_patched")
@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("name", NAMES)
def test_sync_matrix(name: str, entry: str, http_wire: HttpWire, vcr: Any) -> None:
    _skip_if_the_sdk_lacks(entry)
    client = http_wire.client(ENDPOINTS[name])
    turns = 1 if ENTRIES[entry][1] else 0
    result, items = run_cell(
        http_wire, lambda kwargs: _sync(client, entry, kwargs), _kwargs(name, entry), turns=turns
    )
    _check(name, entry, vcr, http_wire, result, items)


@pytest.mark.vcr
@pytest.mark.usefixtures("oai_patched")
@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("name", NAMES)
def test_async_matrix(name: str, entry: str, http_wire: HttpWire, vcr: Any) -> None:
    _skip_if_the_sdk_lacks(entry)

    async def main() -> tuple[Any, list[Any]]:
        client = http_wire.async_client(ENDPOINTS[name])
        try:
            turns = 1 if ENTRIES[entry][1] else 0
            return await arun_cell(
                http_wire, lambda kwargs: _async(client, entry, kwargs), _kwargs(name, entry), turns=turns
            )
        finally:
            await client.close()

    result, items = asyncio.run(main())
    _check(name, entry, vcr, http_wire, result, items)


def test_cassettes_cover_the_matrix_and_hold_no_secrets() -> None:
    assert_cassettes_cover(CASSETTES, NAMES, ENTRIES)
