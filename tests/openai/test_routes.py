"""Routes over the OpenAI wire (docs/engines.md, *Routes*): which engine a URL gets, and what the
breakpoint routes (OpenRouter, a LiteLLM proxy) place for a Claude model and leave alone otherwise."""

from __future__ import annotations

import copy
import json
from typing import Any

import openai
import pytest

import telos_wrap
from telos_wrap.config import PatchConfig
from telos_wrap.emulator import Emulator, serve
from telos_wrap.emulator.flavour_router import chat_to_messages
from telos_wrap.engines.registry import engine_names
from telos_wrap.ir.hints import TelosHints
from telos_wrap.lift.user_split import SplitPatterns
from telos_wrap.patch.routing import resolve_openai_engine
from telos_wrap.pipeline import PrepareOptions, SessionHooks, prepare

SYSTEM = "You are a careful agent.\n" + "".join(
    f"Rule {i}: keep replies short and cite files.\n" for i in range(150)
)
TOOLS = [
    {"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {}}}}
]


def _body(model: str, turns: int = 30, clock: bool = True) -> dict[str, Any]:
    system = SYSTEM + ("Current time: 2026-11-25T10:00:00Z\n" if clock else "")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Go."},
    ]
    for i in range(turns):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"file {i}: " + "x" * 200})
    return {"model": model, "messages": messages, "tools": TOOLS}


def _markers(value: Any, path: str = "") -> list[str]:
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "cache_control":
                found.append(path)
            found += _markers(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _markers(item, f"{path}[{index}]")
    return found


@pytest.mark.parametrize(
    ("base_url", "named", "engine"),
    [
        ("https://openrouter.ai/api/v1", {}, "openrouter"),
        ("https://openrouter.ai/api/v1/", {}, "openrouter"),
        ("http://127.0.0.1:4000/v1", {}, "generic"),  # a LiteLLM proxy is never guessed
        ("http://127.0.0.1:4000/v1", {"http://127.0.0.1:4000/v1": "litellm"}, "litellm"),
        ("https://api.x.ai/v1", {}, "generic"),
    ],
)
def test_engine_by_url(base_url: str, named: dict[str, str], engine: str) -> None:
    assert resolve_openai_engine(base_url, TelosHints(), PatchConfig(engines=named)) == engine


def test_new_route_names_are_registered() -> None:
    assert {"openrouter", "litellm"} <= set(engine_names())


@pytest.mark.parametrize("engine", ["openrouter", "litellm"])
def test_other_models_on_a_router_get_the_generic_bytes(engine: str) -> None:
    body = _body("openai/gpt-4.1")
    ours = prepare("openai_chat", body, PrepareOptions(engine=engine)).body
    generic = prepare("openai_chat", body, PrepareOptions(engine="generic")).body
    assert json.dumps(ours) == json.dumps(generic)
    assert _markers(ours) == []


@pytest.mark.parametrize("engine", ["openrouter", "litellm"])
def test_claude_gets_at_most_four_markers_never_on_assistant_or_tools(engine: str) -> None:
    body = _body("anthropic/claude-sonnet-4.5")
    before = copy.deepcopy(body)
    prepared = prepare("openai_chat", body, PrepareOptions(engine=engine))
    assert body == before, "the caller's body is never modified"
    sent = prepared.body
    where = _markers(sent)
    assert 2 <= len(where) <= 4, where
    roles = {
        sent["messages"][int(p.split("]")[0].split("[")[1])]["role"]
        for p in where
        if p.startswith(".messages")
    }
    assert roles <= {"system", "user", "tool"}
    # A long agent loop: BP-X, two BP-mid anchors and BP-S take the four; BP-T comes last.
    assert not any(p.startswith(".tools") for p in where)
    # The clock left the system prompt and never sits in a system message (the route hoists those).
    system_text = json.dumps([m for m in sent["messages"] if m["role"] == "system"])
    assert "Current time" not in system_text
    assert "Current time" in json.dumps(sent["messages"][-1])
    # What the router sends on: every marker before the clock, tool-call runs counted (mid anchors).
    translated = chat_to_messages(sent, "openrouter")
    assert len(_markers(translated)) == len(where)


def test_callers_own_markers_count_and_are_kept() -> None:
    body = _body("claude-sonnet-4-5", turns=3, clock=False)
    body["messages"][1]["content"] = [{"type": "text", "text": "Go.", "cache_control": {"type": "ephemeral"}}]
    for index in (3, 5, 7):
        text = body["messages"][index]["content"]
        body["messages"][index]["content"] = [
            {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}
        ]
    sent = prepare("openai_chat", body, PrepareOptions(engine="litellm")).body
    assert len(_markers(sent)) == 4  # the caller's four fill the budget: none added
    assert [_markers(sent["messages"][i]) for i in (1, 3, 5, 7)] == [[".content[0]"]] * 4


class _ClockInPlace(SessionHooks):
    """A session's first request on an engine that reads any prefix: the final clock stays."""

    def patterns(self, base: SplitPatterns) -> SplitPatterns:
        return base.with_clock_in_place()


def test_unknown_route_goes_out_as_today() -> None:
    """A Claude model behind an unknown host: the generic engine, byte for byte what it prepares for a
    session's first request (where its cache reads any prefix, a final clock to the second stays in
    place until it changes: docs/sessions.md, *A clock that ends the system prompt*)."""
    emulator = Emulator(default_openai_flavour="litellm")
    body = _body("claude-sonnet-4-5", turns=2)
    with serve(emulator) as url:
        telos_wrap.patch()
        try:
            client = openai.OpenAI(api_key="x", base_url=f"{url}/v1", max_retries=0)
            client.chat.completions.create(**body)
            client.close()
        finally:
            telos_wrap.unpatch()
    (sent,) = emulator.requests
    generic = prepare(
        "openai_chat", body, PrepareOptions(engine="generic", only_what_pays=True), _ClockInPlace()
    ).body
    assert sent.body == json.loads(json.dumps(generic))
    assert "Current time" in sent.body["messages"][0]["content"]
    assert _markers(sent.body) == []


def test_no_turn_request_keeps_the_envelope_after_every_marked_block() -> None:
    """Only system and assistant messages (a LangGraph agent's first step): the clock goes last, in a
    system message the route hoists to the end of the system prompt, after the marked blocks."""
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [
            {"role": "system", "content": SYSTEM + "Current time: 2026-11-25T10:00:00Z\n"},
            {"role": "system", "content": "Answer in one sentence."},
            {"role": "assistant", "content": "Let me look."},
        ],
    }
    sent = prepare("openai_chat", body, PrepareOptions(engine="litellm")).body
    assert sent["messages"][-1]["role"] == "system" and "Current time" in json.dumps(sent["messages"][-1])
    assert "Current time" not in json.dumps(sent["messages"][:-1])
    assert _markers(sent["messages"][:-1]) and not _markers(sent["messages"][-1])


@pytest.mark.parametrize(("engine", "tool_marker"), [("openrouter", False), ("litellm", True)])
def test_tool_marker_only_where_the_route_reads_it(engine: str, tool_marker: bool) -> None:
    sent = prepare("openai_chat", _body("claude-sonnet-4-5", turns=2), PrepareOptions(engine=engine)).body
    assert (_markers(sent["tools"]) == ["[0]"]) is tool_marker
    assert len(_markers(sent)) <= 4
