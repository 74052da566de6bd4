"""Small run of ``benchmarks/fleet_learning.py``: one application (tau-bench's Anthropic conversion,
three conversations of six requests) on a first-change style, through the real SDK and the
emulator. The full run and its table: BENCHMARKS.md, "Fleet learning"."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
TAU = TRACES / "tau-bench.as-anthropic.jsonl.xz"
sys.path.insert(0, str(BENCHMARKS))

import fleet_learning  # noqa: E402
from cache_efficiency import sessions_of  # noqa: E402

from telos_wrap.replay.runner import patched  # noqa: E402


@pytest.mark.skipif(not TAU.exists(), reason="needs ../shared/traces")
def test_later_conversations_reach_the_oracle_bound() -> None:
    style = "env-dump"  # a value and a list, each learned alone only at its first change
    sessions, _ = sessions_of(TAU, "anthropic", 3, 6)
    with patched():
        row = fleet_learning.run_style(style, {"tau-bench": sessions})
    assert (row.off_first.conversations, row.on_later.conversations) == (1, 2)
    later_off, later_on = row.off_later.efficiency(), row.on_later.efficiency()
    assert later_off is not None and later_on is not None
    assert later_on >= fleet_learning.TARGET > later_off  # the first-change break is gone
    assert row.on_first.read == row.off_first.read  # the first conversation reads what it did alone
