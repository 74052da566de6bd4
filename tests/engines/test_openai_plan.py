"""The OpenAI engine's plan: the key, gpt-5.6 gating, breakpoint placement and budget, TTL rules."""

from __future__ import annotations

from typing import Any

import pytest

from telos_wrap.engines.openai import OpenAIEngine, supports_breakpoints
from telos_wrap.ir.hints import TelosHints
from telos_wrap.pipeline import PrepareOptions, prepare

BIG_DOC = "clause\n" * 400


def _send(body: dict[str, Any], **hints: Any) -> dict[str, Any]:
    return prepare("openai_chat", body, PrepareOptions(engine="openai", hints=TelosHints(**hints))).body


def _markers(sent: dict[str, Any]) -> list[tuple[int, int, dict[str, Any]]]:
    found = []
    for m_index, message in enumerate(sent["messages"]):
        content = message.get("content")
        for p_index, part in enumerate(content if isinstance(content, list) else []):
            if "prompt_cache_breakpoint" in part:
                found.append((m_index, p_index, part["prompt_cache_breakpoint"]))
    return found


def _body(model: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": "Rules."},
            {"role": "system", "content": BIG_DOC},
            {"role": "user", "content": "Q1"},
            {"role": "assistant", "content": "A1"},
            {"role": "user", "content": "Q2\nCurrent time: 10:00"},
            {"role": "assistant", "content": "prefill"},
        ],
        **extra,
    }


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", False),
        ("gpt-5.5", False),
        ("gpt-5", False),
        ("o3", False),
        ("gpt-5.6", True),
        ("gpt-5.6-mini-2026-09-01", True),
        ("gpt-5.10", True),
        ("gpt-6", True),
        ("ft:gpt-5.6:org::id", True),
        (None, False),
    ],
)
def test_gpt_5_6_gating(model: Any, expected: bool) -> None:
    assert supports_breakpoints(model) is expected


def test_older_models_get_only_the_key() -> None:
    sent = _send(_body("gpt-4.1"))
    assert sent["prompt_cache_key"].startswith("telos-") and len(sent["prompt_cache_key"]) == 22
    assert "prompt_cache_options" not in sent and "prompt_cache_retention" not in sent
    assert _markers(sent) == []
    assert isinstance(sent["messages"][0]["content"], str)  # no needless parts array


def test_gpt_5_6_breakpoints_at_stable_boundaries_never_on_assistant() -> None:
    sent = _send(_body("gpt-5.6"))
    assert sent["prompt_cache_options"] == {"mode": "implicit"}
    explicit = {"mode": "explicit"}
    # BP-S on the last PIN system text, BP-R on the pooled document (the last system text, so sent in
    # place of its stub: refpool.in_place), BP-X on the question before the clock line.
    assert _markers(sent) == [(0, 0, explicit), (1, 0, explicit), (4, 0, explicit)]
    assert sent["messages"][4]["content"][1] == {"text": "Current time: 10:00", "type": "text"}
    roles = [sent["messages"][m]["role"] for m, _, _ in _markers(sent)]
    assert "assistant" not in roles
    assert len(_markers(sent)) <= 3  # implicit mode writes the latest three explicit breakpoints


def test_callers_markers_count_against_the_budget_and_are_kept() -> None:
    body = _body("gpt-5.6")
    mine = {"mode": "explicit", "ttl": "12h"}
    body["messages"][2] = {
        "role": "user",
        "content": [{"type": "text", "text": "Q1", "prompt_cache_breakpoint": mine}],
    }
    body["messages"][0] = {
        "role": "system",
        "content": [{"type": "text", "text": "Rules.", "prompt_cache_breakpoint": mine}],
    }
    sent = _send(body)
    markers = _markers(sent)
    assert (0, 0, mine) in markers and (2, 0, mine) in markers
    assert len(markers) == 3  # 2 of the caller's + 1 of ours (BP-X) within implicit mode's 3


def test_explicit_mode_of_the_caller_gives_four_slots_and_is_kept() -> None:
    sent = _send(_body("gpt-5.6", prompt_cache_options={"mode": "explicit"}))
    assert sent["prompt_cache_options"] == {"mode": "explicit"}
    assert len(_markers(sent)) == 3  # only three stable boundaries exist here


def test_ttl_hints_and_never_both_retention_and_options_ttl() -> None:
    sent = _send(_body("gpt-5.6"), ttl="30m")
    assert sent["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}
    sent = _send(_body("gpt-5.6", prompt_cache_retention="24h"), ttl="30m")
    assert sent["prompt_cache_options"] == {"mode": "implicit"}
    assert sent["prompt_cache_retention"] == "24h"
    sent = _send(_body("gpt-5.6"), ttl="12h")
    ttls = [marker.get("ttl") for _, _, marker in _markers(sent)]
    assert ttls == ["12h", "12h", None]  # long TTL on the stable prefix only; chat ttl stays "30m"-only


def test_string_content_becomes_parts_only_for_a_breakpoint() -> None:
    body = {
        "model": "gpt-5.6",
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}],
    }
    sent = _send(body)
    assert sent["messages"][0]["content"] == [
        {"prompt_cache_breakpoint": {"mode": "explicit"}, "text": "S", "type": "text"}
    ]
    older = _send({**body, "model": "gpt-4o"})
    assert older["messages"] == [{"content": "S", "role": "system"}, {"content": "Q", "role": "user"}]


def test_tool_message_is_a_valid_breakpoint_target_with_text_parts() -> None:
    body = {
        "model": "gpt-5.6",
        "messages": [
            {"role": "user", "content": "Q"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "result"},
        ],
    }
    sent = _send(body)
    assert sent["messages"][2]["content"] == [
        {"prompt_cache_breakpoint": {"mode": "explicit"}, "text": "result", "type": "text"}
    ]


def test_isolation_partitions_the_key_and_callers_key_wins() -> None:
    body = _body("gpt-4.1")
    assert _send(body)["prompt_cache_key"] != _send(body, isolation="tenant-a")["prompt_cache_key"]
    assert _send({**body, "prompt_cache_key": "mine"})["prompt_cache_key"] == "mine"


def test_plan_notes_explain_withheld_fields() -> None:
    from telos_wrap.lift.openai_chat import lift_openai_chat

    plan = OpenAIEngine().plan(lift_openai_chat(_body("gpt-4o"), session_id="s"), TelosHints())
    assert any("predates gpt-5.6" in note for note in plan.notes)
