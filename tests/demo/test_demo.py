"""``telos-wrap demo``: the bundled session through the real SDK + patch() + the emulator, offline."""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

import telos_wrap
from telos_wrap.cli import main
from telos_wrap.replay.comparison import run_demo
from telos_wrap.replay.report import print_comparison
from telos_wrap.replay.runner import AS_SENT, TELOS, Progress


def run_main(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def demo_json() -> dict[str, Any]:
    started = time.monotonic()
    data: dict[str, Any] = json.loads(run_main("demo", "--json"))
    data["wall_seconds"] = time.monotonic() - started
    return data


@pytest.mark.timed
def test_demo_is_quick_and_offline(demo_json: dict[str, Any]) -> None:
    assert demo_json["requests"] == 43
    assert demo_json["engine"] == "anthropic"
    assert demo_json["wall_seconds"] < 30  # the issue: well under a minute on a fresh machine
    assert not telos_wrap.is_patched(), "the demo restores the SDKs"


def test_as_sent_numbers_come_from_the_emulator(demo_json: dict[str, Any]) -> None:
    """No cache hints, no caching: every token is uncached (exact emulator token counts)."""
    recorded = demo_json["variants"]["recorded"]["as sent"]
    jittered = demo_json["variants"]["jittered"]["as sent"]
    assert recorded["input_tokens"] == 348_324
    assert jittered["input_tokens"] == 349_958  # + the clock and <environment_info> of every turn
    for run in (recorded, jittered):
        assert run["cache_read"] == 0 and run["cache_write"] == 0
        assert run["cost_vs_uncached"] == 1.0
        assert len(run["turns"]) == 43


def test_telos_saves_on_the_jittered_session(demo_json: dict[str, Any]) -> None:
    jittered = demo_json["variants"]["jittered"]
    telos, auto = jittered["telos_wrap"], jittered["auto-caching"]
    # Native automatic caching collapses: the system prompt changes every turn, every write is wasted.
    assert auto["cache_read"] == 0
    assert auto["cost_vs_uncached"] == pytest.approx(1.25)
    # telos_wrap moves the envelope out of the cached prefix: the session reads almost everything.
    assert telos["cache_read"] > 0.9 * telos["input_tokens"]
    assert telos["hit_ratio"] > 0.9
    assert telos["cost_vs_uncached"] < 0.2
    assert telos["saving_vs_as_sent"] > 0.8
    assert telos["errors"] == 0 and telos["telos_fallbacks"] == 0
    # From the second turn on, every turn reads the previous one's prefix.
    assert all(turn["cache_read"] > 0 for turn in telos["turns"][1:])


def test_telos_is_at_least_native_caching_on_the_recorded_session(demo_json: dict[str, Any]) -> None:
    recorded = demo_json["variants"]["recorded"]
    assert recorded["telos_wrap"]["cache_read"] >= recorded["auto-caching"]["cache_read"]
    assert recorded["telos_wrap"]["cost_vs_uncached"] <= recorded["auto-caching"]["cost_vs_uncached"]


def test_text_output_has_per_turn_table_and_totals() -> None:
    text = run_main("demo", "--no-jitter", "--per-turn")
    assert "As recorded:" in text and "Replayed by a careless harness" not in text
    assert "Totals over 43 requests" in text
    lines = [line for line in text.splitlines() if line.split()[1:2] == ["42"]]
    assert lines, "the per-turn table lists the last turn, after its session"
    assert "recorded   telos_wrap" in text and "saving vs as sent" in text


def test_run_demo_api() -> None:
    comparison = run_demo(jittered=False, show_progress=False)
    runs = comparison.variants["recorded"]
    assert set(runs) == {AS_SENT.name, "auto-caching", TELOS.name}
    assert runs[TELOS.name].hit_ratio > 0.9
    # Per-turn rows are opt-in (--per-turn): by default the totals come without 43 rows before them.
    out = io.StringIO()
    print_comparison(comparison, out, per_turn=False)
    assert "Totals over 43 requests" in out.getvalue()
    assert not [line for line in out.getvalue().splitlines() if line.strip().startswith("42 ")]


def test_plot(tmp_path: Any) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "demo.png"
    text = run_main("demo", "--no-jitter", "--plot", str(target))
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {target}" in text


def test_progress_is_one_updating_line() -> None:
    stream = io.StringIO()
    progress = Progress(3, stream=stream, enabled=True)
    for _ in range(3):
        progress.step("telos_wrap")
    progress.close()
    written = stream.getvalue()
    assert "\n" not in written and written.count("\r") >= 2
    assert "3/3 requests" in written


def test_the_readme_shows_what_the_demo_prints(demo_json: dict[str, Any]) -> None:
    """The totals quoted in README.md are the demo's, so they cannot go stale silently."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    row = re.compile(r"^(recorded|jittered) +(as sent|[\w-]+) +([\d,]+) +([\d,]+) +([\d,]+) ", re.M)
    quoted = {(m[1], m[2]): [m[3], m[4], m[5]] for m in row.finditer(readme)}
    for variant, runs in demo_json["variants"].items():
        for name, run in runs.items():
            numbers = [f"{run[key]:,}" for key in ("input_tokens", "cache_read", "cache_write")]
            assert quoted[(variant, name)] == numbers, (variant, name)
    assert len(quoted) == 6
