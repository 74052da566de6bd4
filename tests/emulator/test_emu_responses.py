"""The emulator's ``/v1/responses``: cache rules per flavour, server-held state, validation, replies.

Requests go through ``Emulator.handle`` with hand-computed prompts (4 UTF-8 bytes = 1 token), so the
expected numbers follow from the rules in docs/emulator.md ("OpenAI Responses").
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from telos_wrap.emulator import Emulator, ManualClock, VLLMConfig

from .emu_helpers import text

URLS = {
    "openai": "https://api.openai.com/v1/responses",
    "vllm": "http://vllm.local/v1/responses",
    "sglang": "http://sglang.local/v1/responses",
    "deepseek": "https://api.deepseek.com/v1/responses",
}


@pytest.fixture
def emu() -> Emulator:
    return Emulator(clock=ManualClock(), routes={"vllm.local": "vllm", "sglang.local": "sglang"})


def post(emu: Emulator, flavour: str, body: dict[str, Any], suffix: str = "") -> tuple[int, Any]:
    response = emu.handle("POST", URLS[flavour] + suffix, json.dumps(body).encode())
    return response.status, (response.json() if not body.get("stream") else response.body.decode())


def usage(emu: Emulator, flavour: str, body: dict[str, Any]) -> dict[str, Any]:
    status, answer = post(emu, flavour, body)
    assert status == 200, answer
    emu.clock.advance(5)  # type: ignore[attr-defined]
    result: dict[str, Any] = answer["usage"]
    return result


INSTRUCTIONS = text(1500, "s")


@pytest.mark.parametrize("flavour", ["openai", "vllm", "sglang"])
def test_a_repeated_prefix_is_read(emu: Emulator, flavour: str) -> None:
    body = {"model": "m", "instructions": INSTRUCTIONS, "input": "first"}
    first = usage(emu, flavour, body)
    second = usage(emu, flavour, {**body, "input": "second"})
    assert first["input_tokens_details"]["cached_tokens"] == 0
    assert second["input_tokens_details"]["cached_tokens"] >= 1024
    assert second["input_tokens"] == first["input_tokens"]
    assert second["output_tokens_details"] == {"reasoning_tokens": 0}


def test_a_changed_instruction_prefix_is_a_miss(emu: Emulator) -> None:
    usage(emu, "openai", {"model": "m", "instructions": "Current time: 1\n" + INSTRUCTIONS, "input": "a"})
    again = usage(
        emu, "openai", {"model": "m", "instructions": "Current time: 2\n" + INSTRUCTIONS, "input": "a"}
    )
    assert again["input_tokens_details"]["cached_tokens"] == 0


def test_string_content_equals_one_text_part_in_rendered_mode(emu: Emulator) -> None:
    usage(emu, "openai", {"model": "m", "input": [{"role": "user", "content": text(1500)}]})
    parts = [{"role": "user", "content": [{"type": "input_text", "text": text(1500)}]}]
    assert (
        usage(emu, "openai", {"model": "m", "input": parts})["input_tokens_details"]["cached_tokens"] >= 1024
    )
    emu.mode = "byte-exact"
    emu.reset()
    usage(emu, "openai", {"model": "m", "input": [{"role": "user", "content": text(1500)}]})
    assert usage(emu, "openai", {"model": "m", "input": parts})["input_tokens_details"]["cached_tokens"] == 0


def test_previous_response_id_prepends_the_stored_context(emu: Emulator) -> None:
    status, first = post(emu, "openai", {"model": "m", "instructions": "be brief", "input": text(1500)})
    assert status == 200
    follow = usage(emu, "openai", {"model": "m", "previous_response_id": first["id"], "input": "more"})
    assert follow["input_tokens"] > first["usage"]["input_tokens"]
    assert follow["input_tokens_details"]["cached_tokens"] == 0  # instructions are not carried over
    status, error = post(emu, "openai", {"model": "m", "previous_response_id": "resp_nope", "input": "x"})
    assert status == 400 and "resp_nope" in error["error"]["message"]


def test_a_conversation_accumulates_items(emu: Emulator) -> None:
    one = usage(emu, "openai", {"model": "m", "conversation": "conv_1", "input": text(1500)})
    two = usage(emu, "openai", {"model": "m", "conversation": {"id": "conv_1"}, "input": "next"})
    assert two["input_tokens"] > one["input_tokens"] and two["input_tokens_details"]["cached_tokens"] >= 1024


def test_validation_per_flavour(emu: Emulator) -> None:
    assert post(emu, "openai", {"model": "m", "input": "x", "stream_options_x": 1})[0] == 400
    options = {"mode": "implicit", "ttl": "12h"}
    assert post(emu, "openai", {"model": "gpt-4.1", "input": "x", "prompt_cache_options": options})[0] == 400
    assert post(emu, "openai", {"model": "gpt-5.6", "input": "x", "prompt_cache_options": options})[0] == 200
    status, error = post(emu, "vllm", {"model": "q", "input": "x", "prompt_cache_options": options})
    assert status == 400 and "ttl" in json.dumps(error)
    assert post(emu, "vllm", {"model": "q", "input": "x", "prompt_cache_options": {"ttl": "30m"}})[0] == 200
    assert post(emu, "sglang", {"model": "q", "input": "x", "anything": True})[0] == 200
    assert post(emu, "deepseek", {"model": "deepseek-chat", "input": "x"})[0] == 404
    assert post(emu, "openai", {"model": "m", "input": ["loose"]})[0] == 400


def test_a_user_turn_with_a_function_tool_gets_a_call_then_text(emu: Emulator) -> None:
    tools = [
        {"type": "web_search"},
        {
            "type": "function",
            "name": "zeta",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        },
        {"type": "function", "name": "alpha", "parameters": {"type": "object", "properties": {}}},
    ]
    _, called = post(emu, "openai", {"model": "m", "input": "hi", "tools": tools})
    call = called["output"][0]
    assert (call["type"], call["name"], call["arguments"]) == ("function_call", "alpha", "{}")
    items = ["hi", call, {"type": "function_call_output", "call_id": call["call_id"], "output": "ok"}]
    items[0] = {"role": "user", "content": "hi"}
    _, answered = post(emu, "openai", {"model": "m", "input": items, "tools": tools})
    assert answered["output"][0]["type"] == "message"
    # a trailing system item after the user's message does not change the turn
    trailing = [{"role": "user", "content": "hi"}, {"role": "system", "content": "Current time: 1"}]
    assert (
        post(emu, "openai", {"model": "m", "input": trailing, "tools": tools})[1]["output"][0]["name"]
        == "alpha"
    )
    none = post(emu, "openai", {"model": "m", "input": "hi", "tools": tools, "tool_choice": "none"})[1]
    assert none["output"][0]["type"] == "message"


def test_a_stream_carries_usage_only_on_response_completed(emu: Emulator) -> None:
    _, body = post(emu, "openai", {"model": "m", "input": "hi", "stream": True})
    events = [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]
    kinds = [event["type"] for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert all((event.get("response") or {}).get("usage") is None for event in events[:-1])
    assert events[-1]["response"]["usage"]["input_tokens"] > 0


def test_token_count_and_compaction(emu: Emulator) -> None:
    body = {"model": "m", "instructions": INSTRUCTIONS, "input": "x"}
    status, counted = post(emu, "openai", body, "/input_tokens")
    assert status == 200 and counted == {
        "object": "response.input_tokens",
        "input_tokens": counted["input_tokens"],
    }
    assert emu.requests[-1].usage is None
    _, compacted = post(emu, "openai", body, "/compact")
    assert (
        compacted["object"] == "response.compaction"
        and compacted["usage"]["input_tokens"] == counted["input_tokens"]
    )
    again = usage(emu, "openai", body)
    assert again["input_tokens_details"]["cached_tokens"] >= 1024  # compaction read and wrote the prefix


def test_flag_off_omits_the_cache_details() -> None:
    emu = Emulator(
        clock=ManualClock(),
        routes={"vllm.local": "vllm"},
        vllm=VLLMConfig(enable_prompt_tokens_details=False),
    )
    status, answer = post(emu, "vllm", {"model": "q", "input": "x"})
    assert status == 200 and "input_tokens_details" not in answer["usage"]
