"""BP-fork: on a request that diverges from the session's previous one, the shared prefix is anchored."""

from __future__ import annotations

from typing import Any

from telos_wrap.engines.anthropic import AnthropicEngine
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Band, BlockKind, TelosBlock, TelosIR, TelosMessage

TEXT = {"type": "text", "text": "some words"}
THINKING = {"type": "thinking", "thinking": "hm", "signature": "s"}


def _block(
    name: str, payload: dict[str, Any], kind: BlockKind = BlockKind.TEXT, band: Band = Band.FOLD
) -> TelosBlock:
    return TelosBlock(name, band, kind, payload)


def _ir(*messages: tuple[TelosBlock, ...], system: tuple[TelosBlock, ...] = (), tools: int = 0) -> TelosIR:
    return TelosIR(
        session_id="s",
        api="anthropic",
        system=system,
        tools=tuple(
            _block(f"t{i}", {"name": f"t{i}", "input_schema": {}}, BlockKind.TOOL_DEF, Band.PIN)
            for i in range(tools)
        ),
        messages=tuple(
            TelosMessage("user" if i % 2 == 0 else "assistant", blocks) for i, blocks in enumerate(messages)
        ),
    )


def _where(plan: Any) -> dict[str, list[tuple[str, int | None, int]]]:
    found: dict[str, list[tuple[str, int | None, int]]] = {}
    for bp in plan.breakpoints:
        found.setdefault(bp.name, []).append((bp.segment, bp.message, bp.block))
    return found


def test_fork_marks_the_last_cacheable_block_before_the_first_differing_message() -> None:
    ir = _ir(
        (_block("a", TEXT),),
        (_block("b", TEXT), _block("c", THINKING, BlockKind.THINKING)),  # thinking: no marker (R6)
        (_block("d", TEXT),),
        (_block("e", TEXT),),
    )
    plan = AnthropicEngine().plan(ir, TelosHints(), fork=2)
    assert _where(plan)["BP-fork"] == [("messages", 1, 0)]
    assert any("BP-fork on messages[1][0]" in note and "message 2" in note for note in plan.notes)


def test_no_fork_no_marker_and_the_same_plan_as_before() -> None:
    ir = _ir((_block("a", TEXT),), (_block("b", TEXT),), (_block("c", TEXT),))
    plan = AnthropicEngine().plan(ir, TelosHints())
    assert "BP-fork" not in _where(plan)
    assert plan == AnthropicEngine().plan(ir, TelosHints(), fork=None)
    assert not any("BP-fork" in note for note in plan.notes)


def test_fork_never_covers_a_drop_block() -> None:
    drop = _block("now", {"type": "text", "text": "Current time: 9"}, band=Band.DROP)
    ir = _ir((_block("a", TEXT), drop), (_block("b", TEXT),), (_block("c", TEXT),))
    plan = AnthropicEngine().plan(ir, TelosHints(), fork=2)
    assert "BP-fork" not in _where(plan)
    assert _where(plan)["BP-X"] == [("messages", 0, 0)]


def test_fork_at_the_tail_is_bp_x_and_takes_no_second_slot() -> None:
    ir = _ir((_block("a", TEXT),), (_block("b", TEXT),))
    plan = AnthropicEngine().plan(ir, TelosHints(), fork=2)
    assert "BP-fork" not in _where(plan)
    assert _where(plan)["BP-X"] == [("messages", 1, 0)]


def test_fork_outranks_mid_system_and_tool_anchors_within_four() -> None:
    system = (
        _block("s0", TEXT, band=Band.PIN),
        _block("s1", {"type": "text", "text": "pool"}, band=Band.FOLD),
    )
    ir = _ir(*[(_block(f"m{i}", TEXT),) for i in range(50)], system=system, tools=2)
    without = _where(AnthropicEngine().plan(ir, TelosHints()))
    assert sorted(without) == ["BP-R", "BP-S", "BP-X", "BP-mid"]
    plan = AnthropicEngine().plan(ir, TelosHints(), fork=10)
    assert len(plan.breakpoints) == 4
    assert _where(plan) == {
        "BP-X": [("messages", 49, 0)],
        "BP-fork": [("messages", 9, 0)],
        "BP-mid": without["BP-mid"],
        "BP-R": [("system", None, 1)],
    }
