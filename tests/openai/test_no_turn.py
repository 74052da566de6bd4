"""Chat Completions requests with no user or tool turn: the volatile system text still leaves the
system prompt (a trailing system message of its own), and nothing fails.

Found by the careless-harness benchmark (``volatile-block`` on the LangGraph cassette traces): a
LangGraph agent's first step sends ``[system (a live clock), system (the instructions)]`` with no
turn yet; the learned clock had nowhere to go, the band-order invariant failed and the call fell back
to the original request. Real ``openai`` SDK over real HTTP to the emulator served on 127.0.0.1.
"""

from __future__ import annotations

import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, text_for_tokens
from telos_wrap.failopen import failure_counts

INSTRUCTIONS = "You are a customer support agent for an airline.\n" + text_for_tokens(1600)


@pytest.mark.parametrize(
    "clock",
    [
        "Today is Monday 23 November 2026, 10:02:{s:02d}",  # a self-labelled present: on sight
        "Current time: 10:02:{s:02d}",
    ],
    ids=["untagged-learned", "tagged"],
)
def test_system_only_requests_move_the_clock_last(
    served_openai: tuple[Emulator, openai.OpenAI], clock: str
) -> None:
    emulator, oai = served_openai
    later = [{"role": "assistant", "content": "How may I assist you today?"}]
    with telos_wrap.session() as session:
        for step, tail in enumerate([[], later, [*later, {"role": "user", "content": "A refund, please."}]]):
            system = [
                {"role": "system", "content": clock.format(s=7 + step)},
                {"role": "system", "content": INSTRUCTIONS},
            ]
            oai.chat.completions.create(model="gpt-4.1", messages=[*system, *tail])
    sent = [record.body["messages"] for record in emulator.requests]
    for messages in sent:
        assert "10:02:" not in str(messages[0]), "the system prompt no longer carries the clock"
        assert messages[0] == sent[0][0], "the prompt starts with the same bytes every time"
        assert messages[-1]["role"] == "system" and "10:02:" in messages[-1]["content"], "the clock goes last"
    assert session.stats.requests == 3 and session.stats.cache_breaks == 0
    assert not failure_counts()
