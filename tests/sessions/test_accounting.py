"""Numbers that neither flatter nor disagree: one price table for stats and replay, the docs' rule for
GPT-5.6 writes, and calls that never reached the vendor counted apart from answered requests."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import telos_wrap
from telos_wrap.engines.prices import DEFAULT_PRICES, PriceMultipliers, prices_for
from telos_wrap.replay.results import ReplayedTurn
from telos_wrap.replay.results import prices_for as replay_prices
from telos_wrap.sessions.durable.state import EngineUsage
from telos_wrap.sessions.views.stats import SessionStats
from tests.reliability.harness import Wire, client_for, kwargs_for
from tests.sdk_http import sdk_http

DOCS = Path(__file__).parents[2] / "docs"


def test_gpt_5_6_relative_cost_is_the_docs_rule() -> None:
    """docs/vendor-facts.md §2.4: from GPT-5.6 a write costs 1.25x the uncached input, a read 0.1x."""
    usage = EngineUsage(responses=3, raw=2_000, read=6_000, write=1_500, write_1h=500, output=90)
    stats = SessionStats(
        responses_with_usage=3,
        raw_input=2_000,
        cache_read=6_000,
        cache_write=1_500,
        usage={"openai": usage},
        prices=dict(DEFAULT_PRICES),
    )
    rule = (2_000 + 0.1 * 6_000 + 1.25 * 1_500) / (2_000 + 6_000 + 1_500)
    assert stats.relative_cost == pytest.approx(rule)
    assert prices_for("openai", "gpt-5.6") == PriceMultipliers(read=0.1, write=1.25, write_long=1.25)
    assert prices_for("openai", "gpt-5.6-mini").write == 1.25
    assert prices_for("openai", "gpt-4o").write == 1.0, "before GPT-5.6: no write fee"
    assert prices_for("anthropic", "claude-fable-5-1").read == 0.025


@pytest.mark.parametrize("engine", sorted(DEFAULT_PRICES))
def test_replay_and_stats_price_the_same_traffic_alike(engine: str) -> None:
    turns = [
        ReplayedTurn("s", 0, raw=5_000, read=0, write=4_000, write_1h=1_000, output=10),
        ReplayedTurn("s", 1, raw=300, read=8_700, write=400, write_1h=0, output=10),
    ]
    usage = EngineUsage()
    for t in turns:
        usage = usage.plus(raw=t.raw, read=t.read, write=t.write, write_1h=t.write_1h, output=t.output)
    stats = SessionStats(usage={engine: usage}, prices=dict(DEFAULT_PRICES))
    assert sum(t.cost(replay_prices(engine)) for t in turns) == pytest.approx(stats.cost)


def test_the_docs_price_table_is_the_codes() -> None:
    text = (DOCS / "sessions.md").read_text()
    rows = re.findall(r"^\| ([a-z, ]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    documented = {
        name.strip(): PriceMultipliers(float(r), float(w), float(wl))
        for names, r, w, wl in rows
        for name in names.split(",")
    }
    assert documented == DEFAULT_PRICES


def _connection_error(request: sdk_http.Request, attempt: int) -> Any:
    if attempt in (3, 6):
        raise sdk_http.ConnectError("refused")
    return None


def test_a_call_that_never_reached_the_vendor_is_counted_apart() -> None:
    telos_wrap.patch()
    client = client_for("anthropic", Wire(_connection_error))
    failed = 0
    with telos_wrap.session("connection-errors") as s:
        for _ in range(8):
            try:
                client.messages.create(**kwargs_for("anthropic"))
            except Exception:
                failed += 1
    stats = s.stats
    assert failed == 2
    assert stats.responses_with_usage == 6 and stats.unreported == 0
    assert stats.unanswered == 2
    assert stats.requests == stats.responses_with_usage + stats.unreported + stats.unanswered


def test_explain_minus_one_in_a_fresh_process_resolves_the_index() -> None:
    """Another process (here: another ``Session`` object on the same store, holding no records)
    resolves ``explain(-1)`` against the session's request count and says what it holds."""
    from telos_wrap.sessions import MemoryStore, Session

    store = MemoryStore()
    telos_wrap.patch()
    client = client_for("anthropic", Wire())
    with telos_wrap.session("explain-elsewhere", store=store) as first:
        for _ in range(3):
            client.messages.create(**kwargs_for("anthropic"))
    assert first.explain(-1).startswith("session explain-elsewhere request 2 ")
    fresh = Session("explain-elsewhere", store=store).bind(client)  # the calls' tenant (docs/sessions.md)
    text = fresh.explain(-1)
    assert "request 2 (explain(-1)) was not prepared in this process" in text
    assert "the session has 3 request(s), this process prepared none of them" in text
    assert "the session has 3 request(s), 0 to 2" in fresh.explain(7)
    assert "no requests yet" in Session("never-used", store=store).explain(-1)
