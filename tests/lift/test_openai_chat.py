"""The chat lift: lossless, every message keeps its role and form, volatile text is banded DROP.

These are the OpenAI-path bugs of the reference implementation TELOS started from: merged system
messages, a mid-conversation system message turned into a user message, ``name`` /
``parallel_tool_calls`` dropped, images / files / audio turned into JSON text.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from telos_wrap.engines.base import EmitPlan
from telos_wrap.engines.generic import GenericOpenAIEngine
from telos_wrap.ir.canon import canonicalize_payload
from telos_wrap.ir.model import Band, BlockKind
from telos_wrap.lift import lift_request
from telos_wrap.lift.openai_chat import lift_openai_chat
from telos_wrap.pipeline import PrepareOptions, prepare

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "high"}}
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
FILE = {"type": "file", "file": {"file_id": "file-abc", "filename": "report.pdf"}}

RICH: dict[str, Any] = {
    "model": "gpt-4.1",
    "parallel_tool_calls": False,
    "temperature": 0.2,
    "metadata": {"b": "2", "a": "1"},
    "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    ],
    "messages": [
        {"role": "system", "content": "Rule one."},
        {"role": "system", "content": [{"type": "text", "text": "Rule two."}], "name": "rules"},
        {"role": "developer", "content": "Rule three."},
        {"role": "user", "content": [{"type": "text", "text": "Look:"}, IMAGE, AUDIO, FILE], "name": "ann"},
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}], "audio": {"id": "aud_1"}},
        {"role": "system", "content": "Mid-conversation instruction."},
        {"role": "function", "name": "legacy", "content": "42"},
        {"role": "user", "content": "And now?"},
    ],
}


def one_shape(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` canonical, with each content that is one plain text part as its string (its one shape)."""
    canonical = canonicalize_payload(body)
    for message in canonical["messages"]:
        content = message.get("content")
        if isinstance(content, list) and len(content) == 1 and set(content[0]) == {"type", "text"}:
            message["content"] = content[0]["text"]
    return canonical


@pytest.mark.parametrize("engine", ["openai", "deepseek", "vllm", "sglang", "generic"])
def test_emit_of_lift_is_the_canonical_body(engine: str) -> None:
    from telos_wrap.engines.registry import get_engine

    body = copy.deepcopy(RICH)
    adapter = get_engine(engine)
    ir = lift_openai_chat(body, session_id="s", refpool_threshold=None)
    emitted = adapter.emit(ir, EmitPlan())
    assert emitted == one_shape(RICH)
    # The two one-part contents go out as their strings; every other part list stays a list.
    assert emitted["messages"][1]["content"] == "Rule two."
    assert emitted["messages"][5]["content"] == "ok"
    assert isinstance(emitted["messages"][3]["content"], list)
    assert body == RICH  # never modified


def test_pipeline_keeps_every_message_as_sent() -> None:
    prepared = prepare("openai_chat", copy.deepcopy(RICH), PrepareOptions(engine="generic"))
    assert prepared.body == one_shape(RICH)
    shaped = [r for r in prepared.ir.records if r.kind == "content-shape"]
    assert [r.where for r in shaped] == ["messages[2]"]  # the tool message (IR index: system apart)
    roles = [message["role"] for message in prepared.body["messages"]]
    assert roles == [m["role"] for m in RICH["messages"]]  # nothing merged, nothing re-roled


def test_system_messages_form_the_system_segment_with_their_origin() -> None:
    ir = lift_openai_chat(RICH, session_id="s")
    assert [block.payload["text"] for block in ir.system] == ["Rule one.", "Rule two.", "Rule three."]
    assert all(block.band is Band.PIN for block in ir.system)
    assert ir.messages[0].role == "user" and len(ir.messages) == len(RICH["messages"]) - 3
    user = ir.messages[0]
    assert [block.kind for block in user.blocks] == [
        BlockKind.TEXT,
        BlockKind.IMAGE,
        BlockKind.PASSTHROUGH,
        BlockKind.DOCUMENT,
    ]
    assert all(block.band is Band.PIN for block in user.blocks)  # a band sort never moves the image
    assert ir.messages[-3].role == "system" and ir.messages[-3].blocks[0].band is Band.FOLD


def test_volatile_system_line_moves_after_a_string_user_turn() -> None:
    # The user's string stays a string: the envelope follows it in a system message of its own, so
    # the next turn re-sends "Hi" in the same shape (I2 on the wire; docs/engines.md).
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "You are kind.\nCurrent time: 2026-01-01 10:00:01\nBe brief."},
            {"role": "user", "content": "Hi"},
        ],
    }
    sent = prepare("openai_chat", body, PrepareOptions(engine="generic")).body
    assert sent["messages"] == [
        {"content": "You are kind.\nBe brief.", "role": "system"},
        {"content": "Hi", "role": "user"},
        {"content": "Current time: 2026-01-01 10:00:01\n", "role": "system"},
    ]


def test_volatile_system_line_joins_a_user_turn_sent_as_parts() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "You are kind.\nCurrent time: 2026-01-01 10:00:01\nBe brief."},
            {"role": "user", "content": [{"type": "text", "text": "Look:"}, IMAGE]},
        ],
    }
    sent = prepare("openai_chat", body, PrepareOptions(engine="generic")).body
    assert sent["messages"][1:] == [
        {
            "content": [
                {"text": "Look:", "type": "text"},
                canonicalize_payload(IMAGE),
                {"text": "Current time: 2026-01-01 10:00:01\n", "type": "text"},
            ],
            "role": "user",
        },
    ]


@pytest.mark.parametrize("shape", ["string", "one part", "one part + reminder", "string + reminder"])
def test_a_one_text_turn_has_one_shape_whatever_the_caller_sends(shape: str) -> None:
    # A harness that sends the newest turn as a string, as one text part, or with a reminder for this
    # turn only (string content turned into parts): the turn goes out as a string, its own envelope
    # at its end, so next turn (envelope pruned) the same string without it is a byte prefix of it.
    # The system prompt's envelope follows in a trailing system message (docs/engines.md).
    reminder = "<system-reminder>3 todos open</system-reminder>"
    content: Any = {
        "string": "Hi",
        "one part": [{"type": "text", "text": "Hi"}],
        "one part + reminder": [{"type": "text", "text": "Hi"}, {"type": "text", "text": reminder}],
        "string + reminder": f"Hi{reminder}",
    }[shape]
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "You are kind.\nCurrent time: 2026-01-01 10:00:01\nBe brief."},
            {"role": "user", "content": content},
        ],
    }
    prepared = prepare("openai_chat", body, PrepareOptions(engine="generic"))
    messages = prepared.body["messages"]
    expected = "Hi" + (reminder if "reminder" in shape else "")
    assert messages[1:] == [
        {"content": expected, "role": "user"},
        {"content": "Current time: 2026-01-01 10:00:01\n", "role": "system"},
    ]
    assert [r.kind for r in prepared.ir.records].count("content-shape") == (shape.startswith("one part"))


def test_user_envelope_is_split_and_the_callers_marker_stays_on_the_question() -> None:
    marker = {"mode": "explicit", "ttl": "12h"}
    text = "<system-reminder>cwd=/tmp</system-reminder>\nWhat is 2+2?"
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": text, "prompt_cache_breakpoint": marker}]}
        ],
    }
    ir = lift_request("openai_chat", body, session_id="s")
    bands = [(block.band, block.payload["text"]) for block in ir.messages[0].blocks]
    assert bands == [(Band.PIN, "What is 2+2?"), (Band.DROP, "<system-reminder>cwd=/tmp</system-reminder>\n")]
    assert ir.messages[0].blocks[0].extra["prompt_cache_breakpoint"] == marker
    sent = GenericOpenAIEngine().emit(ir, EmitPlan())
    assert sent["messages"][0]["content"][0] == {
        "prompt_cache_breakpoint": marker,
        "text": "What is 2+2?",
        "type": "text",
    }


def test_large_system_text_goes_to_the_ref_pool_and_is_still_sent() -> None:
    # The document is the last system text: its entry would follow its stub at once, so it is sent in
    # the stub's place as the caller wrote it (no stub, no reference line: they would only cost tokens).
    document = "policy line\n" * 300
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": document}, {"role": "user", "content": "Q"}],
    }
    prepared = prepare("openai_chat", body, PrepareOptions(engine="generic"))
    assert list(prepared.ir.ref_pool) == ["system-doc-0"]
    assert prepared.body["messages"] == body["messages"]
    assert not [r for r in prepared.ir.records if r.kind == "ref-stub"]


def test_large_system_text_before_other_system_text_stays_where_the_caller_put_it() -> None:
    # A document, then an instruction about it: no fold was declared, so no stub; the caller's
    # messages go out in the caller's order with only the caller's text.
    document = "policy line\n" * 300
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": document},
            {"role": "developer", "content": "Answer briefly."},
            {"role": "user", "content": "Q"},
        ],
    }
    prepared = prepare("openai_chat", body, PrepareOptions(engine="generic"))
    assert prepared.body["messages"][:2] == [
        {"role": "system", "content": document},
        {"role": "developer", "content": "Answer briefly."},
    ]
    assert "[ref:" not in json.dumps(prepared.body)
    assert not [r for r in prepared.ir.records if r.kind == "ref-stub"]


def test_message_with_only_volatile_system_text_leaves_no_empty_message() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Stable rules."},
            {"role": "developer", "content": "Current time: 10:00"},
            {"role": "user", "content": "Q"},
        ],
    }
    sent = prepare("openai_chat", body, PrepareOptions(engine="generic")).body
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "system"]
    assert sent["messages"][1]["content"] == "Q"
    assert sent["messages"][2]["content"] == "Current time: 10:00"
