"""The Anthropic plan and emit reuse settled history's summaries, and decide exactly as a full scan.

The oracle below is the straightforward planner (one flat scan over every block, the form the
engine had before it kept per-message summaries). Hypothesis builds conversations of tool runs,
thinking, empty text, caller markers and a DROP tail; the engine must place BP-X, BP-mid and the
caller's markers where the oracle does, and replaying the conversation turn by turn with the
session's tables must plan and emit exactly what a stateless call does.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from telos_wrap.engines.anthropic import MID_ANCHOR_STRIDE, AnthropicEngine, _cacheable
from telos_wrap.engines.base import PrefixTables
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Band, BlockKind, TelosBlock, TelosIR, TelosMessage

RUNS = (BlockKind.TOOL_USE, BlockKind.TOOL_RESULT)


def oracle(ir: TelosIR) -> tuple[list[tuple[int, int]], list[tuple[int, int]], tuple[int, int] | None]:
    """(caller markers, mid anchors, BP-X) of ``ir`` by one flat scan over all message blocks."""
    flat = [(m, b, block) for m, message in enumerate(ir.messages) for b, block in enumerate(message.blocks)]
    caller = [(m, b) for m, b, block in flat if "cache_control" in block.extra]
    first_drop = next((i for i, (_, _, block) in enumerate(flat) if block.band is Band.DROP), len(flat))
    x = next((i for i in range(first_drop - 1, -1, -1) if _cacheable(flat[i][2], "messages")), None)
    if x is None:
        return caller, [], None
    ends: list[int] = []
    previous: tuple[int, BlockKind] | None = None
    for i in range(x):
        m, _, block = flat[i]
        if previous == (m, block.kind) and block.kind in RUNS:
            ends[-1] = i
        else:
            ends.append(i)
        previous = (m, block.kind)
    mids: list[tuple[int, int]] = []
    position = (len(ends) // MID_ANCHOR_STRIDE) * MID_ANCHOR_STRIDE - 1
    while position >= 0 and len(mids) < 2:
        i = ends[position]
        while i >= 0 and not _cacheable(flat[i][2], "messages"):
            i -= 1
        if i >= 0:
            mids.append((flat[i][0], flat[i][1]))
        position -= MID_ANCHOR_STRIDE
    return caller, mids, (flat[x][0], flat[x][1])


PAYLOADS: dict[str, tuple[BlockKind, dict[str, Any]]] = {
    "text": (BlockKind.TEXT, {"type": "text", "text": "some words"}),
    "empty": (BlockKind.TEXT, {"type": "text", "text": " "}),
    "use": (BlockKind.TOOL_USE, {"type": "tool_use", "id": "t", "name": "bash", "input": {}}),
    "result": (BlockKind.TOOL_RESULT, {"type": "tool_result", "tool_use_id": "t", "content": "ok"}),
    "thinking": (BlockKind.THINKING, {"type": "thinking", "thinking": "hm", "signature": "s"}),
}


@st.composite
def conversations(draw: st.DrawFn) -> TelosIR:
    n_messages = draw(st.integers(1, 40))
    messages = []
    for m in range(n_messages):
        kinds = draw(st.lists(st.sampled_from(sorted(PAYLOADS)), min_size=0, max_size=6))
        blocks = []
        for b, name in enumerate(kinds):
            kind, payload = PAYLOADS[name]
            marked = name != "thinking" and name != "empty" and draw(st.integers(0, 30)) == 0
            extra = {"cache_control": {"type": "ephemeral"}} if marked else {}
            blocks.append(TelosBlock(f"m{m}b{b}", Band.FOLD, kind, {**payload, "n": b}, extra=extra))
        if m == n_messages - 1 and blocks:
            tail = draw(st.integers(0, 2))  # the latest turn's DROP envelope
            blocks += [
                TelosBlock(f"drop{i}", Band.DROP, BlockKind.TEXT, {"type": "text", "text": "Current time: 9"})
                for i in range(tail)
            ]
        messages.append(TelosMessage("user" if m % 2 == 0 else "assistant", tuple(blocks)))
    return TelosIR(session_id="s", api="anthropic", messages=tuple(messages))


def planned(ir: TelosIR, reuse: dict[str, list[Any]] | None = None) -> Any:
    return AnthropicEngine().plan(ir, TelosHints(), reuse=reuse)


@settings(max_examples=300, deadline=None)
@given(conversations())
def test_the_plan_places_markers_where_a_full_scan_does(ir: TelosIR) -> None:
    caller, mids, x = oracle(ir)
    plan = planned(ir)
    kept = caller[-4:]
    assert [(bp.message, bp.block) for bp in plan.breakpoints if bp.name == "caller"] == kept
    slots = 4 - len(kept)
    ours = [(bp.name, (bp.message, bp.block)) for bp in plan.breakpoints if bp.name != "caller"]
    expected = [
        ("BP-X", x),
        ("BP-mid", mids[0] if mids else None),
        ("BP-mid", mids[1] if len(mids) > 1 else None),
    ]
    wanted = [(name, where) for name, where in expected if where is not None and where not in kept][:slots]
    assert sorted(ours) == sorted(wanted)


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_turn_by_turn_reuse_plans_and_emits_as_a_stateless_call(ir: TelosIR) -> None:
    engine = AnthropicEngine()
    tables = PrefixTables()
    for end in range(1, len(ir.messages) + 1):
        turn = TelosIR(session_id="s", api="anthropic", messages=ir.messages[:end], settled=end - 1)
        stateless = TelosIR(session_id="s", api="anthropic", messages=ir.messages[:end])
        plan = engine.plan(turn, TelosHints(), reuse=tables)
        assert plan == engine.plan(stateless, TelosHints())
        assert engine.emit(turn, plan, reuse=tables) == engine.emit(stateless, plan)


@settings(max_examples=150, deadline=None)
@given(conversations(), conversations(), st.lists(st.tuples(st.booleans(), st.integers(1, 40)), max_size=12))
def test_tables_never_serve_rows_of_other_messages(ir: TelosIR, other: TelosIR, steps: Any) -> None:
    """Requests in any order — shorter, longer, another branch after a shared prefix — plan and
    emit exactly as stateless calls (the StopIteration of issue 12 came from stale rows)."""
    engine = AnthropicEngine()
    tables = PrefixTables()
    for branch, end in steps:
        # ``other``'s messages after ``ir``'s first three: a sibling branch of the same prefix.
        messages = (ir.messages[:3] + other.messages[3:]) if branch else ir.messages
        messages = messages[: min(end, len(messages))]
        turn = TelosIR(session_id="s", api="anthropic", messages=messages, settled=len(messages) - 1)
        stateless = TelosIR(session_id="s", api="anthropic", messages=messages)
        plan = engine.plan(turn, TelosHints(), reuse=tables)
        assert plan == engine.plan(stateless, TelosHints())
        assert engine.emit(turn, plan, reuse=tables) == engine.emit(stateless, plan)
