"""The bridge's passes, one table each: a request in, the body telos emits out (inline snapshots).

Each case is lifted and prepared as ``pipeline.prepare`` does for the engine named (no session, no
gate), and the emitted body is compared whole with the snapshot below it, so a change to any byte a
pass produces shows up here as a diff of one case. The pass under test is also run alone on the
lifted IR, and its ``Transformation`` records (what ``explain`` prints) must be the ones listed.
OpenAI's ``prompt_cache_key`` is checked for its form only (its derivation is the engine's, tested
in tests/openai).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest

from telos_wrap.bridge import BridgeOptions, canonicalize, relocate_drop, render_ref_pool
from telos_wrap.ir.model import Api, TelosIR
from telos_wrap.lift import lift_request
from telos_wrap.pipeline import PrepareOptions, prepare


@dataclass(frozen=True)
class Case:
    """A request, the pass it exercises, and what telos must emit and record."""

    api: Api
    body: dict[str, Any]
    emitted: dict[str, Any]
    records: list[tuple[str, str]] = field(default_factory=list)
    keep_past_drop: bool = False

    @property
    def engine(self) -> str:
        return "anthropic" if self.api == "anthropic" else "openai"


def _ephemeral(block: dict[str, Any]) -> dict[str, Any]:
    return {"cache_control": {"type": "ephemeral"}, **block}


SCHEMA_B = {
    "type": "object",
    "required": ["z", "a"],
    "properties": {"z": {"type": "string"}, "a": {"type": "integer"}},
}

CANONICALIZE = {
    "keys sorted, schema properties in the caller's order, required sorted, tools by name": Case(
        "anthropic",
        {
            "model": "m",
            "max_tokens": 8,
            "tools": [
                {"name": "b_tool", "description": "B", "input_schema": SCHEMA_B},
                {"name": "a_tool", "input_schema": {"type": "object", "properties": {}}, "description": "A"},
            ],
            "messages": [{"role": "user", "content": "hi"}],
        },
        {
            "model": "m",
            "max_tokens": 8,
            "tools": [
                {"description": "A", "input_schema": {"properties": {}, "type": "object"}, "name": "a_tool"},
                _ephemeral(
                    {
                        "description": "B",
                        "input_schema": {
                            "properties": {"z": {"type": "string"}, "a": {"type": "integer"}},
                            "required": ["a", "z"],
                            "type": "object",
                        },
                        "name": "b_tool",
                    }
                ),
            ],
            "messages": [{"content": [_ephemeral({"text": "hi", "type": "text"})], "role": "user"}],
        },
        [("tools-sorted", "tools")],
    ),
    "a tool_result of one text block is sent as its string": Case(
        "anthropic",
        {
            "model": "m",
            "max_tokens": 8,
            "messages": [
                {"role": "user", "content": "run ls"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "sh", "input": {"cmd": "ls"}}],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "a.py"}],
                        }
                    ],
                },
            ],
        },
        {
            "model": "m",
            "max_tokens": 8,
            "messages": [
                {"content": [{"text": "run ls", "type": "text"}], "role": "user"},
                {
                    "content": [{"id": "t1", "input": {"cmd": "ls"}, "name": "sh", "type": "tool_use"}],
                    "role": "assistant",
                },
                {
                    "content": [_ephemeral({"content": "a.py", "tool_use_id": "t1", "type": "tool_result"})],
                    "role": "user",
                },
            ],
        },
        [("content-shape", "messages[2]")],
    ),
}

RELOCATE = {
    "a clock line in the system prompt moves to the end of the latest turn": Case(
        "anthropic",
        {
            "model": "m",
            "max_tokens": 8,
            "system": "You are terse.\nCurrent time: 10:00:01",
            "messages": [{"role": "user", "content": "hi"}],
        },
        {
            "model": "m",
            "max_tokens": 8,
            "system": [_ephemeral({"text": "You are terse.\n", "type": "text"})],
            "messages": [
                {
                    "content": [
                        _ephemeral({"text": "hi", "type": "text"}),
                        {"text": "Current time: 10:00:01", "type": "text"},
                    ],
                    "role": "user",
                }
            ],
        },
        [("drop-moved", "system[0].drop")],
    ),
    "Chat Completions: the clock follows the turn as a system message": Case(
        "openai_chat",
        {
            "model": "gpt-5",
            "messages": [
                {"role": "system", "content": "Be terse.\nCurrent time: 10:00:01"},
                {"role": "user", "content": "hi"},
            ],
        },
        {
            "model": "gpt-5",
            "messages": [
                {"content": "Be terse.\n", "role": "system"},
                {"content": "hi", "role": "user"},
                {"content": "Current time: 10:00:01", "role": "system"},
            ],
        },
        [("drop-moved", "messages[0][0].drop")],
    ),
    "Responses: the clock leaves the instructions for the end of the input": Case(
        "openai_responses",
        {
            "model": "gpt-5",
            "instructions": "Be terse.\nCurrent time: 10:00:01",
            "input": [{"role": "user", "content": "hi"}],
        },
        {
            "model": "gpt-5",
            "instructions": "Be terse.\n",
            "input": [
                {"content": "hi", "role": "user"},
                {"content": "Current time: 10:00:01", "role": "system"},
            ],
        },
        [("drop-moved", "instructions.drop")],
    ),
    "a past turn's envelope is pruned": Case(
        "anthropic",
        {
            "model": "m",
            "max_tokens": 8,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "q1"},
                        {"type": "text", "text": "<system-reminder>todo: none</system-reminder>"},
                    ],
                },
                {"role": "assistant", "content": "a1"},
                {"role": "user", "content": "q2"},
            ],
        },
        {
            "model": "m",
            "max_tokens": 8,
            "messages": [
                {"content": [{"text": "q1", "type": "text"}], "role": "user"},
                {"content": [{"text": "a1", "type": "text"}], "role": "assistant"},
                {"content": [_ephemeral({"text": "q2", "type": "text"})], "role": "user"},
            ],
        },
        [("drop-pruned", "messages[0][1].drop")],
    ),
    "keep_past_drop keeps a past turn's envelope where it was": Case(
        "anthropic",
        {
            "model": "m",
            "max_tokens": 8,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "q1"},
                        {"type": "text", "text": "<system-reminder>todo: none</system-reminder>"},
                    ],
                },
                {"role": "assistant", "content": "a1"},
                {"role": "user", "content": "q2"},
            ],
        },
        {
            "model": "m",
            "max_tokens": 8,
            "messages": [
                {
                    "content": [
                        {"text": "q1", "type": "text"},
                        {"text": "<system-reminder>todo: none</system-reminder>", "type": "text"},
                    ],
                    "role": "user",
                },
                {"content": [{"text": "a1", "type": "text"}], "role": "assistant"},
                {"content": [_ephemeral({"text": "q2", "type": "text"})], "role": "user"},
            ],
        },
        [],
        keep_past_drop=True,
    ),
}

LONG_DOC = "Chapter one of the handbook.\n" * 400
REFPOOL = {
    "a long system text stays where the caller put it until a fold is declared": Case(
        "anthropic",
        {
            "model": "m",
            "max_tokens": 8,
            "system": [
                {"type": "text", "text": LONG_DOC},
                {"type": "text", "text": "Answer from the handbook above."},
            ],
            "messages": [{"role": "user", "content": "hi"}],
        },
        {
            "model": "m",
            "max_tokens": 8,
            "system": [
                {"text": LONG_DOC, "type": "text"},
                _ephemeral({"text": "Answer from the handbook above.", "type": "text"}),
            ],
            "messages": [{"content": [_ephemeral({"text": "hi", "type": "text"})], "role": "user"}],
        },
        [],
    ),
}


def _emitted(case: Case) -> dict[str, Any]:
    options = PrepareOptions(engine=case.engine, bridge=BridgeOptions(keep_past_drop=case.keep_past_drop))
    body = dict(prepare(case.api, case.body, options).body)
    key = body.pop("prompt_cache_key", None)
    if case.engine == "openai":
        assert isinstance(key, str) and key.startswith("telos-"), key
    return body


def _records_of(
    case: Case,
    bridge_pass: Callable[[TelosIR], TelosIR],
    *,
    after: Callable[[TelosIR], TelosIR] | None = None,
) -> list[tuple[str, str]]:
    """The records ``bridge_pass`` adds to the lifted IR (run after the passes before it, ``after``)."""
    ir = lift_request(case.api, case.body, session_id="bridge-table")
    if after is not None:
        ir = after(ir)
    after_pass = bridge_pass(ir)
    new = after_pass.records[len(ir.records) :]
    return [(record.kind, record.where) for record in new]


def _relocate(case: Case) -> Callable[[TelosIR], TelosIR]:
    return partial(relocate_drop, keep_past_drop=case.keep_past_drop)


@pytest.mark.parametrize("case", CANONICALIZE.values(), ids=CANONICALIZE.keys())
def test_canonicalize(case: Case) -> None:
    assert _emitted(case) == case.emitted
    assert _records_of(case, canonicalize) == case.records


@pytest.mark.parametrize("case", RELOCATE.values(), ids=RELOCATE.keys())
def test_relocate_drop(case: Case) -> None:
    assert _emitted(case) == case.emitted
    assert _records_of(case, _relocate(case), after=canonicalize) == case.records


@pytest.mark.parametrize("case", REFPOOL.values(), ids=REFPOOL.keys())
def test_render_ref_pool(case: Case) -> None:
    assert _emitted(case) == case.emitted
    assert _records_of(case, render_ref_pool) == case.records


def test_every_pass_of_the_default_policy_has_a_table() -> None:
    """A new pass fails this until it has a table here (the output filter's is tests/filters)."""
    from telos_wrap.bridge import passes

    tested = {
        "bridge.canonicalize",
        "bridge.output_filter",  # tests/filters/test_bridge_pass.py, on all three APIs
        "bridge.relocate",
        "bridge.refpool",
        "bridge.invariants",
    }
    every = {name for name, _ in passes(BridgeOptions(output_filter="aggressive"))}
    assert "bridge.output_filter" in every
    assert every <= tested
