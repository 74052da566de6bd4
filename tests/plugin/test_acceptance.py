"""Acceptance (issue 13): a live clock in the system prompt fails the marker, explained; learned
volatility or a tagged clock passes. Each project records a real cassette (real HTTP to the emulator
served on 127.0.0.1), then runs again from that cassette with nothing listening."""

from __future__ import annotations

import re

import pytest

from tests.plugin.project import make_project

pytest_plugins = ["pytester"]

TEST = """\
import anthropic
import pytest

import agent


@pytest.mark.vcr
@pytest.mark.telos_cache(min_hit_ratio=0.5, max_breaks=2{options})
def test_support_conversation(base_url):
    client = anthropic.Anthropic(api_key="test-key", base_url=base_url, max_retries=0)
    assert len(agent.run_anthropic(client, clock="{clock}")) == len(agent.QUESTIONS)
"""


def _run_twice(pytester: pytest.Pytester, clock: str, options: str = "") -> list[pytest.RunResult]:
    make_project(pytester, TEST.format(clock=clock, options=options))
    recorded = pytester.runpytest_inprocess("--record-mode=once")
    cassette = pytester.path / "cassettes" / "test_agent" / "test_support_conversation.yaml"
    text = cassette.read_text()
    assert text.count("- request:") == 8, recorded.stdout.str()
    # Recorded with telos: telos' private header never reaches the wire, the key is filtered out.
    assert "x-telos-hint" not in text and "test-key" not in text and "cache_control" in text
    replayed = pytester.runpytest_inprocess("--record-mode=none")
    return [recorded, replayed]


def test_untagged_clock_without_learning_fails_with_the_break_explained(pytester: pytest.Pytester) -> None:
    for result in _run_twice(pytester, "untagged", ", learn_volatility=False"):
        result.assert_outcomes(failed=1)
        out = result.stdout.str()
        assert "telos cache budget not met" in out
        assert re.search(r"hit ratio \d+\.\d% is below min_hit_ratio=50\.0%", out), out
        assert re.search(r"[3-9] cache break\(s\), more than max_breaks=2", out), out
        # The break in the application's own terms, then the session's own record of it.
        assert re.search(
            r"cache break at request \d+: system\[0\] line 2 changed: 'Now: [\d\- :.]+' → 'Now: [\d\- :.]+' "
            r"\(system_changed at system\[\d\]",
            out,
        ), out
        assert "CACHE BREAK system_changed" in out


def test_untagged_clock_with_learned_volatility_passes(pytester: pytest.Pytester) -> None:
    for result in _run_twice(pytester, "untagged"):
        result.assert_outcomes(passed=1)


def test_tagged_clock_passes_even_without_learning(pytester: pytest.Pytester) -> None:
    for result in _run_twice(pytester, "tagged", ", learn_volatility=False"):
        result.assert_outcomes(passed=1)
