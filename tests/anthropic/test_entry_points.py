"""Every anthropic entry point by sync/async, over real HTTP, recorded in cassettes.

Each test makes two turns of one conversation through a patched real SDK client whose requests go
over HTTP to the engine emulator (served on 127.0.0.1 when recording; replayed from
``cassettes/test_entry_points/`` otherwise, matched on the exact body bytes). It checks that the
request was rewritten exactly once (one pipeline run per HTTP request), what was rewritten on the
wire, that the SDK's own return type came back, and that ``usage_of`` reports the second turn's
cache read.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap import pipeline
from telos_wrap.ir.model import UsageReport

#: What ``with_raw_response`` returns: APIResponse, or LegacyAPIResponse in anthropic 0.x.
RAW_RESPONSE_TYPES: tuple[type, ...] = (
    (anthropic._response.APIResponse, importlib.import_module("anthropic._legacy_response").LegacyAPIResponse)
    if importlib.util.find_spec("anthropic._legacy_response") is not None
    else (anthropic._response.APIResponse,)
)

MODEL = "claude-opus-5"  # 512-token cache minimum (docs/vendor-facts.md §1.3)
SYSTEM = (
    "You are a careful assistant for an airline. "
    + " ".join(
        f"Policy {i}: passengers may change flights under rule {i} when the fare class allows it."
        for i in range(40)
    )
    + "\nCurrent time: 2026-11-21T10:00:00.123456"
)
TOOLS = [
    {
        "name": "search_flights",
        "description": "Search flights",
        "input_schema": {
            "type": "object",
            "required": ["to", "from"],
            "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
        },
    },
    {
        "name": "book",
        "description": "Book a flight",
        "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
    },
]
TURN_1 = [{"role": "user", "content": "Find me a flight from NYC to SEA on May 20th."}]
TURN_2 = [
    *TURN_1,
    {"role": "assistant", "content": "Searching now."},
    {
        "role": "user",
        "content": "The cheapest one, please.\n<system-reminder>budget: 300 USD</system-reminder>",
    },
]


def kwargs(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 64, "system": SYSTEM, "tools": TOOLS, "messages": messages}


@pytest.fixture
def lift_runs() -> Iterator[list[str]]:
    runs: list[str] = []
    pipeline._stage_hook = lambda stage: runs.append(stage) if stage == "lift" else None
    try:
        yield runs
    finally:
        pipeline._stage_hook = None


def _sync_client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test-key", base_url=url, max_retries=0)


def _async_client(url: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key="test-key", base_url=url, max_retries=0)


# Each entry point: (sync call, async call) → returns (object the SDK returned, object usage_of reads).
SyncCall = Callable[[anthropic.Anthropic, dict[str, Any]], tuple[Any, Any]]
AsyncCall = Callable[[anthropic.AsyncAnthropic, dict[str, Any]], Awaitable[tuple[Any, Any]]]


def s_create(c: anthropic.Anthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    m = c.messages.create(**kw)
    return m, m


async def a_create(c: anthropic.AsyncAnthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    m = await c.messages.create(**kw)
    return m, m


def s_create_stream(c: anthropic.Anthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    with c.messages.create(**kw, stream=True) as stream:
        events = [event.type for event in stream]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    return stream, stream


async def a_create_stream(c: anthropic.AsyncAnthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    stream = await c.messages.create(**kw, stream=True)
    async with stream:
        events = [event.type async for event in stream]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    return stream, stream


def s_stream_helper(c: anthropic.Anthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    with c.messages.stream(**kw) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == final.content[0].text
    return stream, final


async def a_stream_helper(c: anthropic.AsyncAnthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    async with c.messages.stream(**kw) as stream:
        text = "".join([chunk async for chunk in stream.text_stream])
        final = await stream.get_final_message()
    assert text == final.content[0].text
    return stream, final


def s_parse(c: anthropic.Anthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    m = c.messages.parse(**kw)
    return m, m


async def a_parse(c: anthropic.AsyncAnthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    m = await c.messages.parse(**kw)
    return m, m


def s_raw(c: anthropic.Anthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    raw = c.messages.with_raw_response.create(**kw)
    assert raw.headers.get("content-type", "").startswith("application/json")
    return raw, raw.parse()


async def a_raw(c: anthropic.AsyncAnthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    raw = await c.messages.with_raw_response.create(**kw)
    parsed = raw.parse()  # anthropic 0.x: a LegacyAPIResponse, whose parse() is synchronous
    return raw, (await parsed) if inspect.isawaitable(parsed) else parsed


def s_streaming_response(c: anthropic.Anthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    with c.messages.with_streaming_response.create(**kw) as response:
        message = response.parse()
    return response, message


async def a_streaming_response(c: anthropic.AsyncAnthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    async with c.messages.with_streaming_response.create(**kw) as response:
        message = await response.parse()
    return response, message


def s_beta_create(c: anthropic.Anthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    m = c.beta.messages.create(**kw)
    return m, m


async def a_beta_create(c: anthropic.AsyncAnthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    m = await c.beta.messages.create(**kw)
    return m, m


def s_beta_stream(c: anthropic.Anthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    with c.beta.messages.stream(**kw) as stream:
        final = stream.get_final_message()
    return stream, final


async def a_beta_stream(c: anthropic.AsyncAnthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    async with c.beta.messages.stream(**kw) as stream:
        final = await stream.get_final_message()
    return stream, final


def s_with_options(c: anthropic.Anthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    m = c.with_options(timeout=30).messages.create(**kw)
    return m, m


async def a_with_options(c: anthropic.AsyncAnthropic, kw: dict[str, Any]) -> tuple[Any, Any]:
    m = await c.with_options(timeout=30).messages.create(**kw)
    return m, m


ENTRY_POINTS: dict[str, tuple[SyncCall, AsyncCall]] = {
    "create": (s_create, a_create),
    "create_stream": (s_create_stream, a_create_stream),
    "stream_helper": (s_stream_helper, a_stream_helper),
    "parse": (s_parse, a_parse),
    "with_raw_response": (s_raw, a_raw),
    "with_streaming_response": (s_streaming_response, a_streaming_response),
    "beta_create": (s_beta_create, a_beta_create),
    "beta_stream": (s_beta_stream, a_beta_stream),
    "with_options": (s_with_options, a_with_options),
}


def sent_bodies(cassette: Any) -> list[dict[str, Any]]:
    return [json.loads(request.body) for request in cassette.requests]


def check_rewritten(body: dict[str, Any]) -> None:
    """What telos must have done to the turn-2 request on the wire."""
    assert [tool["name"] for tool in body["tools"]] == ["book", "search_flights"]  # stable sort
    assert body["tools"][1]["input_schema"]["required"] == ["from", "to"]
    assert all("Current time" not in block["text"] for block in body["system"])
    # The large system text is pooled; as the last system text it is sent in place of its stub.
    assert body["system"][0]["text"].startswith("You are a careful assistant")
    last = body["messages"][-1]["content"]
    assert last[0] == {
        "cache_control": {"type": "ephemeral"},
        "text": "The cheapest one, please.\n",
        "type": "text",
    }
    assert [block["text"] for block in last[1:]] == [
        "<system-reminder>budget: 300 USD</system-reminder>",
        "Current time: 2026-11-21T10:00:00.123456",
    ]
    markers = [b for seg in (body["tools"], body["system"]) for b in seg if "cache_control" in b]
    markers += [
        b
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if "cache_control" in b
    ]
    assert 1 < len(markers) <= 4


def check_results(results: list[tuple[Any, Any]], lift_runs: list[str], cassette: Any) -> None:
    assert len(lift_runs) == 2, "each request is rewritten exactly once"
    assert len(cassette.requests) == 2
    check_rewritten(sent_bodies(cassette)[1])
    reports = [telos_wrap.usage_of(usage_holder) for _, usage_holder in results]
    assert all(isinstance(report, UsageReport) for report in reports)
    first, second = reports
    assert first is not None and second is not None
    assert first.cache_read == 0 and (first.cache_write or 0) > 0
    assert (second.cache_read or 0) > 0 and second.cache_read == first.cache_write


@pytest.mark.vcr
@pytest.mark.usefixtures("patched")
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_sync(entry: str, emulator_url: str, lift_runs: list[str], vcr: Any) -> None:
    call = ENTRY_POINTS[entry][0]
    with _sync_client(emulator_url) as client:
        results = [call(client, kwargs(TURN_1)), call(client, kwargs(TURN_2))]
    check_results(results, lift_runs, vcr)
    if entry == "with_raw_response":
        assert isinstance(results[0][0], RAW_RESPONSE_TYPES)
    if entry == "create_stream":
        assert isinstance(results[0][0], anthropic.Stream)


@pytest.mark.vcr
@pytest.mark.usefixtures("patched")
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_async(entry: str, emulator_url: str, lift_runs: list[str], vcr: Any) -> None:
    call = ENTRY_POINTS[entry][1]

    async def run() -> list[tuple[Any, Any]]:
        async with _async_client(emulator_url) as client:
            return [await call(client, kwargs(TURN_1)), await call(client, kwargs(TURN_2))]

    results = asyncio.run(run())
    check_results(results, lift_runs, vcr)
    if entry == "create_stream":
        assert isinstance(results[0][0], anthropic.AsyncStream)


@pytest.mark.vcr
@pytest.mark.usefixtures("patched")
def test_count_tokens_counts_the_bytes_that_would_be_sent(emulator_url: str, vcr: Any) -> None:
    with _sync_client(emulator_url) as client:
        counted = client.messages.count_tokens(model=MODEL, system=SYSTEM, tools=TOOLS, messages=TURN_2)
        client.messages.create(**kwargs(TURN_2))
    counted_body, sent_body = sent_bodies(vcr)
    assert counted.input_tokens > 0
    assert counted_body["system"] == sent_body["system"] and counted_body["tools"] == sent_body["tools"]
    assert counted_body["messages"] == sent_body["messages"]
    assert "max_tokens" not in counted_body


@pytest.mark.vcr
def test_raw_wrapper_touched_before_patch_is_still_rewritten(emulator_url: str, vcr: Any) -> None:
    with _sync_client(emulator_url) as client:
        raw_messages = client.messages.with_raw_response  # cached wrapper holding the unpatched create
        telos_wrap.patch(strict=True)
        try:
            raw = raw_messages.create(**kwargs(TURN_2))
            message = raw.parse()
        finally:
            telos_wrap.unpatch()
    check_rewritten(sent_bodies(vcr)[0])
    assert telos_wrap.usage_of(message) is not None


def test_unpatch_restores_the_exact_functions() -> None:
    from anthropic._base_client import SyncAPIClient
    from anthropic.resources.messages.messages import Messages

    before = (vars(Messages)["create"], vars(Messages)["stream"], vars(SyncAPIClient)["request"])
    telos_wrap.patch()
    telos_wrap.patch()  # twice equals once
    assert vars(Messages)["create"] is not before[0]
    assert vars(Messages)["create"].__wrapped__ is before[0]
    telos_wrap.unpatch()
    telos_wrap.unpatch()  # never raises
    assert (vars(Messages)["create"], vars(Messages)["stream"], vars(SyncAPIClient)["request"]) == before
