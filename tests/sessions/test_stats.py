"""Stats: exact counters, hit ratio, cost relative to all-uncached, savings; multipliers overridable."""

from __future__ import annotations

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import ManualClock
from telos_wrap.ir.model import UsageReport
from telos_wrap.sessions import PriceMultipliers, SessionStats
from telos_wrap.sessions.core import runtime_of

from .convo import MODEL, messages_for, system_prompt


def test_stats_match_the_responses_exactly(claude: anthropic.Anthropic, clock: ManualClock) -> None:
    totals = [0, 0, 0, 0]
    with telos_wrap.session(clock=clock.now) as sess:
        for turn in range(6):
            u = claude.messages.create(
                model=MODEL,
                max_tokens=16,
                system=system_prompt(0, clock_line=False),
                messages=messages_for(turn),
            ).usage
            for i, value in enumerate(
                (u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens, u.output_tokens)
            ):
                totals[i] += value or 0
    stats = sess.stats
    assert [stats.raw_input, stats.cache_read, stats.cache_write, stats.output] == totals
    assert (stats.requests, stats.responses_with_usage, stats.unreported) == (6, 6, 0)
    assert stats.by_engine == {"anthropic": 6}
    assert stats.hit_ratio == pytest.approx(totals[1] / (totals[0] + totals[1] + totals[2]))
    expected = totals[0] + 0.1 * totals[1] + 1.25 * totals[2]
    assert stats.cost == pytest.approx(expected)
    assert stats.uncached_cost == totals[0] + totals[1] + totals[2]
    assert stats.savings == pytest.approx(stats.uncached_cost - expected)
    assert stats.relative_cost is not None and stats.relative_cost < 1.0


def test_cost_uses_ttl_breakdown_and_overrides() -> None:
    sess = telos_wrap.session(prices={"anthropic": PriceMultipliers(read=0.025, write=1.25, write_long=2.0)})
    index = runtime_of(sess).note_passthrough("anthropic", "anthropic", {"messages": []})
    report = UsageReport(
        engine="anthropic",
        raw_input=100,
        cache_read=1000,
        cache_write=300,
        output=5,
        cache_write_by_ttl={"5m": 100, "1h": 200},
    )
    runtime_of(sess).record_usage(index, report)
    runtime_of(sess).record_usage(index, report)  # a second report of the same request is ignored
    runtime_of(sess).record_usage(runtime_of(sess).note_passthrough("anthropic", "anthropic", {}), None)
    stats = sess.stats
    assert stats.cost == pytest.approx(100 + 1000 * 0.025 + 100 * 1.25 + 200 * 2.0)
    assert (stats.responses_with_usage, stats.unreported, stats.requests) == (1, 1, 2)
    assert SessionStats().hit_ratio is None and SessionStats().relative_cost is None
