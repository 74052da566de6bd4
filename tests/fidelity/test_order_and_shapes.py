"""Order that carries meaning is kept, unknown shapes go out as written, history is not edited.

Real SDK clients over real HTTP to the emulator (``served``), through ``patch(strict=True)``; the
emulator records every body as it arrived.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import telos_wrap
from telos_wrap.emulator import Emulator, text_for_tokens
from telos_wrap.errors import TelosStageError, TelosUnreadableError
from telos_wrap.pipeline import PrepareOptions, prepare

RULES = "You answer questions about the attached material.\n" + text_for_tokens(1400)
SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "answer": {"type": "string"},
        "confidence": {"type": "number"},
    },
    "required": ["reasoning", "answer", "confidence"],
    "additionalProperties": False,
}


def test_a_users_blocks_keep_their_order_material_first_question_last(
    served: tuple[Emulator, anthropic.Anthropic, openai.OpenAI],
) -> None:
    emulator, claude, _ = served
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "Q3 report"},
    }
    search = {
        "type": "search_result",
        "source": "https://example.com/q3",
        "title": "Q3",
        "content": [{"type": "text", "text": "Revenue grew 4%."}],
    }
    question = {"type": "text", "text": "Summarize."}
    history: list[dict[str, Any]] = [{"role": "user", "content": [document, search, question]}]
    for turn in range(3):
        claude.messages.create(model="claude-opus-4-8", max_tokens=8, system=RULES, messages=history)
        history += [
            {"role": "assistant", "content": f"Summary {turn}."},
            {"role": "user", "content": f"And point {turn}?"},
        ]
    for record in emulator.requests:
        kinds = [block["type"] for block in record.body["messages"][0]["content"]]
        assert kinds == ["document", "search_result", "text"], kinds


def _properties(schema: dict[str, Any]) -> list[str]:
    return list(schema["properties"])


def test_schema_properties_keep_the_callers_order_both_sdks(
    served: tuple[Emulator, anthropic.Anthropic, openai.OpenAI],
) -> None:
    emulator, claude, oai = served
    tool_a = {"name": "reply", "description": "Reply.", "input_schema": SCHEMA}
    claude.messages.create(
        model="claude-opus-4-8",
        max_tokens=8,
        system=RULES,
        tools=[tool_a],
        messages=[{"role": "user", "content": "Is 7 prime?"}],
    )
    tool_o = {"type": "function", "function": {"name": "reply", "parameters": SCHEMA}}
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": SCHEMA, "strict": True},
    }
    oai.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "system", "content": RULES}, {"role": "user", "content": "Is 7 prime?"}],
        tools=[tool_o],
        response_format=response_format,
    )
    a_body, o_body = (record.body for record in emulator.requests)
    assert _properties(a_body["tools"][0]["input_schema"]) == ["reasoning", "answer", "confidence"]
    assert _properties(o_body["tools"][0]["function"]["parameters"]) == ["reasoning", "answer", "confidence"]
    assert _properties(o_body["response_format"]["json_schema"]["schema"]) == [
        "reasoning",
        "answer",
        "confidence",
    ]
    assert o_body["response_format"]["json_schema"]["schema"]["required"] == [
        "answer",
        "confidence",
        "reasoning",
    ]


def test_a_reshuffled_schema_keeps_the_order_first_seen(
    served: tuple[Emulator, anthropic.Anthropic, openai.OpenAI],
) -> None:
    emulator, claude, _ = served
    names = ["reasoning", "answer", "confidence"]
    with telos_wrap.session("orders") as session:
        for turn in range(4):
            order = names[turn % 3 :] + names[: turn % 3]  # the harness rebuilds it from a hash map
            schema = {**SCHEMA, "properties": {name: SCHEMA["properties"][name] for name in order}}
            claude.messages.create(
                model="claude-opus-4-8",
                max_tokens=8,
                system=RULES,
                tools=[{"name": "reply", "description": "Reply.", "input_schema": schema}],
                messages=[{"role": "user", "content": "Is 7 prime?"}],
            )
    sent = [_properties(record.body["tools"][0]["input_schema"]) for record in emulator.requests]
    assert sent == [names] * 4
    assert "order-restored" in session.explain(1)
    assert session.stats.cache_breaks == 0


# -- what telos does not understand it sends as written --------------------------------------------------

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=8))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_KEYS = st.text(st.characters(codec="ascii", categories=("Ll",)), min_size=1, max_size=8).filter(
    lambda k: k not in ("type", "role", "content")
)
UNKNOWN_ITEMS = st.one_of(
    st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=4),  # no type at all: {"id": "ref_fixture"}
    st.builds(
        lambda kind, rest: {"type": kind, **rest},
        st.sampled_from(["x_custom", "future_item"]),
        st.dictionaries(_KEYS, _VALUES, max_size=3),
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(UNKNOWN_ITEMS, min_size=1, max_size=3), position=st.integers(0, 3))
def test_unknown_responses_items_go_out_as_written(items: list[dict[str, Any]], position: int) -> None:
    question = {"role": "user", "content": "Hello?"}
    body_input: list[Any] = [question]
    for item in items:
        body_input.insert(min(position, len(body_input)), item)
    body = {"model": "gpt-4.1", "instructions": RULES, "input": body_input}
    sent = prepare("openai_responses", body, PrepareOptions(engine="openai")).body
    assert json.loads(json.dumps(sent["input"])) == json.loads(json.dumps(body_input))


UNKNOWN_PARTS = st.builds(
    lambda kind, rest: {"type": kind, **rest},
    st.sampled_from(["x_custom", "input_future"]),
    st.dictionaries(_KEYS, _VALUES, max_size=3),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(UNKNOWN_PARTS, min_size=1, max_size=3), extra=st.dictionaries(_KEYS, _VALUES, max_size=2)
)
def test_unknown_chat_parts_and_fields_go_out_as_written(
    parts: list[dict[str, Any]], extra: dict[str, Any]
) -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "Look:"}, *parts], **extra}
    body = {"model": "gpt-4.1", "messages": [{"role": "system", "content": RULES}, message]}
    # A part type the API does not define: the lift refuses the request, so the patch layer sends it
    # exactly as the SDK built it (lift/readable.py; docs/reliability.md).
    with pytest.raises(TelosStageError) as info:
        prepare("openai_chat", body, PrepareOptions(engine="openai"))
    assert info.value.stage == "lift" and isinstance(info.value.__cause__, TelosUnreadableError)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(UNKNOWN_PARTS, min_size=1, max_size=3))
def test_unknown_anthropic_blocks_go_out_as_written(parts: list[dict[str, Any]]) -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "Look:"}, *parts]}
    body = {"model": "claude-opus-4-8", "max_tokens": 8, "system": RULES, "messages": [message]}
    # A block type the API does not define: refused, so the request goes out as the SDK built it.
    with pytest.raises(TelosStageError) as info:
        prepare("anthropic", body, PrepareOptions(engine="anthropic"))
    assert info.value.stage == "lift" and isinstance(info.value.__cause__, TelosUnreadableError)


# -- history is never silently edited ----------------------------------------------------------------------


def test_drop_patterns_for_the_system_prompt_leave_user_messages_alone(
    served: tuple[Emulator, anthropic.Anthropic, openai.OpenAI],
) -> None:
    emulator, claude, _ = served
    system = f"Open order #{{n}} is being handled.\n{RULES}"
    history: list[dict[str, Any]] = [{"role": "user", "content": "Where is my order #4411?"}]
    with telos_wrap.session("scope", hints={"drop_patterns": [r"order #\d+"]}) as session:
        for turn in range(3):
            claude.messages.create(
                model="claude-opus-4-8", max_tokens=8, system=system.format(n=100 + turn), messages=history
            )
            history += [
                {"role": "assistant", "content": "Checking."},
                {"role": "user", "content": f"And #{turn}?"},
            ]
    for record in emulator.requests:
        assert "order #4411" in json.dumps(record.body["messages"][0])  # the user's words, as written
        assert "order #1" not in json.dumps(record.body["system"])  # the system's live order moved
    assert "drop-pruned" not in session.explain(2)


def test_drop_scope_all_prunes_past_turns_and_records_each_prune(
    served: tuple[Emulator, anthropic.Anthropic, openai.OpenAI],
) -> None:
    emulator, claude, _ = served
    history: list[dict[str, Any]] = [{"role": "user", "content": "Status?\nBuild: 4411"}]
    hints = {"drop_patterns": [r"^Build: \d+$"], "drop_scope": "all"}
    with telos_wrap.session("scope-all", hints=hints) as session:
        for turn in range(2):
            claude.messages.create(model="claude-opus-4-8", max_tokens=8, system=RULES, messages=history)
            history += [
                {"role": "assistant", "content": "Fine."},
                {"role": "user", "content": f"Now?\nBuild: {turn}"},
            ]
    assert "Build: 4411" not in json.dumps(emulator.requests[-1].body["messages"][0])
    assert "drop-pruned" in session.explain(1)


def test_a_system_scoped_pattern_does_not_merge_conversations(
    served: tuple[Emulator, anthropic.Anthropic, openai.OpenAI],
) -> None:
    """Implicit conversations are named by their first message as the caller wrote it: a pattern that
    applies to the system prompt only does not strip it there."""
    from telos_wrap.sessions import registry as session_registry

    _, claude, _ = served
    session_registry._implicit.clear()
    for order in ("#4411", "#4412"):
        claude.messages.create(
            model="claude-opus-4-8",
            max_tokens=8,
            system=RULES,
            messages=[{"role": "user", "content": f"My order {order} arrived broken."}],
            telos_hint={"drop_patterns": [r"#\d+"]},
        )
    assert len(session_registry._implicit) == 2
    session_registry._implicit.clear()
