"""The harness zoo: determinism, declared volatility, and an honest oracle bound for every style."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from telos_wrap.replay.traces import TraceRequest, jitter
from telos_wrap.testing.harnesses import STYLES, apply_style, rewrite_session, style_names

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import itertools

from _bench_bound import SessionBound, anthropic_units, openai_units

LONG = "Follow the policy below.\n" + "\n".join(f"Rule {i}: be precise about item {i}." for i in range(400))

ANTHROPIC: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "system": f"You are a careful agent. Answer briefly.\n{LONG}",
    "tools": [
        {"name": "read", "description": "Read a file", "input_schema": {"type": "object", "properties": {}}},
        {"name": "run", "description": "Run a command", "input_schema": {"type": "object", "required": []}},
    ],
    "messages": [
        {"role": "user", "content": "Fix the bug."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "u1", "name": "read", "input": {"p": "a"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "x = 1"}]},
    ],
}
OPENAI: dict[str, Any] = {
    "model": "gpt-4o",
    "tools": [
        {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}},
    ],
    "messages": [
        {"role": "system", "content": f"You are a careful agent. Answer briefly.\n{LONG}"},
        {"role": "user", "content": "Fix the bug."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1"},
    ],
}
REQUESTS = {"anthropic": ANTHROPIC, "openai": OPENAI}
CASES = [(style, api) for style in style_names() for api in REQUESTS]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_at_least_eight_styles() -> None:
    assert len(STYLES) >= 8


@pytest.mark.parametrize(("style", "api"), CASES)
def test_deterministic_and_input_untouched(style: str, api: str) -> None:
    original = copy.deepcopy(REQUESTS[api])
    first = apply_style(style, api, REQUESTS[api], turn=3, seed=7)
    second = apply_style(style, api, REQUESTS[api], turn=3, seed=7)
    assert REQUESTS[api] == original
    assert json.dumps(first.kwargs) == json.dumps(second.kwargs)  # key order included
    assert first.volatile == second.volatile


@pytest.mark.parametrize(("style", "api"), CASES)
def test_every_volatile_string_is_in_the_request(style: str, api: str) -> None:
    sent = apply_style(style, api, REQUESTS[api], turn=5)
    texts = list(_strings(sent.kwargs))
    for span in sent.volatile:
        assert any(span in text for text in texts), span


@pytest.mark.parametrize(("style", "api"), CASES)
def test_every_volatile_string_is_whole_lines(style: str, api: str) -> None:
    """What a style declares volatile is whole lines (or blocks of them), never a value inside a line:
    the unit that may move out of a prompt without being cut apart (docs/sessions.md)."""
    sent = apply_style(style, api, REQUESTS[api], turn=5)
    texts = [f"\n{text}\n" for text in _strings(sent.kwargs)]
    for span in sent.volatile:
        assert any(f"\n{span}\n" in text for text in texts), span


@pytest.mark.parametrize(("style", "api"), CASES)
def test_the_request_changes_only_where_declared(style: str, api: str) -> None:
    """Same recorded request on two turns: with the volatile strings cut out, the bound reads all of it.

    This is what keeps the oracle bound honest for a style: every change the harness makes from
    turn to turn is either declared volatile or something the bound canonicalises away (tool
    order, key order, string vs one text part), so nothing the style changes is counted as
    cacheable, and nothing it keeps is counted as lost.
    """
    units = anthropic_units if api == "anthropic" else openai_units
    session = [TraceRequest("s", turn, api, REQUESTS[api]) for turn in range(6)]
    rewritten, volatile = rewrite_session(session, style, seed=1)
    bound = SessionBound()
    for request, spans in zip(rewritten, volatile, strict=True):
        got = bound.add(api, request.kwargs, spans)
    whole = sum(tokens for _, tokens in units(rewritten[-1].kwargs, volatile[-1]))
    assert got == int(whole) // 128 * 128 if api == "openai" else got == int(whole)
    assert whole > 3000  # the long system prompt counts: the bound is not trivially met


@pytest.mark.parametrize(
    ("style", "api"),
    [c for c in CASES if c[0] not in ("shuffle", "tool-result-shapes", "shape-flips", "cleared-results")],
)
def test_volatile_styles_change_the_request_every_few_turns(style: str, api: str) -> None:
    sent = [json.dumps(apply_style(style, api, REQUESTS[api], turn).kwargs) for turn in range(12)]
    assert len(set(sent)) >= 3


def test_git_status_rests_then_changes() -> None:
    values = [apply_style("git-status", "anthropic", ANTHROPIC, turn).volatile for turn in range(40)]
    runs = sum(1 for a, b in itertools.pairwise(values) if a == b)
    assert 5 <= runs <= 38  # it rests on some turns and changes on others


def test_tagged_envelope_is_jitter() -> None:
    for api, kwargs in REQUESTS.items():
        assert apply_style("tagged-envelope", api, kwargs, 4, seed=2).kwargs == jitter(api, kwargs, 4, seed=2)


def test_system_reminder_turns_string_content_into_parts_on_the_newest_turn_only() -> None:
    kwargs = {
        **ANTHROPIC,
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
        ],
    }
    sent = apply_style("system-reminder", "anthropic", kwargs, 2).kwargs["messages"]
    assert sent[0]["content"] == "a"
    assert sent[2]["content"][0] == {"type": "text", "text": "c"}
    assert sent[2]["content"][1]["text"].startswith("<system-reminder>")


def test_volatile_block_is_a_block_or_message_of_its_own() -> None:
    anthropic = apply_style("volatile-block", "anthropic", ANTHROPIC, 1)
    assert anthropic.kwargs["system"][0]["text"] == anthropic.volatile[0]
    assert anthropic.kwargs["system"][1]["text"] == ANTHROPIC["system"]
    chat = apply_style("volatile-block", "openai", OPENAI, 1)
    assert chat.kwargs["messages"][0] == {"role": "system", "content": chat.volatile[0]}
    assert chat.kwargs["messages"][1] == OPENAI["messages"][0]


def test_shape_styles() -> None:
    shapes = set()
    for turn in range(10):
        content = apply_style("shape-flips", "openai", OPENAI, turn).kwargs["messages"][3]["content"]
        shapes.add(type(content).__name__)
    assert shapes == {"str", "list"}
    fixed = {json.dumps(apply_style("tool-result-shapes", "openai", OPENAI, t).kwargs) for t in range(10)}
    assert len(fixed) == 1


def test_unknown_style_or_api_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="known: tagged-envelope"):
        apply_style("nope", "anthropic", ANTHROPIC, 0)
    with pytest.raises(ValueError, match="add a Shape"):
        apply_style("clock-first", "responses", {}, 0)


def test_the_causal_bound_pays_for_a_first_change_the_oracle_does_not() -> None:
    # A value first in the system prompt that rests for two turns, then changes every turn.
    def request(turn: int) -> dict[str, Any]:
        value = "7" if turn < 3 else str(7 + turn)
        return {**ANTHROPIC, "system": f"Open jobs: {value}\n{ANTHROPIC['system']}"}

    volatile = [(f"Open jobs: {'7' if turn < 3 else str(7 + turn)}",) for turn in range(6)]
    oracle, causal = SessionBound(), SessionBound(causal=True)
    o = [oracle.add("anthropic", request(t), volatile[t]) for t in range(6)]
    c = [causal.add("anthropic", request(t), volatile[t]) for t in range(6)]
    assert o[0] == c[0] == 0
    assert c[1] == c[2] >= o[1] == o[2] > 3000  # resting: content like any other (its own tokens too)
    assert c[3] < 1000 < o[3]  # its first change: only a learner with foresight reads past it
    assert c[4] == o[4] and c[5] == o[5]  # known from then on: cut, like the oracle cuts it


def test_cleared_results_clears_tool_results_before_the_last_three_turns_every_eight_turns() -> None:
    def results(messages: list[dict[str, Any]]) -> list[Any]:
        return [
            block["content"]
            for message in messages
            if isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]

    messages: list[dict[str, Any]] = []
    for n in range(12):  # twelve turns: an assistant tool call, then its result
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "f", "input": {}}]}
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": f"out {n}"}],
            }
        )
    kwargs = {**ANTHROPIC, "messages": messages}
    assert results(apply_style("cleared-results", "anthropic", kwargs, 7).kwargs["messages"]) == results(
        messages
    )
    at_8 = results(apply_style("cleared-results", "anthropic", kwargs, 8).kwargs["messages"])
    at_11 = results(apply_style("cleared-results", "anthropic", kwargs, 11).kwargs["messages"])
    # Cleared at turn 8: what came before its last three turns (messages 0..9); kept so until turn 16.
    assert at_8 == at_11 == ["[output elided]"] * 5 + [f"out {n}" for n in range(5, 12)]
    assert results(messages) == [f"out {n}" for n in range(12)]  # the input is never modified
