"""Scripted replies (``Emulator(replier=...)``): tool calls through the real SDKs over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from telos_wrap.emulator import REPLY_TEXT, Emulator, ToolCall, count_tool_results, serve, tool_loop

SCRIPT = [ToolCall("lookup", {"id": "42"}), ToolCall("add", {"a": 1, "b": 2})]


@pytest.fixture
def url() -> Iterator[str]:
    with serve(Emulator(replier=tool_loop(SCRIPT, "All done."))) as base:
        yield base


def _anthropic_turns(client: anthropic.Anthropic, stream: bool) -> list[Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    replies = []
    while True:
        kwargs = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages}
        if stream:
            with client.messages.stream(**kwargs) as s:
                message = s.get_final_message()
        else:
            message = client.messages.create(**kwargs)
        replies.append(message)
        calls = [b for b in message.content if b.type == "tool_use"]
        if not calls:
            return replies
        messages.append({"role": "assistant", "content": [b.model_dump() for b in message.content]})
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": c.id, "content": "ok"} for c in calls],
            }
        )


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_anthropic_tool_loop(url: str, stream: bool) -> None:
    with anthropic.Anthropic(api_key="x", base_url=url, max_retries=0) as client:
        replies = _anthropic_turns(client, stream)
    assert [m.stop_reason for m in replies] == ["tool_use", "tool_use", "end_turn"]
    calls = [b for m in replies[:2] for b in m.content if b.type == "tool_use"]
    assert [(c.name, c.input) for c in calls] == [("lookup", {"id": "42"}), ("add", {"a": 1, "b": 2})]
    assert all(c.id.startswith("toolu_emu_") for c in calls) and calls[0].id != calls[1].id
    assert replies[-1].content[0].text == "All done."


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_openai_tool_loop(url: str, stream: bool) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    finishes, calls = [], []
    with openai.OpenAI(api_key="x", base_url=f"{url}/v1", max_retries=0) as client:
        while True:
            if stream:
                with client.chat.completions.stream(model="gpt-4.1", messages=messages) as s:
                    completion = s.get_final_completion()
            else:
                completion = client.chat.completions.create(model="gpt-4.1", messages=messages)
            choice = completion.choices[0]
            finishes.append(choice.finish_reason)
            if not choice.message.tool_calls:
                break
            calls += choice.message.tool_calls
            messages.append(choice.message.model_dump(exclude_none=True))
            messages += [
                {"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in choice.message.tool_calls
            ]
    assert finishes == ["tool_calls", "tool_calls", "stop"]
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("lookup", {"id": "42"}),
        ("add", {"a": 1, "b": 2}),
    ]
    assert completion.choices[0].message.content == "All done."


def test_no_replier_answers_the_fixed_text() -> None:
    with serve(Emulator()) as url, openai.OpenAI(api_key="x", base_url=f"{url}/v1", max_retries=0) as client:
        completion = client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "hi"}]
        )
    assert completion.choices[0].message.content == REPLY_TEXT


def test_count_tool_results() -> None:
    anthropic_body = {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "a"}, {"type": "text", "text": "x"}],
            },
            {"role": "user", "content": "plain"},
        ]
    }
    assert count_tool_results("anthropic", anthropic_body) == 1
    chat_body = {"messages": [{"role": "tool", "content": "1"}, {"role": "user", "content": "2"}]}
    assert count_tool_results("openai_chat", chat_body) == 1
