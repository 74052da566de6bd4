"""The history memo is a cache: it never changes a byte that is sent, and never serves stale history."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from telos_wrap.history import HistoryMemo
from telos_wrap.ir.canon import canonical_json
from telos_wrap.ir.model import Api
from telos_wrap.lift import conversation as lifted_conversation
from telos_wrap.pipeline import PrepareOptions, SessionHooks, prepare
from telos_wrap.replay.traces import group_sessions, jitter, load_trace

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
OPTIONS = PrepareOptions(engine="anthropic")


class MemoHooks(SessionHooks):
    def __init__(self) -> None:
        self.memo = HistoryMemo()

    def history_memo(self) -> HistoryMemo:
        return self.memo


def session_requests(name: str, min_turns: int) -> list[dict[str, Any]]:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{path} not found")
    for group in group_sessions(load_trace(path)):
        if len(group) >= min_turns:
            return [request.kwargs for request in group]
    raise AssertionError("no long session")


@pytest.mark.parametrize(
    ("source", "api", "engine"),
    [
        ("mini-swe-agent.as-anthropic.jsonl.xz", "anthropic", "anthropic"),
        ("tau-bench.as-anthropic.jsonl.xz", "anthropic", "anthropic"),
        ("mini-swe-agent.jsonl.xz", "openai_chat", "openai"),
        ("tau-bench.jsonl.xz", "openai_chat", "openai"),
        ("swe-agent.jsonl.xz", "openai_chat", "vllm"),
    ],
)
def test_memo_sends_the_same_bytes_as_a_stateless_call(source: str, api: Api, engine: str) -> None:
    hooks = MemoHooks()
    options = PrepareOptions(engine=engine)
    requests = session_requests(source, 20)
    previous_latest = 0
    for turn, kwargs in enumerate(requests):
        body = jitter(api, kwargs, turn, seed=3) if turn % 2 else kwargs
        with_memo = prepare(api, body, options, hooks)
        stateless = prepare(api, body, options)
        assert with_memo.body == stateless.body
        assert canonical_json(with_memo.body) == canonical_json(stateless.body)
        # Append-only history: everything before the previous request's latest turn is reused.
        assert with_memo.ir.settled == previous_latest
        _, wire_messages = conversation_of(api, body)
        previous_latest = len(wire_messages) - 1 - trailing_assistant(wire_messages)
    assert len(hooks.memo) > 10


def conversation_of(api: Api, body: dict[str, Any]) -> tuple[int, list[Any]]:
    lifted = lifted_conversation(api, body)
    assert lifted is not None
    return lifted


def trailing_assistant(messages: list[dict[str, Any]]) -> int:
    """Messages after the latest user/tool message (an assistant prefill)."""
    roles = [message["role"] for message in messages]
    return len(roles) - 1 - max(i for i, role in enumerate(roles) if role in ("user", "tool"))


def conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"question {turn}"}]})
        messages.append({"role": "assistant", "content": f"answer {turn}"})
    messages.append({"role": "user", "content": "last question\n<system-reminder>r</system-reminder>"})
    return messages


def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "claude-opus-5", "max_tokens": 10, "system": "sys", "messages": messages}


def test_a_message_mutated_in_place_is_sent_as_it_now_is() -> None:
    hooks = MemoHooks()
    messages = conversation(6)
    prepare("anthropic", body(messages), OPTIONS, hooks)
    prepare("anthropic", body(messages), OPTIONS, hooks)
    assert len(hooks.memo) == 12
    messages[2]["content"][0]["text"] = "question 1, edited in place"  # same dict objects, new text
    messages[5]["content"] = "answer 2, replaced"
    sent = prepare("anthropic", body(messages), OPTIONS, hooks).body
    assert sent["messages"][2]["content"][0]["text"] == "question 1, edited in place"
    assert sent["messages"][5]["content"] == [{"text": "answer 2, replaced", "type": "text"}]
    assert sent == prepare("anthropic", body(copy.deepcopy(messages)), OPTIONS).body


def test_appended_turns_reuse_history_and_a_rewrite_truncates_it() -> None:
    hooks = MemoHooks()
    messages = conversation(4)
    first = prepare("anthropic", body(messages), OPTIONS, hooks)
    assert first.ir.settled == 0
    messages = [
        *messages[:-1],
        {"role": "user", "content": "last question"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next"},
    ]
    second = prepare("anthropic", body(messages), OPTIONS, hooks)
    assert second.ir.settled == 8, "the eight settled messages were reused"
    messages[0] = {"role": "user", "content": [{"type": "text", "text": "a different first question"}]}
    third = prepare("anthropic", body(messages), OPTIONS, hooks)
    assert third.ir.settled == 0
    assert third.body["messages"][0]["content"][0]["text"] == "a different first question"
    assert third.body == prepare("anthropic", body(messages), OPTIONS).body


def test_other_drop_patterns_empty_the_memo() -> None:
    hooks = MemoHooks()
    messages = conversation(3)
    prepare("anthropic", body(messages), OPTIONS, hooks)
    prepare("anthropic", body(messages), OPTIONS, hooks)
    assert len(hooks.memo) == 6
    other = PrepareOptions(
        engine="anthropic", hints=OPTIONS.hints.model_copy(update={"drop_patterns": ("^question 0$",)})
    )
    result = prepare("anthropic", body(messages), other, hooks)
    assert result.ir.settled == 0
    assert result.body == prepare("anthropic", body(messages), other).body


def test_an_openai_message_mutated_in_place_is_sent_as_it_now_is() -> None:
    hooks = MemoHooks()
    options = PrepareOptions(engine="openai")
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for turn in range(5):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"question {turn}"}]})
        messages.append({"role": "assistant", "content": f"answer {turn}"})
    messages.append({"role": "user", "content": "last"})
    chat = {"model": "gpt-5.6", "messages": messages}
    prepare("openai_chat", chat, options, hooks)
    assert prepare("openai_chat", chat, options, hooks).ir.settled == 10
    messages[3]["content"][0]["text"] = "question 1, edited in place"
    sent = prepare("openai_chat", chat, options, hooks)
    assert sent.ir.settled == 2, "reused up to the edited message, redone from there"
    assert sent.body["messages"][3]["content"][0]["text"] == "question 1, edited in place"
    assert sent.body == prepare("openai_chat", copy.deepcopy(chat), options).body
    messages.insert(1, {"role": "developer", "content": "Be kind."})  # the system prefix changes
    again = prepare("openai_chat", chat, options, hooks)
    assert again.ir.settled == 0
    assert again.body == prepare("openai_chat", copy.deepcopy(chat), options).body
