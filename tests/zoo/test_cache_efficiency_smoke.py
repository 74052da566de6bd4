"""Smoke run of ``benchmarks/cache_efficiency.py``: every style, both vendors' rules, both emulator modes.

One tau-bench session (OpenAI rules) and its Anthropic conversion, three requests each, through
the real SDKs and the emulator (the full run is documented in BENCHMARKS.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from telos_wrap.emulator import RENDER_MODES
from telos_wrap.testing.harnesses import style_names

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
sys.path.insert(0, str(BENCHMARKS))

import cache_efficiency  # noqa: E402


@pytest.mark.skipif(not (TRACES / "tau-bench.jsonl.xz").exists(), reason="needs ../shared/traces")
def test_smoke_every_style_vendor_and_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    md = tmp_path / "BENCHMARKS.md"
    md.write_text("# Benchmarks\n\n## Cache efficiency\n\nold\n\n## Overhead\n\nkept\n", encoding="utf-8")
    code = cache_efficiency.main(
        [
            "--traces", str(TRACES),
            "--sources", "tau-bench,tau-bench.as-anthropic",
            "--sessions-per-source", "1",
            "--max-turns", "3",
            "--json", str(out),
            "--write-md", str(md),
        ]
    )  # fmt: skip
    assert code == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    cells = {
        (s["vendor"], c["style"], c["mode"], c["strategy"]): c for s in data["sections"] for c in s["cells"]
    }
    styles = ["clean", *style_names()]
    for vendor in ("anthropic", "openai"):
        for style in styles:
            for mode in RENDER_MODES:
                assert cells[(vendor, style, mode, "telos_wrap")]["requests"] == 3
    # The harness noise never changes the bound by more than what it adds: every style keeps the
    # recorded content cacheable.
    clean = cells[("openai", "clean", "rendered", "as sent")]["bound"]
    assert clean > 0
    for style in styles:
        assert cells[("openai", style, "rendered", "as sent")]["bound"] >= clean * 0.95, style
    # A key-order reshuffle is invisible to the rendered mode for blocks' own fields but not to
    # byte-exact: as-sent reads can only drop there.
    for vendor in ("anthropic", "openai"):
        rendered = cells[(vendor, "shuffle", "rendered", "as sent")]["cache_read"]
        exact = cells[(vendor, "shuffle", "byte-exact", "as sent")]["cache_read"]
        assert exact <= rendered
    text = md.read_text(encoding="utf-8")
    assert "--max-turns 3" in text and "## Overhead\n\nkept" in text and "old" not in text
    assert "per style, all sources" in text
    assert "Acceptance (issue 15)" in capsys.readouterr().out
