"""Learned volatility: an untagged line that changes every turn costs one cache miss, not one per turn."""

from __future__ import annotations

import json

import anthropic

import telos_wrap
from telos_wrap.emulator import ManualClock

from .convo import MODEL, RULES, RecordingTransport, messages_for, system_prompt


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
    # Named as the caller wrote it: block system[0], its second line (counted from 1).
    assert "learned-volatile: system[0].drop (system[0] line 2, 1 line)" in explained
    assert "moved whole from system[0] line 2 " in explained
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


def test_lines_are_named_as_the_caller_wrote_them_everywhere(
    claude: anthropic.Anthropic, transport: RecordingTransport, clock: ManualClock
) -> None:
    """One convention in the cache break, ``explain`` and the pytest report: ``system[i] line n``, n
    counted from 1 in the caller's own text, a moved (tagged) line above it included."""
    from telos_wrap.replay.traces import TraceRequest
    from telos_wrap.testing.changes import caller_change

    def system(turn: int) -> str:
        return (
            "You are the support assistant of Example Corp.\n"
            f"Current time: 2026-05-01T10:{turn:02d}:00\n"  # tagged: moved by the lift on sight
            "Answer in English.\n"
            f"Server clock: 2026-05-01 10:{turn:02d}:07\n" + RULES  # untagged: learned at its first change
        )

    kwargs = []
    with telos_wrap.session("line-numbers") as sess:
        for turn in range(3):
            kwargs.append(
                {"model": MODEL, "max_tokens": 32, "system": system(turn), "messages": messages_for(turn)}
            )
            claude.messages.create(**kwargs[-1])
            clock.advance(5)
    assert "system[0] line 4, 1 line" in sess.explain(2), "the fourth line as written"
    assert any("system[0] line 4" in b.detail for b in sess.cache_breaks), [
        b.detail for b in sess.cache_breaks
    ]
    before, after = (TraceRequest("s", n, "anthropic", kwargs[n]) for n in (0, 1))
    assert caller_change(before, after).startswith("system[0] line 2 changed"), "the first changed line"


def test_explain_names_the_cut_whatever_other_conversations_lifted_before(
    claude: anthropic.Anthropic, clock: ManualClock
) -> None:
    # Two conversations of this process lift the same prompts first: one to turn 9, one to turn 4, so
    # every system text of the third is one the process has split before (the split is memoized by the
    # text) and the last clock line cut was turn 4's. The third's explain still names its own cut.
    for name, turns in (("clock-first", 10), ("clock-second", 5), ("clock-third", 10)):
        with telos_wrap.session(name, clock=clock.now) as sess:
            for turn in range(turns):
                _usage(claude, turn)
        explained = sess.explain(turns - 1)
        assert "learned-volatile: system[0].drop (system[0] line 2, 1 line)" in explained, (name, explained)
