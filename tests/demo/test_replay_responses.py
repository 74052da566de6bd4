"""``telos-wrap replay --api responses``: chat traces as OpenAI Responses requests, careless harness."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from telos_wrap.replay.responses import jitter_responses, responses_sessions, to_responses
from telos_wrap.replay.traces import TraceRequest

from .test_replay_cli import fails, run_json, write_trace

SYSTEM = "You are a meticulous support agent. " * 200
TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look up.",
        "parameters": {"type": "object", "properties": {}},
    },
}


def _chat_session() -> list[TraceRequest]:
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    requests = []
    for turn in range(4):
        history = [*history, {"role": "user", "content": f"question {turn}"}]
        kwargs = {"model": "gpt-4o", "messages": list(history), "tools": [TOOL], "max_tokens": 64, "seed": 1}
        requests.append(TraceRequest("chat", turn, "openai", kwargs))
        call = {"id": f"call_{turn}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        history = [
            *history,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{turn}", "content": [{"type": "text", "text": "found"}]},
            {"role": "assistant", "content": f"answer {turn}"},
        ]
    return requests


def test_a_chat_request_becomes_instructions_items_and_flat_tools() -> None:
    kwargs = _chat_session()[1].kwargs
    converted = to_responses(kwargs)
    assert converted["instructions"] == SYSTEM
    assert converted["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Look up.",
            "parameters": TOOL["function"]["parameters"],
        }
    ]
    assert converted["max_output_tokens"] == 64 and "seed" not in converted and "messages" not in converted
    assert converted["input"] == [
        {"role": "user", "content": "question 0"},
        {"type": "function_call", "call_id": "call_0", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_0", "output": "found"},
        {"role": "assistant", "content": "answer 0"},
        {"role": "user", "content": "question 1"},
    ]
    assert kwargs == _chat_session()[1].kwargs, "the trace is not modified"


def test_the_careless_harness_rebuilds_instructions_and_reshuffles() -> None:
    kwargs = to_responses(_chat_session()[2].kwargs)
    one, two = jitter_responses(kwargs, 1), jitter_responses(kwargs, 2)
    assert one["instructions"].startswith("Current time:") and one["instructions"].endswith(SYSTEM)
    assert one["instructions"] != two["instructions"]
    assert jitter_responses(kwargs, 1) == one, "deterministic for a seed"
    assert list(one) != list(kwargs) or list(two) != list(kwargs), "keys reshuffled"


def test_only_chat_requests_are_converted() -> None:
    anthropic = TraceRequest("a", 0, "anthropic", {"model": "claude", "messages": []})
    sessions = responses_sessions([[anthropic], _chat_session()])
    assert len(sessions) == 1 and {r.api for r in sessions[0]} == {"responses"}


def test_replay_api_responses_through_the_openai_sdk(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl.xz"
    write_trace(path, _chat_session())
    data = run_json("replay", str(path), "--engine", "openai", "--api", "responses", "--jitter", "--json")
    recorded, jittered = data["variants"]["recorded"], data["variants"]["jittered"]
    assert recorded["telos_wrap"]["cache_read"] > 0 and recorded["as sent"]["cache_read"] > 0
    assert jittered["as sent"]["cache_read"] == 0, "a clock at the top of instructions: no reads as sent"
    assert jittered["telos_wrap"]["cache_read"] >= 0.9 * recorded["telos_wrap"]["cache_read"]
    assert all(run["errors"] == 0 for run in (*recorded.values(), *jittered.values())), "nothing refused"


def test_api_responses_needs_an_engine_that_serves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chat.jsonl.xz"
    write_trace(path, _chat_session())
    message = fails(capsys, "replay", str(path), "--engine", "deepseek", "--api", "responses")
    assert "--api responses needs --engine openai, vllm or sglang" in message


def test_the_converted_trace_is_valid_json_for_the_sdk() -> None:
    for request in responses_sessions([_chat_session()])[0]:
        json.dumps(request.kwargs)  # plain JSON, nothing the SDK would have to transform
