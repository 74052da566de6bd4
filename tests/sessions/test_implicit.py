"""Implicit sessions: one per conversation, whatever the harness rebuilds around the conversation.

The key (``telos_wrap.sessions.identity``) must not depend on system/developer messages, Responses
``instructions``, per-turn envelopes or cache markers, and must tell conversations apart. The end to
end test is the one-line path: ``patch()`` and no ``session()``, a Chat Completions conversation
whose system message carries a live clock, through the real OpenAI SDK over real HTTP to the
emulator.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import pytest

import telos_wrap
from telos_wrap.sessions import Session
from telos_wrap.sessions import registry as session_registry
from telos_wrap.sessions.identity import conversation_key
from tests.over_http import emulator_over_http

from .conftest import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))
from _bench_bound import SessionBound

MODEL = "gpt-4.1"
RULES = "".join(f"Rule {i}: answer in plain words and name the policy section you used.\n" for i in range(70))


def clock_line(turn: int) -> str:
    return f"Current date and time: 2026-11-23 10:{turn + 1:02d}:{turn * 7 % 60:02d}"


def system_text(turn: int | None) -> str:
    """A LangChain-style system prompt; ``None``: without the clock line (what the bound sees)."""
    live = "" if turn is None else clock_line(turn) + "\n"
    return f"You are the support assistant of Example Corp.\n{live}{RULES}Be concise."


def chat(
    turn: int, *, clock: bool = True, opening: str = "I need help with a refund"
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_text(turn if clock else None)}]
    for t in range(turn + 1):
        question = (
            opening if t == 0 else f"Follow-up {t}: what about order {4000 + t}? " + "More detail. " * 12
        )
        messages.append({"role": "user", "content": question})
        if t < turn:
            messages.append(
                {"role": "assistant", "content": f"Answer {t}: " + "Refunds take fourteen days. " * 10}
            )
    return messages


# -- the key ---------------------------------------------------------------------------------------------


def _key(api: str, body: dict[str, Any]) -> str:
    return conversation_key(api, body)


def test_key_ignores_system_messages_envelopes_markers_and_tool_order() -> None:
    tools = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("a", "b", "c")]
    base = {"model": MODEL, "messages": chat(0), "tools": tools}
    key = _key("openai_chat", base)
    later = {"model": MODEL, "messages": chat(5), "tools": list(reversed(tools))}
    assert _key("openai_chat", later) == key  # clock rebuilt, history grown, tools reshuffled
    developer: dict[str, Any] = copy.deepcopy(later)
    developer["messages"].insert(1, {"role": "developer", "content": "Today: Tuesday"})
    assert _key("openai_chat", developer) == key
    # The opening message as parts, with a per-turn envelope and the harness's cache marker on it.
    parts = copy.deepcopy(later)
    parts["messages"][1]["content"] = [
        {"type": "text", "text": "<system-reminder>3 files open</system-reminder>\n"},
        {"type": "text", "text": "I need help with a refund", "prompt_cache_breakpoint": {"type": "x"}},
    ]
    assert _key("openai_chat", parts) == key


def test_key_tells_conversations_apart() -> None:
    body = {"model": MODEL, "messages": chat(0)}
    key = _key("openai_chat", body)
    assert _key("openai_chat", {"model": MODEL, "messages": chat(0, opening="Hello there")}) != key
    assert _key("openai_chat", {"model": "gpt-5.6", "messages": chat(0)}) != key
    assert _key("openai_chat", {**body, "prompt_cache_key": "user-17"}) != key
    assert _key("openai_chat", {**body, "safety_identifier": "u-1"}) != key
    assert _key("anthropic", {"model": MODEL, "messages": chat(0)[1:]}) != key


def test_key_anthropic_and_responses() -> None:
    first = {"role": "user", "content": "Fix the failing test"}
    a = {"model": "claude-x", "system": "clock 10:01", "messages": [first]}
    b = {
        "model": "claude-x",
        "system": [{"type": "text", "text": "clock 10:02"}, {"type": "text", "text": "rules"}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Fix the failing test", "cache_control": {}}],
            },
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "go on"},
        ],
    }
    assert _key("anthropic", a) == _key("anthropic", b)
    assert _key("anthropic", {**a, "metadata": {"user_id": "u1"}}) != _key("anthropic", a)
    # Responses: ``instructions`` is the system prompt; ``input`` a string or items.
    r1 = {"model": MODEL, "instructions": "It is 10:01", "input": "Plan my trip"}
    r2 = {
        "model": MODEL,
        "instructions": "It is 10:02",
        "input": [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "input_text", "text": "Plan my trip"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Where?"}]},
        ],
    }
    assert _key("openai_responses", r1) == _key("openai_responses", r2)
    assert _key("openai_responses", {**r1, "input": "Plan my holiday"}) != _key("openai_responses", r1)


def test_an_opening_message_that_is_only_an_envelope_is_skipped() -> None:
    env = {"role": "user", "content": "<environment_info>cwd: /tmp/1</environment_info>"}
    env2 = {"role": "user", "content": "<environment_info>cwd: /tmp/2</environment_info>"}
    ask = {"role": "user", "content": "Run the tests"}
    one = _key("anthropic", {"model": "m", "messages": [env, ask]})
    assert one == _key(
        "anthropic", {"model": "m", "messages": [env2, ask, {"role": "assistant", "content": "ok"}]}
    )
    assert one != _key("anthropic", {"model": "m", "messages": [env, {"role": "user", "content": "Other"}]})


# -- one-line patch(), no session(): real SDK over real HTTP ----------------------------------------------


@pytest.fixture
def fresh_implicit() -> None:
    session_registry._implicit.clear()


def _efficiency(turns: int, send: Any) -> tuple[float, list[int], list[int]]:
    bound = SessionBound()
    reads, bounds = [], []
    for turn in range(turns):
        response = send(turn)
        report = telos_wrap.usage_of(response)
        assert report is not None and report.cache_read is not None
        reads.append(report.cache_read)
        bounds.append(bound.add("openai", {"model": MODEL, "messages": chat(turn, clock=False)}))
    return sum(reads) / sum(bounds), reads, bounds


def test_one_line_patch_learns_a_live_clock_in_the_system_message(
    patched: None, fresh_implicit: None
) -> None:
    with emulator_over_http() as wire:
        client = wire.openai()

        def send(turn: int) -> Any:
            wire.clock.advance(5)
            return client.chat.completions.create(model=MODEL, messages=chat(turn), max_tokens=16)

        efficiency, reads, bounds = _efficiency(16, send)
        client.close()
    assert telos_wrap.current_session() is None
    [implicit] = session_registry._implicit.values()  # every turn in one implicit session
    assert implicit.stats.requests == 16
    [span] = implicit.volatile_spans
    assert span.learned_at == 0  # a time of day is learned on sight
    assert implicit.stats.cache_breaks == 0
    assert efficiency >= 0.97, (efficiency, reads, bounds)
    print(f"one-line patch(), live clock in the system message: {efficiency:.3f} of the bound")
    # The clock still reaches the model: at the end of the latest turn, recorded.
    assert clock_line(15).encode() in wire.bodies[-1]
    assert "learned-volatile" in implicit.explain(15)


def test_session_header_names_the_conversation(patched: None, fresh_implicit: None) -> None:
    with emulator_over_http() as wire:
        client = wire.openai(default_headers={"X-Telos-Session": "thread-7"})
        for turn in range(2):
            client.chat.completions.create(model=MODEL, messages=chat(turn), max_tokens=8)
        other = wire.openai()
        other.chat.completions.create(
            model=MODEL, messages=chat(0), max_tokens=8, extra_headers={"x-telos-session": "thread-8"}
        )
        client.close()
        other.close()
    assert session_registry._implicit == {}  # named, so no implicit session was made
    # Named sessions are their tenant's: read in the tenant of the calls (docs/sessions.md, "Tenants").
    assert Session("thread-7").bind(client).stats.requests == 2
    assert Session("thread-8").bind(other).stats.requests == 1
    assert len(wire.headers) == 3
    assert not [h for h in wire.headers if any("telos" in name for name in h)]  # never sent to the vendor
