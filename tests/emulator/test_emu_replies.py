"""Scripted replies (``Emulator(replier=...)``): tool calls through the real SDKs over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from telos_wrap.emulator import (
    REPLY_TEXT,
    Emulator,
    Reply,
    ToolCall,
    count_tool_results,
    script,
    serve,
    tool_loop,
)
from telos_wrap.emulator.replies import replies_from_json, tool_call_from_spec

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
            completion: openai.types.chat.ChatCompletion  # a ParsedChatCompletion (a subclass) when streamed
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


def _anthropic_conversation(client: anthropic.Anthropic, questions: list[str]) -> list[list[Any]]:
    """One conversation, several questions; per question the model's replies until it answers."""
    messages: list[dict[str, Any]] = []
    per_question = []
    for question in questions:
        messages.append({"role": "user", "content": question})
        replies = []
        while True:
            message = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=messages)
            replies.append(message)
            messages.append({"role": "assistant", "content": [b.model_dump() for b in message.content]})
            calls = [b for b in message.content if b.type == "tool_use"]
            if not calls:
                break
            messages.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": c.id, "content": "ok"} for c in calls],
                }
            )
        per_question.append(replies)
    return per_question


def _chat_conversation(client: openai.OpenAI, questions: list[str]) -> list[list[Any]]:
    messages: list[dict[str, Any]] = []
    per_question = []
    for question in questions:
        messages.append({"role": "user", "content": question})
        replies = []
        while True:
            message = client.chat.completions.create(model="gpt-4.1", messages=messages).choices[0].message
            replies.append(message)
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            messages += [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in message.tool_calls]
        per_question.append(replies)
    return per_question


def test_tool_loop_runs_again_for_each_question(url: str) -> None:
    """Before: the second question saw 2 tool results already and got the final text at once."""
    with anthropic.Anthropic(api_key="x", base_url=url, max_retries=0) as client:
        claude = _anthropic_conversation(client, ["first?", "second?", "third?"])
    with openai.OpenAI(api_key="x", base_url=f"{url}/openai/v1", max_retries=0) as client:
        chat = _chat_conversation(client, ["first?", "second?", "third?"])
    for replies in claude:
        assert [m.stop_reason for m in replies] == ["tool_use", "tool_use", "end_turn"]
        assert [b.name for m in replies[:2] for b in m.content if b.type == "tool_use"] == ["lookup", "add"]
        assert replies[-1].content[0].text == "All done."
    for replies in chat:
        assert [c.function.name for m in replies[:2] for c in m.tool_calls] == ["lookup", "add"]
        assert replies[-1].content == "All done." and replies[-1].tool_calls is None
    ids = [b.id for replies in claude for m in replies for b in m.content if b.type == "tool_use"]
    assert len(ids) == len(set(ids)) == 6  # no id repeats across questions


def test_script_answers_step_by_step_per_question() -> None:
    steps = [
        Reply(text="Looking.", tool_calls=(ToolCall("a", {"x": 1}), ToolCall("b"))),  # parallel calls
        Reply(text="Found it."),
    ]
    with serve(Emulator(replier=script(steps))) as base:
        with anthropic.Anthropic(api_key="x", base_url=base, max_retries=0) as client:
            claude = _anthropic_conversation(client, ["one?", "two?"])
        with openai.OpenAI(api_key="x", base_url=f"{base}/openai/v1", max_retries=0) as client:
            chat = _chat_conversation(client, ["one?", "two?"])
    for replies in claude:
        assert [m.stop_reason for m in replies] == ["tool_use", "end_turn"]
        assert [(b.type, getattr(b, "name", None)) for b in replies[0].content] == [
            ("text", None),
            ("tool_use", "a"),
            ("tool_use", "b"),
        ]
        assert replies[1].content[0].text == "Found it."
    for replies in chat:
        assert replies[0].content == "Looking." and [c.function.name for c in replies[0].tool_calls] == [
            "a",
            "b",
        ]
        assert replies[1].content == "Found it."


def test_past_the_script_the_fixed_text() -> None:
    replier = script([Reply(text="only")])
    body = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "only"}]}
    assert replier("openai_chat", {"messages": body["messages"][:1]}) == Reply(text="only")
    assert replier("openai_chat", body) is None


def test_counting_since_the_question() -> None:
    anthropic_body = {
        "messages": [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "a", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]},
            {"role": "assistant", "content": "answer"},
            {"role": "user", "content": [{"type": "text", "text": "q2"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "a", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "r"}]},
        ]
    }
    assert count_tool_results("anthropic", anthropic_body) == 2
    assert count_tool_results("anthropic", anthropic_body, since_question=True) == 1
    calls = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]}
    chat_body = {
        "messages": [
            {"role": "user", "content": "q1"},
            calls,
            {"role": "tool", "content": "1"},
            {"role": "assistant", "content": "answer"},
            {"role": "user", "content": "q2"},
            calls,
            {"role": "tool", "content": "2"},
            {"role": "tool", "content": "3"},
        ]
    }
    assert count_tool_results("openai_chat", chat_body) == 3
    assert count_tool_results("openai_chat", chat_body, since_question=True) == 2
    # A user turn after the tool results (a per-turn envelope a harness, or telos on a chat route to
    # Claude, appends there) continues the question: the loop goes on instead of starting over.
    envelope = {"messages": [*chat_body["messages"], {"role": "user", "content": "Current time: 10:00"}]}
    assert count_tool_results("openai_chat", envelope, since_question=True) == 2
    after_answer = {"messages": [*chat_body["messages"][:4], {"role": "user", "content": "Current time"}]}
    assert count_tool_results("openai_chat", after_answer, since_question=True) == 0
    # No question at all (a conversation of tool results): everything counts.
    assert count_tool_results("openai_chat", {"messages": [{"role": "tool"}]}, since_question=True) == 1


def test_command_line_specs() -> None:
    assert tool_call_from_spec('get_weather:{"city": "Paris"}') == ToolCall("get_weather", {"city": "Paris"})
    assert tool_call_from_spec("ping") == ToolCall("ping")
    assert tool_call_from_spec("ping:") == ToolCall("ping")
    for bad, says in (("", "NAME"), ("x:[1]", "JSON object"), ("x:{oops", "not JSON")):
        with pytest.raises(ValueError, match=says):
            tool_call_from_spec(bad)
    data = [{"tool_calls": [{"name": "a", "arguments": {"k": 1}}, {"name": "b"}]}, {"text": "end"}]
    assert replies_from_json(data) == (
        Reply(tool_calls=(ToolCall("a", {"k": 1}), ToolCall("b"))),
        Reply(text="end"),
    )
    bad_json: object
    for bad_json in (
        [],
        {},
        [{}],
        [{"txt": "x"}],
        [{"text": 1}],
        [{"tool_calls": [{"name": ""}]}],
        [{"tool_calls": {}}],
    ):
        with pytest.raises(ValueError):
            replies_from_json(bad_json)
