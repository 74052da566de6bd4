"""The dashboard as a person sees it: a real headless Chromium opens the page the command serves.

``telos-wrap dashboard`` serves the demo session's first requests; Chromium loads the page, runs its
scripts (the plots are drawn by the inlined plotly.js) and hands back the DOM, whose figures must be
``telos-wrap replay --json``'s for the same requests. A screenshot of the page is kept in
``TELOS_ARTIFACTS`` (``.ci/run`` sets it) or the test's temporary directory. Chromium comes from the
distribution's packages (``.ci/run`` installs it); without it the test is skipped, except under CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from telos_wrap.replay.runner import demo_path

from .conftest import DEMO_REQUESTS

pytestmark = pytest.mark.slow

# The flags a root, network-less machine needs (no sandbox, no background connections).
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("Chromium is not installed: .ci/run installs Debian's chromium package")
    pytest.skip("Chromium is not installed (apt-get install chromium)")


def _browse(url: str, *args: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, url],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    return done.stdout


@pytest.fixture
def served_dashboard() -> Iterator[str]:
    """``telos-wrap dashboard DEMO --limit N`` in a subprocess; yields the URL it prints."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "telos_wrap.cli",
            "dashboard",
            str(demo_path()),
            "--limit",
            str(DEMO_REQUESTS),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert found, line
        yield found.group(0)
    finally:
        process.terminate()
        process.communicate(timeout=10)


def _replay_totals() -> dict[str, dict[str, float]]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "telos_wrap.cli",
            "replay",
            str(demo_path()),
            "--limit",
            str(DEMO_REQUESTS),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return dict(json.loads(done.stdout)["variants"]["recorded"])


def _shown(dom: str, metric: str) -> str:
    """The first figure the page shows for ``metric`` (the application's card)."""
    found = re.search(rf'data-metric="{metric}">([^<]+)<', dom)
    assert found, f"no {metric} on the page"
    return found.group(1).strip()


def test_the_page_shows_replays_figures(served_dashboard: str, tmp_path: Path) -> None:
    dom = _browse(served_dashboard, "--virtual-time-budget=5000", "--dump-dom")
    # The scripts ran: plotly replaced each figure's placeholder with its drawing.
    assert dom.count('class="main-svg"') >= 2, "the plots were not drawn"
    replay = _replay_totals()
    telos, native = replay["telos_wrap"], replay["auto-caching"]
    assert _shown(dom, "requests") == f"{telos['requests']:,}"
    assert _shown(dom, "input_tokens") == f"{telos['input_tokens']:,}"
    assert _shown(dom, "cache_read") == f"{telos['cache_read']:,}"
    assert _shown(dom, "cache_write") == f"{telos['cache_write']:,}"
    assert _shown(dom, "hit_ratio") == f"{100 * telos['hit_ratio']:.1f}%"
    assert _shown(dom, "cost_vs_uncached") == f"{100 * telos['cost_vs_uncached']:.1f}%"
    assert _shown(dom, "native_cost_vs_uncached") == f"{100 * native['cost_vs_uncached']:.1f}%"
    artifacts = Path(os.environ.get("TELOS_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "dashboard-demo.png"
    _browse(served_dashboard, "--virtual-time-budget=5000", "--window-size=1280,2200", f"--screenshot={shot}")
    assert shot.stat().st_size > 20_000, "an empty screenshot"
