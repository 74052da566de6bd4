"""Learned volatility: an untagged line that changes every turn costs one cache miss, not one per turn."""

from __future__ import annotations

import json

import anthropic

import telos_wrap
from telos_wrap.emulator import ManualClock

from .convo import MODEL, RecordingTransport, messages_for, system_prompt


def _usage(client: anthropic.Anthropic, turn: int) -> tuple[int, int]:
    usage = client.messages.create(
        model=MODEL, max_tokens=32, system=system_prompt(turn), messages=messages_for(turn)
    ).usage
    return usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0


def test_untagged_clock_line_costs_one_cache_break(
    claude: anthropic.Anthropic, transport: RecordingTransport, clock: ManualClock
) -> None:
    with telos_wrap.session("clock", clock=clock.now) as sess:
        usage = [_usage(claude, turn) for turn in range(10)]
    # "Server clock: …" is not a bare statement of the present: a time of day may be data, so it stays
    # in place until it is seen to change (request 1). From turn 2 on, each request reads everything
    # the previous one read or wrote (nothing is re-written).
    for turn in range(2, 10):
        read, _ = usage[turn]
        previous_read, previous_write = usage[turn - 1]
        assert read >= previous_read + previous_write, (turn, usage)
    [span] = sess.volatile_spans
    assert span.learned_at == 1
    assert (span.block, span.line, span.lines, span.kind) == (0, 1, 1, "value")
    # Found by keyed digests of the line's skeleton (values masked): no text, no pattern.
    assert span.own and "2026" not in json.dumps(span.to_json())
    assert sess.stats.cache_breaks == 1
    # Recorded and explained: the clock line now travels at the end of the latest user turn.
    last = transport.bodies[-1]
    assert b"Server clock: 2026-05-01 10:09:07" in last
    explained = sess.explain(9)
    assert "learned-volatile: system[0].drop (system block 0, from line 1, line)" in explained
    assert "a value in it changed at request 1" in explained
    assert "drop-moved" in explained
    # Before it changed, nothing was moved: request 0 went out with the line where the caller wrote it.
    first = sess.explain(0)
    assert "learned-volatile" not in first
    assert b"Server clock: 2026-05-01 10:00:07" in transport.bodies[0]


def test_learning_can_be_switched_off(claude: anthropic.Anthropic, clock: ManualClock) -> None:
    with telos_wrap.session("clock-off", clock=clock.now, learn_volatility=False) as sess:
        usage = [_usage(claude, turn) for turn in range(5)]
    assert sess.volatile_spans == ()
    assert all(read == 0 for read, _ in usage[1:])  # every turn misses: the clock is in the prefix
    assert sess.stats.cache_breaks == 4


def test_forget_volatility(claude: anthropic.Anthropic, clock: ManualClock) -> None:
    with telos_wrap.session(clock=clock.now) as sess:
        for turn in range(3):
            _usage(claude, turn)
        assert len(sess.volatile_spans) == 1
        sess.forget_volatility()
        assert len(sess.volatile_spans) == 0
