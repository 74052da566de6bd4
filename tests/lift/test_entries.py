"""Each lift entry, one table: an SDK request body in, the IR out (inline).

``lift_request`` is the one entry the pipeline calls, one module per wire API behind it
(``lift/anthropic_messages.py``, ``openai_chat.py``, ``openai_responses.py``). A case's IR is written
out whole as a summary (the forms, the parameters, each block's band, kind and text, each message's
role, content form and extra fields), so a change to how any part of a request is read shows up here
as a diff of one case. The bands: the caller's text is PIN, tool traffic FOLD, and what a hint's
``drop_patterns`` or a user-turn envelope marks as volatile DROP (docs/vendor-facts.md, README
"The three layers").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api, TelosBlock, TelosIR
from telos_wrap.lift import lift_request

SYSTEM = "You are a support agent for Acme.\nToday is 2026-11-27 10:00."
QUESTION = "Where is order 42?"
DROP_CLOCK = TelosHints(drop_patterns=(r"Today is .*",))


def _block(block: TelosBlock) -> tuple[str, str, str]:
    """A block as ``(band, kind, its text or its tool-call name)``."""
    payload = block.payload
    said = payload.get("text") or payload.get("name") or payload.get("content") or ""
    return block.band.name, block.kind.value, str(said)


def _summary(ir: TelosIR) -> dict[str, Any]:
    return {
        "forms": (ir.system_form, ir.tools_form),
        "params": dict(ir.params),
        "tools": [_block(b) for b in ir.tools],
        "system": [_block(b) for b in ir.system],
        "messages": [
            (m.role, m.content_form, [_block(b) for b in m.blocks], sorted(m.extra)) for m in ir.messages
        ],
    }


@dataclass(frozen=True)
class Case:
    api: Api
    body: dict[str, Any]
    ir: dict[str, Any]
    hints: TelosHints | None = None


TOOL_ROUND_ANTHROPIC = [
    {"role": "user", "content": QUESTION},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {"id": "42"}}],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "shipped"}]},
]

LIFT = {
    "anthropic: string system, tools, a tool round": Case(
        "anthropic",
        {
            "model": "m",
            "max_tokens": 8,
            "system": SYSTEM,
            "messages": TOOL_ROUND_ANTHROPIC,
            "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
        },
        {
            "forms": ("string", "list"),
            "params": {"model": "m", "max_tokens": 8},
            "tools": [("PIN", "tool_def", "lookup")],
            "system": [("PIN", "text", SYSTEM)],
            "messages": [
                ("user", "string", [("PIN", "text", QUESTION)], []),
                ("assistant", "list", [("FOLD", "tool_use", "lookup")], []),
                ("user", "list", [("FOLD", "tool_result", "shipped")], []),
            ],
        },
    ),
    "anthropic: the caller's marker is not IR, an envelope in the user turn is DROP": Case(
        "anthropic",
        {
            "model": "m",
            "max_tokens": 8,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": f"<system-reminder>Time: 10:00</system-reminder>\n{QUESTION}"}
            ],
        },
        {
            "forms": ("list", "absent"),
            "params": {"model": "m", "max_tokens": 8},
            "tools": [],
            "system": [("PIN", "text", SYSTEM)],
            "messages": [
                (
                    "user",
                    "list",
                    [
                        ("PIN", "text", QUESTION),
                        ("DROP", "text", "<system-reminder>Time: 10:00</system-reminder>\n"),
                    ],
                    [],
                )
            ],
        },
    ),
    "anthropic: drop_patterns cut the system prompt into PIN and DROP": Case(
        "anthropic",
        {
            "model": "m",
            "max_tokens": 8,
            "system": SYSTEM,
            "messages": [{"role": "user", "content": QUESTION}],
        },
        {
            "forms": ("string", "absent"),
            "params": {"model": "m", "max_tokens": 8},
            "tools": [],
            "system": [
                ("PIN", "text", "You are a support agent for Acme.\n"),
                ("DROP", "text", "Today is 2026-11-27 10:00."),
            ],
            "messages": [("user", "string", [("PIN", "text", QUESTION)], [])],
        },
        DROP_CLOCK,
    ),
    "openai chat: the leading system message is the IR's system, a tool round keeps its fields": Case(
        "openai_chat",
        {
            "model": "m",
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": QUESTION},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
            ],
        },
        {
            "forms": ("list", "absent"),
            "params": {"model": "m", "temperature": 0},
            "tools": [],
            "system": [("PIN", "text", SYSTEM)],
            "messages": [
                ("user", "string", [("PIN", "text", QUESTION)], []),
                ("assistant", "null", [], ["content", "tool_calls"]),
                ("tool", "string", [("FOLD", "text", "shipped")], ["tool_call_id"]),
            ],
        },
    ),
    "openai chat: drop_patterns cut the system message": Case(
        "openai_chat",
        {
            "model": "m",
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
        },
        {
            "forms": ("list", "absent"),
            "params": {"model": "m"},
            "tools": [],
            "system": [
                ("PIN", "text", "You are a support agent for Acme.\n"),
                ("DROP", "text", "Today is 2026-11-27 10:00."),
            ],
            "messages": [("user", "string", [("PIN", "text", QUESTION)], [])],
        },
        DROP_CLOCK,
    ),
    "openai responses: instructions are the system, function items ride as messages of their own": Case(
        "openai_responses",
        {
            "model": "m",
            "instructions": SYSTEM,
            "input": [
                {"role": "user", "content": QUESTION},
                {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "shipped"},
            ],
        },
        {
            "forms": ("string", "absent"),
            "params": {"model": "m"},
            "tools": [],
            "system": [("PIN", "text", SYSTEM)],
            "messages": [
                ("user", "string", [("PIN", "text", QUESTION)], []),
                ("assistant", "absent", [], ["arguments", "call_id", "name", "type"]),
                ("tool", "absent", [], ["call_id", "output", "type"]),
            ],
        },
    ),
}


@pytest.mark.parametrize("case", list(LIFT.values()), ids=list(LIFT))
def test_lifted_ir(case: Case) -> None:
    ir = lift_request(case.api, case.body, session_id="s", hints=case.hints)
    assert _summary(ir) == case.ir
    assert ir.api == case.api and ir.session_id == "s"


@pytest.mark.parametrize("case", list(LIFT.values()), ids=list(LIFT))
def test_lifting_is_pure(case: Case) -> None:
    """The body is not changed, and lifting it twice gives the same IR."""
    before = repr(case.body)
    first = lift_request(case.api, case.body, session_id="s", hints=case.hints)
    assert repr(case.body) == before
    assert lift_request(case.api, case.body, session_id="s", hints=case.hints) == first
