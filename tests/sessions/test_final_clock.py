"""A clock that ends the system prompt (issue 42; docs/sessions.md, *A clock that ends the system prompt*).

Where the engine reads any token prefix (OpenAI before gpt-5.6, vLLM...), a line that states the
present to the second and ends the system segment stays in place until it changes, then moves as a
learned value; everywhere else (Anthropic, gpt-5.6+, a coarser clock, a clock with system text after
it) it moves on sight as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest

import telos_wrap
from telos_wrap.emulator import ManualClock
from tests.sdk_http import sdk_http

from .convo import MODEL, RULES, RecordingTransport, messages_for

RULES_TEXT = f"You are the support assistant of Example Corp.\n{RULES}"


@pytest.fixture
def gpt(patched: None, transport: RecordingTransport) -> Iterator[openai.OpenAI]:
    """The real OpenAI SDK (api.openai.com: the OpenAI engine), patched strict, against the emulator."""
    client = openai.OpenAI(api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0)
    try:
        yield client
    finally:
        client.close()


def _stamp(turn: int) -> str:
    return f"2026-11-23T10:{turn:02d}:07.123456+00:00"


def _chat(client: openai.OpenAI, system: Callable[[int], str], turns: int, model: str = "gpt-4.1") -> None:
    """``turns`` requests of one conversation (system prompt ``system(turn)``)."""
    for turn in range(turns):
        client.chat.completions.create(
            model=model, messages=[{"role": "system", "content": system(turn)}, *messages_for(turn)]
        )


def _bodies(transport: RecordingTransport) -> list[dict[str, Any]]:
    return [json.loads(body) for body in transport.bodies]


def _systems(transport: RecordingTransport) -> list[list[str]]:
    """Per request, the text of every system message, in wire order."""
    return [
        [
            m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in body["messages"]
            if m["role"] == "system"
        ]
        for body in _bodies(transport)
    ]


def test_a_final_clock_that_never_changes_stays_in_place(
    gpt: openai.OpenAI, transport: RecordingTransport, clock: ManualClock
) -> None:
    """pydantic-ai's case: the prompt rendered once per run, its clock never changes within it."""
    prompt = f"{RULES_TEXT}Current time: {_stamp(2)}"
    with telos_wrap.session("frozen", clock=clock.now) as sess:
        _chat(gpt, lambda turn: prompt, 5)
    # Every request sends the system prompt exactly as the caller wrote it, clock included, and
    # nothing after the conversation.
    assert _systems(transport) == [[prompt]] * 5
    assert sess.volatile_spans == ()
    assert sess.stats.cache_breaks == 0
    reads = [body["messages"][-1] for body in _bodies(transport)]
    assert all(message["role"] == "user" for message in reads)


def test_a_final_clock_rendered_for_every_request_moves_at_its_first_change(
    gpt: openai.OpenAI, transport: RecordingTransport, clock: ManualClock
) -> None:
    with telos_wrap.session("per-request", clock=clock.now) as sess:
        _chat(gpt, lambda turn: f"{RULES_TEXT}Current time: {_stamp(turn)}", 6)
    systems = _systems(transport)
    # Request 0: in place (nothing says yet that it changes).
    assert systems[0] == [f"{RULES_TEXT}Current time: {_stamp(0)}"]
    # From its first change on: the stable text alone leads the request, the clock travels last.
    for turn in range(1, 6):
        assert systems[turn][0] == RULES_TEXT, turn
        assert f"Current time: {_stamp(turn)}" in systems[turn][-1], turn
        assert _bodies(transport)[turn]["messages"][-1]["role"] == "system"
    [span] = sess.volatile_spans
    assert (span.learned_at, span.kind, span.lines) == (1, "value", 1)
    assert sess.stats.cache_breaks == 1  # the first change, as for any live value


def test_a_present_line_to_the_second_that_ends_the_prompt_is_not_taken_on_sight(
    gpt: openai.OpenAI, transport: RecordingTransport, clock: ManualClock
) -> None:
    prompt = f"{RULES_TEXT}Current date and time: 2026-11-23 10:02:07"
    with telos_wrap.session("present", clock=clock.now) as sess:
        _chat(gpt, lambda turn: prompt, 3)
    assert _systems(transport) == [[prompt]] * 3
    assert sess.volatile_spans == ()


@pytest.mark.parametrize(
    ("name", "system", "model"),
    [
        # A clock to the minute may rest for many requests, then cost the conversation after it.
        ("minute", lambda turn: f"{RULES_TEXT}Current time: 10:{turn:02d}", "gpt-4.1"),
        # System text after it: its first change would cost that text.
        ("not last", lambda turn: f"Current time: {_stamp(turn)}\n{RULES_TEXT}", "gpt-4.1"),
        # gpt-5.6+: telos anchors the cache with breakpoints; a first change would miss them.
        ("anchored", lambda turn: f"{RULES_TEXT}Current time: {_stamp(turn)}", "gpt-5.6"),
    ],
)
def test_other_clocks_move_on_sight(
    gpt: openai.OpenAI,
    transport: RecordingTransport,
    clock: ManualClock,
    name: str,
    system: Callable[[int], str],
    model: str,
) -> None:
    with telos_wrap.session(f"on-sight-{name}", clock=clock.now):
        _chat(gpt, system, 3, model=model)
    for turn, texts in enumerate(_systems(transport)):
        assert "Current time" not in texts[0], (name, turn)
        assert "Current time" in json.dumps(_bodies(transport)[turn]["messages"][-1]), (name, turn)


def test_anthropic_moves_a_final_clock_on_sight(
    claude: anthropic.Anthropic, transport: RecordingTransport, clock: ManualClock
) -> None:
    prompt = f"{RULES_TEXT}Current time: {_stamp(2)}"
    with telos_wrap.session("anthropic", clock=clock.now):
        for turn in range(3):
            claude.messages.create(model=MODEL, max_tokens=16, system=prompt, messages=messages_for(turn))
    for body in _bodies(transport):
        assert "Current time" not in json.dumps(body["system"])
        assert "Current time" in json.dumps(body["messages"][-1])


def test_learning_off_moves_it_on_sight(
    gpt: openai.OpenAI, transport: RecordingTransport, clock: ManualClock
) -> None:
    """Without learning nothing would move it at its first change: the envelope moves on sight."""
    with telos_wrap.session("learning-off", clock=clock.now, learn_volatility=False):
        _chat(gpt, lambda turn: f"{RULES_TEXT}Current time: {_stamp(turn)}", 2)
    assert all("Current time" not in texts[0] for texts in _systems(transport))


def test_responses_instructions_keep_a_final_clock_until_it_changes(
    gpt: openai.OpenAI, transport: RecordingTransport, clock: ManualClock
) -> None:
    """The Responses API: ``instructions`` is the system segment; the same rule."""
    with telos_wrap.session("responses", clock=clock.now):
        for turn in range(3):
            stamp = _stamp(2) if turn < 2 else _stamp(3)
            gpt.responses.create(
                model="gpt-4.1",
                instructions=f"{RULES_TEXT}Current time: {stamp}",
                input=[{"role": "user", "content": f"Question {turn}: " + "details " * 40}],
            )
    bodies = _bodies(transport)
    assert [body["instructions"] for body in bodies[:2]] == [f"{RULES_TEXT}Current time: {_stamp(2)}"] * 2
    assert bodies[2]["instructions"] == RULES_TEXT  # changed at request 2: moved from then on
    assert f"Current time: {_stamp(3)}" in json.dumps(bodies[2]["input"][-1])
