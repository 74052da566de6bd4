"""Realistic prompts of many domains, sent for several turns through ``patch()`` with real SDK clients
over HTTP to the emulator, with and without live values (``prompts.PROMPTS``).

Without live values nothing moves: the system prompt goes out exactly as the caller wrote it (the one
exception is a line that only states the present, which moves on sight). With a live value, every
request is faithful (``check.check``: no caller line cut apart, lines in place in order, moved units
whole and under their heading, JSON blocks parse), the changed unit reaches the model whole at the
tail with its context, and from the request that learned it on the system prompt is byte-stable
(the live case still pays).
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, text_for_tokens

from .check import check, sent_parts
from .prompts import PROMPTS, Prompt

TURNS = 5
RULES = "\n\nPolicy:\n" + text_for_tokens(1400)
APIS = ["anthropic", "openai_chat", "openai_responses"]


def _request(api: str, system: str, turn: int) -> dict[str, Any]:
    history: list[dict[str, Any]] = []
    for t in range(turn + 1):
        history.append({"role": "user", "content": f"Question {t}: what should I know?"})
        if t < turn:
            history.append({"role": "assistant", "content": f"Answer {t}."})
    if api == "anthropic":
        return {"model": "claude-opus-4-8", "max_tokens": 8, "system": system, "messages": history}
    if api == "openai_chat":
        return {"model": "gpt-4.1", "messages": [{"role": "system", "content": system}, *history]}
    return {"model": "gpt-4.1", "instructions": system, "input": history}


def _send(api: str, clients: tuple[anthropic.Anthropic, openai.OpenAI], body: dict[str, Any]) -> None:
    claude, oai = clients
    if api == "anthropic":
        claude.messages.create(**body)
    elif api == "openai_chat":
        oai.chat.completions.create(**body)
    else:
        oai.responses.create(**body)


def _converse(
    served: tuple[Emulator, anthropic.Anthropic, openai.OpenAI], api: str, prompt: Prompt, live: bool
) -> list[tuple[str, str, str]]:
    """``(caller system, sent system, moved text)`` per request of one conversation."""
    emulator, claude, oai = served
    callers = []
    with telos_wrap.session(f"{prompt.name}-{api}-{live}"):
        for turn in range(TURNS):
            system = prompt.render(turn, live) + RULES
            body = _request(api, system, turn)
            _send(api, (claude, oai), body)
            callers.append((system, body))
    sent = [record.body for record in emulator.requests]
    assert len(sent) == TURNS
    return [
        (system, *sent_parts(api, body, wire)) for (system, body), wire in zip(callers, sent, strict=True)
    ]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("prompt", PROMPTS, ids=lambda p: p.name)
def test_a_prompt_without_live_values_is_sent_as_written(
    served: tuple[Emulator, anthropic.Anthropic, openai.OpenAI], api: str, prompt: Prompt
) -> None:
    for caller, system, moved in _converse(served, api, prompt, live=False):
        report = check(caller, system, moved, stable=caller.split("\n"))
        assert not report.problems, report.problems
        if prompt.stable_from == 0 and prompt.moves is not None and "Current time:" not in prompt.moves(0):
            continue  # a line that only states the present moves on sight, even while it rests
        assert system == caller, "a stable system prompt goes out exactly as written"
        assert moved == ""


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("prompt", PROMPTS, ids=lambda p: p.name)
def test_a_live_value_moves_whole_with_its_context_and_then_pays(
    served: tuple[Emulator, anthropic.Anthropic, openai.OpenAI], api: str, prompt: Prompt
) -> None:
    requests = _converse(served, api, prompt, live=True)
    texts = [caller.split("\n") for caller, _, _ in requests]
    stable = set(texts[0]).intersection(*texts[1:])
    for caller, system, moved in requests:
        report = check(caller, system, moved, stable=stable)
        assert not report.problems, report.problems
    if prompt.moves is None:
        return
    last_moved = requests[-1][2]
    assert last_moved == prompt.moves(TURNS - 1), "the changed unit, whole, under its heading"
    for _, system, _ in requests[prompt.stable_from + 1 :]:
        assert system == requests[prompt.stable_from][1], "the system prompt is byte-stable once learned"
