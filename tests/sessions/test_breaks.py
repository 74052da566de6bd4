"""Cache-break detection: where, why, tokens at risk; one logging warning; counted; callback."""

from __future__ import annotations

import itertools
import logging

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import ManualClock
from telos_wrap.sessions import CacheBreak

from .convo import MODEL, messages_for, system_prompt

SYSTEM = system_prompt(0, clock_line=False)


def _turn(client: anthropic.Anthropic, turn: int, **overrides: object) -> anthropic.types.Message:
    kwargs: dict[str, object] = {
        "model": MODEL,
        "max_tokens": 32,
        "system": SYSTEM,
        "messages": messages_for(turn),
    }
    kwargs.update(overrides)
    return client.messages.create(**kwargs)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "telos_wrap.sessions" and r.levelno == logging.WARNING]


def test_append_only_40_turns_reports_no_break(
    claude: anthropic.Anthropic, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[CacheBreak] = []
    with telos_wrap.session("append-only", clock=clock.now, on_cache_break=seen.append) as sess:
        reads = []
        for turn in range(40):
            reads.append(_turn(claude, turn).usage.cache_read_input_tokens or 0)
            clock.advance(20)
    assert seen == []
    assert sess.stats.cache_breaks == 0
    assert sess.cache_breaks == ()
    assert _warnings(caplog) == []
    assert sess.stats.requests == 40
    # The emulator agrees: from the second turn on every request reads more than the one before.
    assert reads[1] > 0
    assert all(later > earlier for earlier, later in itertools.pairwise(reads[1:]))


def test_rewritten_old_message_is_named_with_its_reason(
    claude: anthropic.Anthropic, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[CacheBreak] = []
    with telos_wrap.session("rewrite", clock=clock.now, on_cache_break=seen.append) as sess:
        for turn in range(6):
            _turn(claude, turn)
            clock.advance(10)
        # The application edits the user message of turn 2, which is messages[4].
        _turn(claude, 6, messages=messages_for(6, rewrite=2))
    assert len(seen) == 1
    brk = seen[0]
    assert brk.request == 6
    assert brk.reason == "history_rewritten"
    assert (brk.segment, brk.message, brk.block) == ("messages", 4, 0)
    assert brk.where == "messages[4][0]"
    assert brk.tokens_at_risk > 0
    assert sess.stats.cache_breaks == 1
    assert sess.cache_breaks == (brk,)
    warnings = _warnings(caplog)
    assert len(warnings) == 1
    assert "history_rewritten" in warnings[0].getMessage()
    assert "messages[4][0]" in warnings[0].getMessage()
    assert "CACHE BREAK history_rewritten at messages[4][0]" in sess.explain(6)


@pytest.mark.parametrize(
    ("change", "reason", "segment"),
    [
        ({"model": "claude-sonnet-5"}, "model_changed", "system"),
        ({"system": SYSTEM.replace("Example Corp", "Other Corp")}, "system_changed", "system"),
        (
            {
                "tools": [
                    {"name": "lookup", "description": "Find an order.", "input_schema": {"type": "object"}}
                ]
            },
            "tools_changed",
            "tools",
        ),
        ({"tool_choice": {"type": "none"}}, "params_changed", "messages"),
    ],
)
def test_each_reason_is_classified(
    claude: anthropic.Anthropic, clock: ManualClock, change: dict[str, object], reason: str, segment: str
) -> None:
    seen: list[CacheBreak] = []
    with telos_wrap.session(clock=clock.now, on_cache_break=seen.append):
        for turn in range(3):
            _turn(claude, turn)
        _turn(claude, 3, **change)
    assert [(b.reason, b.segment) for b in seen] == [(reason, segment)]


def test_ttl_expiry_is_a_likely_break(claude: anthropic.Anthropic, clock: ManualClock) -> None:
    seen: list[CacheBreak] = []
    with telos_wrap.session(clock=clock.now, on_cache_break=seen.append) as sess:
        for turn in range(3):
            _turn(claude, turn)
        clock.advance(301)  # every breakpoint here has the 5-minute TTL
        message = _turn(claude, 3)
    assert [b.reason for b in seen] == ["ttl_expired"]
    assert seen[0].tokens_at_risk > 0
    assert message.usage.cache_read_input_tokens == 0  # the emulator agrees: it expired
    assert sess.stats.cache_breaks == 1


def test_a_failing_callback_never_breaks_the_call(
    claude: anthropic.Anthropic, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(brk: CacheBreak) -> None:
        raise RuntimeError("callback bug")

    with telos_wrap.session(clock=clock.now, on_cache_break=boom) as sess:
        _turn(claude, 0)
        _turn(claude, 1, model="claude-sonnet-5")
    assert sess.stats.requests == 2
    assert any("on_cache_break callback" in r.getMessage() for r in caplog.records)
