"""``telos.output_filter.removed``: the tokens the output filter took out of tool results, as a metric
that adds up to the session's ``stats.filter_tokens_removed``."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.sessions.core import runtime_of
from tests.sessions.filter_convo import MODEL, REQUESTS, SYSTEM, TOOLS, messages_for

from .conftest import Otel

METRIC = "telos.output_filter.removed"


def _send(client: Any, request: int) -> None:
    client.messages.create(
        model=MODEL, max_tokens=16, system=SYSTEM, tools=TOOLS, messages=messages_for(request)
    )


def test_the_metric_adds_up_to_the_session_stats(otel: Otel, emulator: str, track: Any) -> None:
    client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
    with telos_wrap.session("filter-metric", output_filter="aggressive") as s:
        for request in range(REQUESTS):
            _send(client, request)
    stats = s.stats
    assert stats.filtered_outputs >= 2 and stats.filter_tokens_removed > 0
    total = otel.total(METRIC)
    # Each result counted once, on the request that filtered it first (characters / 4).
    assert int(total) == stats.filter_tokens_removed
    filtered = 0
    for n in range(REQUESTS):
        record = runtime_of(s).request_record(n)
        assert record is not None and record.explained is not None
        filtered += record.explained.filtered_chars
    assert total == pytest.approx(filtered / 4)
    assert {tuple(sorted(a)) for a, _ in otel.points(METRIC)} == {("telos.engine",)}


def test_off_by_default_nothing_is_counted(otel: Otel, emulator: str, track: Any) -> None:
    client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
    with telos_wrap.session("filter-metric-off"):
        for request in range(3):
            _send(client, request)
    assert otel.points(METRIC) == []
    assert otel.total("telos.requests") == 3
