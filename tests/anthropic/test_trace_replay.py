"""Replaying real agent sessions through the patched anthropic SDK: the TELOS invariants hold on the wire."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import telos_wrap
from telos_wrap.ir.order import assert_ir_invariants
from telos_wrap.pipeline import Prepared, PrepareOptions, prepare
from telos_wrap.replay.traces import TraceRequest, group_sessions, jitter, load_trace

from .capture import Capture, create_kwargs
from .wire import first_drop_index, flatten, lookback_positions, marker_count

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def long_session(name: str, min_turns: int) -> list[TraceRequest]:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{path} not found (the sample traces live in ../shared/traces)")
    for group in group_sessions(load_trace(path)):
        if len(group) >= min_turns:
            return group
    raise AssertionError(f"no session of {min_turns}+ turns in {name}")


def replay(requests: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], Prepared]]:
    """Send each request through the patched SDK; yield (wire body, the pipeline's own result).

    The session learns nothing (tau-bench's system prompt states a fixed time of day, which a
    learning session would carry as DROP): the wire must equal the stateless pipeline's output.
    """
    capture = Capture()
    client = capture.client()
    with telos_wrap.session(learn_volatility=False):
        yield from _send(client, capture, requests)


def _send(
    client: Any, capture: Capture, requests: list[dict[str, Any]]
) -> Iterator[tuple[dict[str, Any], Prepared]]:
    for kwargs in requests:
        client.messages.create(**create_kwargs(kwargs))
        body = capture.bodies[-1]
        expected = prepare(
            "anthropic", {**{k: v for k, v in kwargs.items()}}, PrepareOptions(engine="anthropic")
        )
        assert body == expected.body, "the wire body differs from the pipeline's deterministic output"
        yield body, expected


def content(items: list[tuple[str, str, bool]]) -> list[tuple[str, str]]:
    """Positions without their cache markers (markers are not content)."""
    return [(kind, block) for kind, block, _ in items]


def check_consecutive(
    previous: tuple[dict[str, Any], Prepared], current: tuple[dict[str, Any], Prepared]
) -> None:
    before, before_prepared = previous
    after, _ = current
    old, new = flatten(before), flatten(after)
    cut = first_drop_index(before, before_prepared.ir)
    # I2: everything before the previous request's DROP tail is a prefix of this request.
    assert content(new[:cut]) == content(old[:cut]), "history before the previous DROP tail was rewritten"
    changed = next(
        (i for i, (a, b) in enumerate(zip(content(old), content(new), strict=False)) if a != b),
        min(len(old), len(new)),
    )
    old_pos, new_pos = lookback_positions(old), lookback_positions(new)
    old_marks = [old_pos[i] for i, (_, _, marked) in enumerate(old) if marked and i < changed]
    new_marks = [new_pos[i] for i, (_, _, marked) in enumerate(new) if marked]
    assert old_marks, "the previous request cached nothing before the first change"
    assert any(0 <= n - o < 20 for o in old_marks for n in new_marks), (
        f"no breakpoint of this request is within the 20-position lookback of a previous one "
        f"(previous {old_marks}, now {new_marks}, first change at position "
        f"{new_pos[changed] if changed < len(new) else 'end'})"
    )


@pytest.mark.usefixtures("patched")
def test_real_30_turn_session_keeps_invariants() -> None:
    session = long_session("mini-swe-agent.as-anthropic.jsonl.xz", 30)
    sent = list(replay([request.kwargs for request in session]))
    assert len(sent) >= 30
    for body, prepared in sent:
        assert marker_count(body) <= 4
        assert_ir_invariants(prepared.ir)
    for previous, current in itertools.pairwise(sent):
        check_consecutive(previous, current)


@pytest.mark.usefixtures("patched")
def test_tool_heavy_session_keeps_invariants() -> None:
    session = long_session("tau-bench.as-anthropic.jsonl.xz", 20)
    sent = list(replay([request.kwargs for request in session]))
    for body, _ in sent:
        assert 1 <= marker_count(body) <= 4
    for previous, current in itertools.pairwise(sent):
        check_consecutive(previous, current)


@pytest.mark.usefixtures("patched")
def test_jittered_harness_yields_the_clean_cached_prefix_every_turn() -> None:
    session = long_session("tau-bench.as-anthropic.jsonl.xz", 20)
    clean = list(replay([request.kwargs for request in session]))
    jittered = list(
        replay([jitter("anthropic", request.kwargs, request.turn, seed=7) for request in session])
    )
    for (clean_body, clean_prepared), (jitter_body, jitter_prepared) in zip(clean, jittered, strict=True):
        clean_cut = first_drop_index(clean_body, clean_prepared.ir)
        jitter_cut = first_drop_index(jitter_body, jitter_prepared.ir)
        assert content(flatten(jitter_body)[:jitter_cut]) == content(flatten(clean_body)[:clean_cut])
        # The volatile envelope was moved to the tail, not lost.
        tail = "".join(block for _, block, _ in flatten(jitter_body)[jitter_cut:])
        assert "Current time:" in tail and "environment_info" in tail
    kinds = {record.kind for record in jittered[-1][1].ir.records}
    assert {"drop-moved", "tools-sorted"} <= kinds


def test_jitter_changes_bytes_without_telos() -> None:
    """Control: the jittered requests really do differ turn to turn when telos is not involved."""
    session = long_session("tau-bench.as-anthropic.jsonl.xz", 20)
    capture = Capture()
    client = capture.client()
    for request in session[:3]:
        client.messages.create(**create_kwargs(jitter("anthropic", request.kwargs, request.turn, seed=7)))
    first, second = (flatten(body) for body in capture.bodies[:2])
    assert first[0] != second[0], "tools or system should differ between jittered turns"
    assert telos_wrap.is_patched() is False
