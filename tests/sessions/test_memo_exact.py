"""An old message edited in place is sent as it now is, even when ``==`` cannot see the edit.

``True == 1 == 1.0`` and ``0.0 == -0.0`` in Python, but their JSON differs. The history memo compared
settled messages by ``==`` alone, so an in-place edit of a tool input from ``True`` to ``1`` kept the
stale ``true`` on the wire while the application (and a fresh process) sent ``1``. Real SDK, emulator.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

import telos_wrap

from .convo import MODEL, RecordingTransport


def _conversation(flag: Any) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "please run the tool " * 300},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"flag": flag}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next"},
    ]


@pytest.mark.parametrize(("before", "after"), [(True, 1), (1, 1.0), (0, False), (0.0, -0.0), (1.0, 1)])
def test_a_number_edited_in_place_to_an_equal_number_of_another_type_is_sent_as_edited(
    claude: anthropic.Anthropic, transport: RecordingTransport, before: Any, after: Any
) -> None:
    messages = _conversation(before)
    with telos_wrap.session():
        claude.messages.create(model=MODEL, max_tokens=8, messages=messages)
        messages += [{"role": "assistant", "content": "sure"}, {"role": "user", "content": "more"}]
        claude.messages.create(model=MODEL, max_tokens=8, messages=messages)
        messages[1]["content"][0]["input"]["flag"] = after  # an old message edited in place
        messages += [{"role": "assistant", "content": "x"}, {"role": "user", "content": "again"}]
        claude.messages.create(model=MODEL, max_tokens=8, messages=messages)
    sent = json.loads(transport.bodies[-1])["messages"][1]["content"][0]["input"]["flag"]
    assert json.dumps(sent) == json.dumps(after)


def test_exact_copy_tells_numbers_apart_and_nothing_else() -> None:
    from telos_wrap.history import ExactNumber, exact_copy, holds_number

    message = {"role": "user", "content": [{"type": "text", "text": "hi", "n": 1, "ok": True, "x": 0.5}]}
    copy = exact_copy(message)
    assert holds_number(message) and copy == message and message == copy
    assert copy != {**message, "content": [{"type": "text", "text": "hi", "n": 1.0, "ok": True, "x": 0.5}]}
    assert copy != {**message, "content": [{"type": "text", "text": "hi", "n": 1, "ok": 1, "x": 0.5}]}
    text_only = exact_copy({"role": "user", "content": "hi"})
    assert not holds_number(text_only) and text_only == {"role": "user", "content": "hi"}
    assert ExactNumber(float("nan")) == float("nan")  # same JSON text ("NaN"): the same bytes
    assert ExactNumber(0.0) != -0.0 and ExactNumber(2) != 2.0 and ExactNumber(2) == 2
