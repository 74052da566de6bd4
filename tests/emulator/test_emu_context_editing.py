"""The emulator's Anthropic context editing (docs/vendor-facts.md §9.2) over the real SDK's beta
endpoint: ``clear_thinking_20251015`` (keep N thinking turns, ``"all"``), ``clear_tool_uses_20250919``
(token and tool-use triggers, keep, exclude_tools, clear_tool_inputs as a flag or a list of names,
clear_at_least), both together (thinking first, else a 400), clear_thinking only with extended
thinking on (else the vendor's 400), and the cache reads they leave."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from .emu_helpers import text

MODEL = "claude-sonnet-4-5"
TOOLS = [
    {"name": "read_file", "description": "Read.", "input_schema": {"type": "object"}},
    {"name": "read_plan", "description": "Plan.", "input_schema": {"type": "object"}},
]


def _history(turns: int, *, thinking: bool = False, result_tokens: int = 2_000) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Go."}]
    for turn in range(turns):
        call = f"toolu_{turn}"
        name = "read_plan" if turn == 0 else "read_file"
        content: list[dict[str, Any]] = []
        if thinking:
            content.append({"type": "thinking", "thinking": text(500, "t"), "signature": f"s{turn}"})
        content.append({"type": "tool_use", "id": call, "name": name, "input": {"path": text(50, "p")}})
        history.append({"role": "assistant", "content": content})
        history.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call, "content": text(result_tokens, "r")}
                ],
            }
        )
    return history


def _send(claude: anthropic.Anthropic, edits: list[dict[str, Any]], history: list[dict[str, Any]]) -> Any:
    return claude.beta.messages.create(
        model=MODEL,
        max_tokens=8,
        tools=TOOLS,
        messages=history,
        thinking={"type": "enabled", "budget_tokens": 1024},
        context_management={"edits": edits},
        betas=["context-management-2025-06-27"],
    )


def _applied(message: Any) -> list[dict[str, Any]]:
    return [edit.model_dump() for edit in message.context_management.applied_edits]


@pytest.mark.parametrize(
    ("keep", "cleared_turns"),
    [
        (None, 4),  # default: the latest thinking turn is kept
        ({"type": "thinking_turns", "value": 2}, 3),
        ({"type": "thinking_turns", "value": 5}, 0),
        ("all", 0),
        ({"type": "all"}, 0),
    ],
)
def test_clear_thinking_keeps_the_latest_thinking_turns(
    claude: anthropic.Anthropic, keep: Any, cleared_turns: int
) -> None:
    edit: dict[str, Any] = {"type": "clear_thinking_20251015"}
    if keep is not None:
        edit["keep"] = keep
    history = _history(5, thinking=True)
    whole = _send(claude, [], history).usage.input_tokens
    message = _send(claude, [edit], history)
    if cleared_turns:
        (report,) = _applied(message)
        assert report["type"] == "clear_thinking_20251015"
        assert report["cleared_thinking_turns"] == cleared_turns
        assert report["cleared_input_tokens"] >= cleared_turns * 500
        assert message.usage.input_tokens == whole - report["cleared_input_tokens"]
    else:
        assert _applied(message) == []
        assert message.usage.input_tokens == whole


@pytest.mark.parametrize(
    ("edit", "cleared", "inputs_cleared"),
    [
        ({"trigger": {"type": "input_tokens", "value": 5_000}}, 3, False),  # 6 results, keep 3
        ({"trigger": {"type": "input_tokens", "value": 50_000}}, 0, False),  # below the trigger
        ({"trigger": {"type": "tool_uses", "value": 5}, "keep": {"type": "tool_uses", "value": 1}}, 5, False),
        ({"trigger": {"type": "tool_uses", "value": 6}}, 0, False),  # 6 uses: not more than 6
        ({"trigger": {"type": "input_tokens", "value": 5_000}, "exclude_tools": ["read_plan"]}, 2, False),
        ({"trigger": {"type": "input_tokens", "value": 5_000}, "clear_tool_inputs": True}, 3, True),
        ({"trigger": {"type": "input_tokens", "value": 5_000}, "clear_tool_inputs": ["read_plan"]}, 3, True),
        (
            {
                "trigger": {"type": "input_tokens", "value": 5_000},
                "clear_at_least": {"type": "input_tokens", "value": 7_000},
            },
            0,
            False,
        ),
    ],
)
def test_clear_tool_uses_follows_its_options(
    claude: anthropic.Anthropic, edit: dict[str, Any], cleared: int, inputs_cleared: bool
) -> None:
    history = _history(6)
    whole = _send(claude, [], history).usage.input_tokens
    message = _send(claude, [{"type": "clear_tool_uses_20250919", **edit}], history)
    if not cleared:
        assert _applied(message) == []
        assert message.usage.input_tokens == whole
        return
    (report,) = _applied(message)
    assert report["cleared_tool_uses"] == cleared
    per_result = 2_000 - 7  # the placeholder's own tokens stay
    assert report["cleared_input_tokens"] >= cleared * per_result
    assert (report["cleared_input_tokens"] >= cleared * per_result + 49) is inputs_cleared
    # The report is the edit's own estimate; the prompt is counted rendered (a few tokens apart).
    assert abs(message.usage.input_tokens - (whole - report["cleared_input_tokens"])) <= 2 * cleared


def test_both_edits_apply_thinking_first_and_report_each(claude: anthropic.Anthropic) -> None:
    history = _history(6, thinking=True)
    edits = [
        {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}},
        {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 5_000}},
    ]
    reports = _applied(_send(claude, edits, history))
    assert [r["type"] for r in reports] == ["clear_thinking_20251015", "clear_tool_uses_20250919"]
    assert reports[0]["cleared_thinking_turns"] == 5 and reports[1]["cleared_tool_uses"] == 3


def test_clear_thinking_after_another_edit_is_refused(claude: anthropic.Anthropic) -> None:
    edits = [{"type": "clear_tool_uses_20250919"}, {"type": "clear_thinking_20251015"}]
    with pytest.raises(anthropic.BadRequestError, match="clear_thinking_20251015 must be the first edit"):
        _send(claude, edits, _history(2, thinking=True))


@pytest.mark.parametrize("thinking", [None, {"type": "disabled"}])
@pytest.mark.parametrize(
    "edits",
    [
        [{"type": "clear_thinking_20251015"}],
        [{"type": "clear_thinking_20251015"}, {"type": "clear_tool_uses_20250919"}],
    ],
)
def test_clear_thinking_without_extended_thinking_is_refused_as_the_vendor_does(
    claude: anthropic.Anthropic, thinking: dict[str, Any] | None, edits: list[dict[str, Any]]
) -> None:
    extra = {"thinking": thinking} if thinking is not None else {}
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.beta.messages.create(
            model=MODEL,
            max_tokens=8,
            messages=_history(2),
            context_management={"edits": edits},
            betas=["context-management-2025-06-27"],
            **extra,
        )
    assert refused.value.status_code == 400
    assert refused.value.body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "`clear_thinking_20251015` strategy requires `thinking` to be enabled",
        },
    }


def test_clear_thinking_with_adaptive_thinking_is_accepted(claude: anthropic.Anthropic) -> None:
    message = claude.beta.messages.create(
        model=MODEL,
        max_tokens=8,
        messages=_history(3, thinking=True),
        thinking={"type": "adaptive"},
        context_management={"edits": [{"type": "clear_thinking_20251015"}]},
        betas=["context-management-2025-06-27"],
    )
    assert _applied(message)[0]["cleared_thinking_turns"] == 2


def test_a_growing_session_under_clear_thinking_rewrites_from_the_oldest_kept_turn(
    claude: anthropic.Anthropic,
) -> None:
    """Stateless server editing: each new turn clears the thinking of the turn that left the keep
    window, so the cache is read up to that turn and written from it (the vendor's cache note)."""
    edit = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}}
    reads = []
    for turns in range(3, 7):
        history = _history(turns, thinking=True, result_tokens=600)
        history[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
        reads.append(_send(claude, [edit], history).usage.cache_read_input_tokens)
    assert reads[0] == 0
    # The entry of the previous request ends after a turn whose thinking is now cleared: no read
    # at the last breakpoint, and no other breakpoint to fall back on.
    assert reads[1:] == [0, 0, 0]
