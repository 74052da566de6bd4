"""A project's existing cassettes — recorded WITHOUT telos — become cache tests without re-recording.

``cassettes/plugin/*_without_telos.yaml`` are real recordings (``record_cassettes.py``): the real SDKs,
no ``patch()``, against the emulator served over real HTTP; the agent writes an untagged live clock
into its system prompt every turn.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from telos_wrap.testing.budget import CacheBudgetError
from telos_wrap.testing.cassettes import load_cassette, replay_cassette
from tests.plugin.project import COMMITTED, copy_committed, make_project

pytest_plugins = ["pytester"]

ANTHROPIC = COMMITTED / "support_agent_anthropic_without_telos.yaml"
OPENAI = COMMITTED / "support_agent_openai_without_telos.yaml"
BREAK = re.compile(
    r"cache break at request (\d+): system\[0\] line 2 changed: 'Now: [\d\- :.]+' → 'Now: [\d\- :.]+' "
    r"\(system_changed at system\[\d\], ~\d+ tokens at risk\)"
)


@pytest.mark.parametrize("path", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
def test_a_cassette_recorded_without_telos_replays_through_telos(path: Path) -> None:
    requests = load_cassette(path)
    assert [r.api for r in requests] == ["anthropic" if path is ANTHROPIC else "openai"] * 8
    assert "Now: " in str(requests[0].kwargs)  # what the application sent, untouched
    report = replay_cassette(path, min_hit_ratio=0.5, max_breaks=2)
    assert report.requests == 8 and report.conversations == 1 and not report.errors
    # A time of day in the system prompt is learned on sight (docs/sessions.md): no break at all.
    assert 0.5 <= report.hit_ratio < 0.95 and report.break_count == 0
    assert report.cost_ratio < 0.6


@pytest.mark.parametrize("path", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
def test_the_same_cassette_without_learning_fails_the_budget_explained(path: Path) -> None:
    with pytest.raises(CacheBudgetError) as caught:
        replay_cassette(path, max_breaks=0, learn_volatility=False)
    message = str(caught.value)
    assert message.startswith("telos cache budget not met: 7 cache break(s), more than max_breaks=0")
    assert [int(n) for n in BREAK.findall(message)] == list(range(1, 8))
    assert "CACHE BREAK system_changed" in message  # the session's own explain() of each break


def test_bad_cassettes_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no cassette there"):
        load_cassette(tmp_path / "missing.yaml")
    (tmp_path / "garbage.yaml").write_text("interactions: [1, 2]\n")
    with pytest.raises(ValueError, match="not a vcrpy cassette"):
        load_cassette(tmp_path / "garbage.yaml")
    (tmp_path / "empty.yaml").write_text("interactions: []\nversion: 1\n")
    with pytest.raises(ValueError, match=r"no Anthropic .* or OpenAI .* request"):
        replay_cassette(tmp_path / "empty.yaml")
    with pytest.raises(ValueError, match="min_hit_ratio must be between 0 and 1"):
        replay_cassette(ANTHROPIC, min_hit_ratio=80)
    with pytest.raises(ValueError, match="engine 'deepseek' cannot serve anthropic-API requests"):
        replay_cassette(ANTHROPIC, engine="deepseek")


PROJECT = """\
import anthropic
import openai
import pytest

import agent
from telos_wrap.testing import replay_cassette

CASSETTE = "cassettes/test_agent/test_agent_under_an_old_cassette.yaml"


@pytest.mark.vcr
@pytest.mark.telos_cache(min_hit_ratio=0.5, max_breaks=2)
def test_agent_under_an_old_cassette(base_url, telos_cache):
    client = anthropic.Anthropic(api_key="test-key", base_url=base_url, max_retries=0)
    assert len(agent.run_anthropic(client)) == 8
    # The answers came from the old cassette (no cache was asked for when it was recorded) ...
    assert telos_cache.stats.requests == 8 and telos_cache.stats.cache_read == 0
    # ... the verdict comes from the emulator replaying what the test sent, through telos.
    assert telos_cache.report().hit_ratio >= 0.5


@pytest.mark.vcr
@pytest.mark.telos_cache(min_hit_ratio=0.5, max_breaks=2)
def test_openai_agent_under_an_old_cassette(base_url, telos_cache):
    client = openai.OpenAI(api_key="test-key", base_url=base_url + "/v1", max_retries=0)
    assert len(agent.run_openai(client)) == 8
    assert telos_cache.report().runs[0].engine == "openai"


def test_old_cassette_as_a_cache_test():
    replay_cassette(CASSETTE, min_hit_ratio=0.5, max_breaks=2)


def test_old_cassette_strict_budget():
    replay_cassette(CASSETTE, max_breaks=0, learn_volatility=False)
"""


def test_a_project_runs_its_old_cassette_under_the_marker(pytester: pytest.Pytester) -> None:
    make_project(pytester, PROJECT)
    copy_committed(pytester, ANTHROPIC.name, "test_agent_under_an_old_cassette")
    copy_committed(pytester, OPENAI.name, "test_openai_agent_under_an_old_cassette")
    result = pytester.runpytest_inprocess("--record-mode=none")
    result.assert_outcomes(passed=3, failed=1)
    out = result.stdout.str()
    assert "FAILED test_agent.py::test_old_cassette_strict_budget" in out
    assert "CacheBudgetError: telos cache budget not met: 7 cache break(s), more than max_breaks=0" in out
    assert BREAK.search(out)


def test_engine_and_cost_budget() -> None:
    deepseek = replay_cassette(OPENAI, engine="deepseek")
    assert [run.engine for run in deepseek.runs] == ["deepseek"] and deepseek.hit_ratio > 0.5
    too_costly = r"input cost 1\d\d\.\d% of uncached is above max_cost_ratio=90\.0%"
    with pytest.raises(CacheBudgetError, match=too_costly):
        replay_cassette(ANTHROPIC, learn_volatility=False, max_cost_ratio=0.9)
    assert replay_cassette(ANTHROPIC, max_cost_ratio=0.6).cost_ratio <= 0.6
