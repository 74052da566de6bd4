"""The router flavours (``flavour_router``): OpenRouter and a LiteLLM proxy in front of Claude.

What they translate, where a tool message's marker lands per router, the Anthropic rules applied to the
translation (no marker, no cache; a marker, a write then a read; more than four, a 400 in the OpenAI
error shape), and each router's usage fields (docs/emulator.md, docs/engines.md *Routes*).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

from telos_wrap.emulator import Emulator
from telos_wrap.emulator.flavour_router import chat_to_messages

from .emu_helpers import text

MARK = {"type": "ephemeral"}
SYSTEM = {"role": "system", "content": [{"type": "text", "text": text(2000, "s"), "cache_control": MARK}]}
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}


def _conversation(marked_tool: bool) -> list[dict[str, Any]]:
    tool_part: dict[str, Any] = {"type": "text", "text": "result"}
    if marked_tool:
        tool_part["cache_control"] = MARK
    return [
        SYSTEM,
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": [tool_part]},
        {"role": "user", "content": "Current time: 10:00"},
        {"role": "system", "content": "a late system message"},
    ]


@pytest.mark.parametrize("router", ["openrouter", "litellm"])
def test_translation_hoists_system_merges_turns_and_places_the_tool_marker(router: str) -> None:
    body = chat_to_messages({"model": "anthropic/claude-sonnet-4.5", "messages": _conversation(True)}, router)
    assert body["model"] == "claude-sonnet-4-5"
    assert [block["text"][:1] for block in body["system"]] == ["s", "a"]  # every system message, in order
    assert [turn["role"] for turn in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "f", "input": {"x": 1}}
    ]
    result, clock = body["messages"][2]["content"]
    assert clock == {"type": "text", "text": "Current time: 10:00"}  # after the tool result, unmarked
    if router == "openrouter":  # the part's marker moves onto the tool_result
        assert result == {
            "type": "tool_result",
            "tool_use_id": "c1",
            "content": [{"type": "text", "text": "result"}],
            "cache_control": MARK,
        }
    else:  # LiteLLM copies the part, marker included, into the tool_result's content
        assert result == {
            "type": "tool_result",
            "tool_use_id": "c1",
            "content": [{"type": "text", "text": "result", "cache_control": MARK}],
        }


@pytest.fixture(params=["openrouter", "litellm"])
def router(request: pytest.FixtureRequest, make_openai: Callable[..., openai.OpenAI], emu: Emulator) -> Any:
    name = request.param
    emu.routes["proxy.internal"] = "litellm"
    base = "https://openrouter.ai/api/v1" if name == "openrouter" else "http://proxy.internal/v1"
    return name, make_openai(base_url=base)


def _read_write(name: str, usage: Any) -> tuple[int, int]:
    details = usage.prompt_tokens_details.model_dump()
    read = details["cached_tokens"]
    write = details["cache_write_tokens"] if name == "openrouter" else details["cache_creation_tokens"]
    if name == "litellm":  # and Anthropic's own counters beside them
        assert (
            usage.model_extra["cache_read_input_tokens"],
            usage.model_extra["cache_creation_input_tokens"],
        ) == (
            read,
            write,
        )
    return read, write


def test_claude_caches_only_at_markers(router: Any, emu: Emulator) -> None:
    name, client = router
    unmarked = [{"role": "system", "content": text(2000, "s")}, {"role": "user", "content": "hi"}]
    first = client.chat.completions.create(model="anthropic/claude-sonnet-4.5", messages=unmarked)
    again = client.chat.completions.create(model="anthropic/claude-sonnet-4.5", messages=unmarked)
    assert _read_write(name, first.usage) == (0, 0) and _read_write(name, again.usage) == (0, 0)
    marked = [SYSTEM, {"role": "user", "content": "hi"}]
    first = client.chat.completions.create(model="anthropic/claude-sonnet-4.5", messages=marked)
    again = client.chat.completions.create(model="anthropic/claude-sonnet-4.5", messages=marked)
    assert _read_write(name, first.usage) == (0, 2000)
    assert _read_write(name, again.usage) == (2000, 0)
    assert again.usage.prompt_tokens == 2000 + 1  # inclusive: read + write + the rest
    assert {r.flavour for r in emu.requests} == {name}


def test_more_than_four_markers_is_a_400_in_the_openai_shape(router: Any) -> None:
    _, client = router
    parts = [{"type": "text", "text": f"part {i}", "cache_control": MARK} for i in range(5)]
    with pytest.raises(openai.BadRequestError, match="A maximum of 4 blocks with cache_control"):
        client.chat.completions.create(
            model="claude-sonnet-4-5", messages=[{"role": "user", "content": parts}]
        )


def test_other_models_cache_automatically(router: Any) -> None:
    _, client = router
    messages = [{"role": "system", "content": text(2000, "s")}, {"role": "user", "content": "hi"}]
    client.chat.completions.create(model="openai/gpt-4.1", messages=messages)
    again = client.chat.completions.create(model="openai/gpt-4.1", messages=messages)
    assert again.usage.prompt_tokens_details.cached_tokens == 1920  # OpenAI's rules: 128-token steps
