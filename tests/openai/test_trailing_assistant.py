"""An agent that appends its own steps after the latest user turn (crewAI's shape) stays append-only."""

from __future__ import annotations

import itertools
from typing import Any

from telos_wrap.ir.order import assert_ir_invariants
from telos_wrap.pipeline import PrepareOptions, prepare


def request(steps: int) -> dict[str, Any]:
    return {
        "model": "gpt-4.1",
        "messages": [
            {
                "role": "system",
                "content": f"You are a crew agent.\nCurrent time: 2026-11-21 10:{steps:02d}:00",
            },
            {"role": "user", "content": "Do the task"},
            *({"role": "assistant", "content": f"step {i}"} for i in range(steps)),
        ],
    }


def test_envelope_goes_after_the_assistant_steps_and_history_only_grows() -> None:
    sent = [prepare("openai_chat", request(steps), PrepareOptions(engine="openai")) for steps in (1, 2, 3)]
    for prepared in sent:
        assert_ir_invariants(prepared.ir)
        last = prepared.body["messages"][-1]
        assert last["role"] == "system" and last["content"].startswith("Current time:")
        assert any(
            r.kind == "drop-moved" and "trailing system message" in r.detail for r in prepared.ir.records
        )
    for before, after in itertools.pairwise(sent):
        history = before.body["messages"][:-1]  # everything but the moved envelope
        assert after.body["messages"][: len(history)] == history


def test_without_trailing_assistant_a_string_user_turn_stays_a_string() -> None:
    body = request(0)
    prepared = prepare("openai_chat", body, PrepareOptions(engine="openai"))
    *_, user, last = prepared.body["messages"]
    assert user == {"content": "Do the task", "role": "user"}
    assert last == {"content": "Current time: 2026-11-21 10:00:00", "role": "system"}


def test_without_trailing_assistant_the_envelope_joins_a_user_turn_sent_as_parts() -> None:
    body = request(0)
    # Parts that are more than one text part stay parts, and the envelope joins them as a last part.
    body["messages"][-1] = {
        "role": "user",
        "content": [{"type": "text", "text": "Do the task"}, {"type": "text", "text": "(see above)"}],
    }
    prepared = prepare("openai_chat", body, PrepareOptions(engine="openai"))
    last = prepared.body["messages"][-1]
    assert last["role"] == "user"
    assert [part["text"] for part in last["content"]] == [
        "Do the task",
        "(see above)",
        "Current time: 2026-11-21 10:00:00",
    ]
