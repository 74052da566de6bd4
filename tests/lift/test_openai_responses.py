"""OpenAI Responses: lift → bridge → engine on plain bodies, and ``usage_of()`` on the SDK's own objects.

The bodies use the item shapes of openai 3.54 ``types/responses/response_input_item_param.py``.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from openai.types.responses import Response

import telos_wrap
from telos_wrap.engines.openai_usage import OpenAIChatStreamUsage, parse_openai_responses_usage
from telos_wrap.errors import TelosUnreadableError
from telos_wrap.ir.canon import canonicalize_payload
from telos_wrap.lift.openai_responses import lift_openai_responses
from telos_wrap.pipeline import PrepareOptions, prepare
from telos_wrap.replay.traces import shuffle_keys

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "lookup_order",
        "description": "Find an order.",
        "parameters": {
            "type": "object",
            "required": ["region", "order_id"],
            "properties": {"order_id": {"type": "integer"}, "region": {"type": "string"}},
        },
    },
    {"type": "web_search"},
    {"type": "mcp", "server_label": "shop", "server_url": "https://mcp.example/sse"},
    {"type": "function", "name": "cancel_order", "parameters": {"type": "object", "properties": {}}},
    {"type": "file_search", "vector_store_ids": ["vs_1"]},
]
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-opaque+/="}
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": [{"type": "input_text", "text": "Where is order 42?"}]},
    REASONING,
    {"type": "function_call", "call_id": "call_1", "name": "lookup_order", "arguments": '{"order_id":42}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "shipped on Monday"},
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "x"},
    },
    {"type": "item_reference", "id": "msg_0"},
]
CLOCK = "Current time: 2026-11-21T09:30:00Z\n"
INSTRUCTIONS = "You are the support agent of an online shop.\nBe precise."


def _send(body: dict[str, Any], engine: str = "openai") -> dict[str, Any]:
    return prepare("openai_responses", body, PrepareOptions(engine=engine)).body


def test_lossless_without_envelopes() -> None:
    """With nothing to move, the generic engine's body is the canonical body with tools stably sorted."""
    body = {"model": "m", "instructions": INSTRUCTIONS, "input": copy.deepcopy(ITEMS), "tools": TOOLS}
    sent = _send(body, "generic")
    expected = canonicalize_payload({k: v for k, v in body.items() if k != "tools"})
    assert {k: v for k, v in sent.items() if k != "tools"} == expected
    assert [t.get("name", t["type"]) for t in sent["tools"]] == [
        "file_search",
        "web_search",
        "mcp",
        "cancel_order",
        "lookup_order",
    ]
    assert sent["tools"][-1]["parameters"]["required"] == ["order_id", "region"]


def test_items_never_dropped_reordered_or_altered() -> None:
    body = {"model": "m", "instructions": CLOCK + INSTRUCTIONS, "input": copy.deepcopy(ITEMS)}
    sent = _send(body, "generic")
    # every item in place, the reasoning item's opaque bytes untouched; the clock gets its own item after them
    assert sent["input"][: len(ITEMS)] == ITEMS
    assert sent["input"][1]["encrypted_content"] == REASONING["encrypted_content"]
    assert sent["input"][len(ITEMS)] == {"role": "system", "content": CLOCK}
    assert sent["instructions"] == INSTRUCTIONS


def test_clock_moves_to_an_item_of_its_own_after_the_latest_turn() -> None:
    """The user's message keeps its wire form (string or parts), so it is the same bytes as history."""
    body = {"model": "m", "instructions": CLOCK + INSTRUCTIONS, "input": "Where is order 42?"}
    sent = _send(body, "generic")
    assert sent["instructions"] == INSTRUCTIONS
    assert sent["input"] == [
        {"role": "user", "content": "Where is order 42?"},
        {"role": "system", "content": CLOCK},
    ]
    parts = [{"type": "input_text", "text": "Where is order 42?"}]
    listed = _send({**body, "input": [{"role": "user", "content": parts}]}, "generic")
    assert listed["input"] == [{"role": "user", "content": parts}, {"role": "system", "content": CLOCK}]
    # a string input with nothing to move stays a string
    assert _send({"model": "m", "instructions": INSTRUCTIONS, "input": "hi"}, "generic")["input"] == "hi"


def test_unknown_items_pass_through_in_place_and_are_recorded() -> None:
    odd = {"type": "future_item", "payload": {"b": 1, "a": [3, 2]}}
    body = {"model": "m", "input": [ITEMS[0], odd, ITEMS[3]]}
    prepared = prepare("openai_responses", body, PrepareOptions(engine="generic"))
    assert prepared.body["input"][1] == odd
    assert [r.kind for r in prepared.ir.records if r.kind == "passthrough-item"] == ["passthrough-item"]


def test_server_held_state_sends_only_new_items() -> None:
    """previous_response_id / conversation: telos adds no history and keeps the id and state fields."""
    new = [{"type": "function_call_output", "call_id": "call_9", "output": "ok"}]
    for state in ({"previous_response_id": "resp_1"}, {"conversation": "conv_1"}):
        extra = {"store": True, "truncation": "auto", "include": ["reasoning.encrypted_content"]}
        body = {"model": "gpt-4.1", "instructions": INSTRUCTIONS, "input": new, **state, **extra}
        sent = _send(body)
        assert sent["input"] == new
        for key, value in {**state, **extra}.items():
            assert sent[key] == value


def test_careless_harness_is_byte_stable() -> None:
    """Keys and tools reshuffled, clock in instructions: the stable part of the body never changes."""
    rng = random.Random(7)
    sent = []
    for turn in range(5):
        tools = copy.deepcopy(TOOLS)
        rng.shuffle(tools)
        body = {
            "model": "gpt-5.6",
            "instructions": f"Current time: 2026-11-21T09:3{turn}:00Z\n{INSTRUCTIONS}",
            "input": copy.deepcopy(ITEMS[:4]),
            "tools": tools,
        }
        sent.append(_send(shuffle_keys(body, rng)))
    stable = [{k: v for k, v in body.items() if k != "input"} for body in sent]
    assert all(body == stable[0] for body in stable)
    assert all(body["input"][:4] == sent[0]["input"][:4] for body in sent)
    assert stable[0]["prompt_cache_key"].startswith("telos-")


def test_engine_fields_per_engine() -> None:
    parts = [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    base = {"model": "gpt-5.6", "instructions": INSTRUCTIONS, "input": parts, "stream": True}
    openai = _send(base)
    assert openai["prompt_cache_options"] == {"mode": "implicit"}
    assert openai["input"][0]["content"][0]["prompt_cache_breakpoint"] == {"mode": "explicit"}
    # never on a string-content message: the marker would flip its wire form for one request only
    assert _send({**base, "input": "hi"})["input"] == "hi"
    assert "stream_options" not in openai  # Responses streams end with their usage anyway
    twelve = prepare(
        "openai_responses", base, PrepareOptions(engine="openai", hints=telos_wrap.TelosHints(ttl="12h"))
    ).body
    assert twelve["prompt_cache_options"] == {"mode": "implicit", "ttl": "12h"}
    assert _send({**base, "prompt_cache_key": "mine"})["prompt_cache_key"] == "mine"
    old = _send({**base, "model": "gpt-4.1"})
    assert "prompt_cache_options" not in old and old["input"] == parts
    vllm = prepare(
        "openai_responses", base, PrepareOptions(engine="vllm", hints=telos_wrap.TelosHints(ttl="12h"))
    ).body
    assert vllm == canonicalize_payload(base)  # no key, no options (vLLM rejects ttl 12h), no stream_options


def test_lift_rejects_non_item_input() -> None:
    with pytest.raises(TelosUnreadableError, match=r"input\[1\]"):
        lift_openai_responses({"model": "m", "input": [ITEMS[0], "loose text"]}, session_id="s")


# -- usage ------------------------------------------------------------------------------------------------

USAGE = {
    "input_tokens": 2000,
    "input_tokens_details": {
        "cached_tokens": 1536,
        "cache_write_tokens": 300,
        "cache_write_tokens_details": {"ttl_30m_tokens": 100, "ttl_12h_tokens": 200},
    },
    "output_tokens": 40,
    "output_tokens_details": {"reasoning_tokens": 25},
    "total_tokens": 2040,
}


def _response(usage: dict[str, Any] | None) -> Response:
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "gpt-5.6",
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage,
        }
    )


def test_usage_of_a_response_telos_did_not_see_is_openai_not_anthropic() -> None:
    report = telos_wrap.usage_of(_response(USAGE))
    assert report is not None
    assert report.engine == "openai"
    assert (report.raw_input, report.cache_read, report.cache_write) == (164, 1536, 300)
    assert report.total_input == 2000
    assert report.output == 40 and report.reasoning == 25
    assert report.cache_write_by_ttl == {"30m": 100, "12h": 200}


def test_usage_absent_fields_are_none() -> None:
    report = parse_openai_responses_usage({"input_tokens": 10, "output_tokens": 2}, engine="vllm")
    assert report is not None
    assert (report.cache_read, report.cache_write, report.reasoning, report.cache_write_by_ttl) == (
        None,
        None,
        None,
        None,
    )
    assert telos_wrap.usage_of(_response(None)) is None


def test_stream_usage_from_response_completed() -> None:
    accumulator = OpenAIChatStreamUsage("openai")
    accumulator.feed({"type": "response.created", "response": {"usage": None}})
    assert accumulator.report() is None
    accumulator.feed({"type": "response.completed", "response": {"usage": USAGE}})
    report = accumulator.report()
    assert report is not None and report.cache_read == 1536 and report.output == 40


def test_prompt_cache_diagnostics_become_the_miss_reason() -> None:
    from telos_wrap.engines.registry import get_engine

    engine = get_engine("openai")
    miss = {"type": "cache_miss", "reason": "tools_changed", "cache_missed_tokens": 1800}
    report = engine.parse_usage(USAGE, diagnostics=miss)
    assert report is not None and report.cache_miss_reason == miss and report.cache_read == 1536
    hit = engine.parse_usage(USAGE, diagnostics={"type": "cache_hit"})
    assert hit is not None and hit.cache_miss_reason is None
