"""The ``telos_cache`` fixture: patch state restored, the live session exposed, marker options checked."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

import telos_wrap
from telos_wrap.config import current_config
from telos_wrap.emulator import Emulator, serve
from telos_wrap.testing.pytest_plugin import TelosCache
from tests.plugin.project import HERE, make_project

pytest_plugins = ["pytester"]

sys.path.insert(0, str(HERE / "project"))
import agent  # noqa: E402


@pytest.fixture
def unpatched() -> Iterator[None]:
    telos_wrap.unpatch()
    yield
    telos_wrap.unpatch()


def test_patch_state_is_restored_when_it_was_off(unpatched: None) -> None:
    before = current_config()
    with TelosCache("t-off") as cache:
        assert telos_wrap.is_patched() and current_config().enabled
        assert telos_wrap.current_session() is cache.session
    assert not telos_wrap.is_patched()
    assert current_config() is before
    assert telos_wrap.current_session() is None


def test_patch_state_is_restored_when_it_was_on_but_disabled(unpatched: None) -> None:
    telos_wrap.patch(strict=True, enabled=False, engines={"http://gpu:8000/v1": "vllm"})
    before = current_config()
    with TelosCache("t-on"):
        assert current_config().enabled and current_config().strict
    assert telos_wrap.is_patched() and current_config() is before


def test_the_fixture_exposes_the_live_session_and_the_requests(unpatched: None) -> None:
    with serve(Emulator()) as url, TelosCache("t-live") as cache:
        client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
        agent.run_anthropic(client, clock="tagged", questions=agent.QUESTIONS[:3])
        # Live: what the emulator answered over real HTTP, in the test's own session.
        assert cache.stats.requests == 3 and (cache.stats.hit_ratio or 0) > 0.5
        assert cache.cache_breaks == ()
        assert cache.explain().startswith("session t-live request 2 (anthropic, engine anthropic)")
        # The requests as the application built them (no telos marker in them).
        assert len(cache.requests) == 3 and "cache_control" not in str(cache.requests[0].kwargs)
        report = cache.report()
        assert report.requests == 3 and report.break_count == 0
        assert cache.report() is report and len(cache.requests) == 3  # the replay was not captured
        assert cache.check(min_hit_ratio=0.5, max_breaks=0) is report
        with pytest.raises(AssertionError, match=r"hit ratio \d+\.\d% is below min_hit_ratio=99\.0%"):
            cache.check(min_hit_ratio=0.99)


MISUSE = """\
import anthropic
import pytest

import agent


@pytest.mark.telos_cache(0.8)
def test_positional():
    pass


@pytest.mark.telos_cache(min_hit=0.8)
def test_unknown_option():
    pass


@pytest.mark.telos_cache(min_hit_ratio=0.5)
def test_nothing_sent():
    pass


@pytest.mark.telos_cache(max_breaks=0)
def test_own_failure_is_reported_as_is(base_url):
    assert 1 == 2, "the test's own assertion"


@pytest.mark.telos_cache
def test_no_budget_only_the_fixture(telos_cache):
    assert telos_cache.report().requests == 0
"""


def test_marker_misuse_is_reported_clearly(pytester: pytest.Pytester) -> None:
    make_project(pytester, MISUSE)
    result = pytester.runpytest_inprocess("--record-mode=once")
    result.assert_outcomes(passed=1, failed=2, errors=2)
    out = result.stdout.str()
    assert "@pytest.mark.telos_cache takes keyword arguments only" in out
    assert "@pytest.mark.telos_cache: unknown option(s) ['min_hit']" in out
    assert "no request reached telos: the budget has nothing to measure" in out
    assert "the test's own assertion" in out
    assert "FAILED test_agent.py::test_own_failure_is_reported_as_is - AssertionError" in out
    assert out.count("telos cache budget not met") == 2  # test_nothing_sent: its report + summary line


def test_project_files_exist() -> None:
    assert Path(agent.__file__).parent == HERE / "project"


ASYNC = """\
import datetime

import anthropic
import pytest

import agent


@pytest.mark.anyio
@pytest.mark.vcr
@pytest.mark.telos_cache(min_hit_ratio=0.5, max_breaks=0)
async def test_async_agent(base_url, telos_cache):
    history = []
    async with anthropic.AsyncAnthropic(api_key="test-key", base_url=base_url, max_retries=0) as client:
        for question in agent.QUESTIONS[:4]:
            history.append({"role": "user", "content": question})
            reply = await client.messages.create(
                model=agent.ANTHROPIC_MODEL, max_tokens=32, messages=history,
                system=agent.system_prompt("tagged", datetime.datetime.now()),
            )
            history.append({"role": "assistant", "content": reply.content[0].text})
    assert telos_cache.stats.requests == 4  # the async calls landed in the test's session
"""


def test_async_tests_use_the_same_session(pytester: pytest.Pytester) -> None:
    """An ``anyio`` test runs once per backend anyio finds installed (asyncio, and trio where it is:
    the test extra installs it): each is recorded and replayed in the test's session."""
    # anyio defines it in anyio._core and uses it in its pytest plugin without re-exporting it there.
    from anyio.pytest_plugin import get_available_backends  # type: ignore[attr-defined]

    backends = len(get_available_backends())
    make_project(pytester, ASYNC)
    pytester.runpytest_inprocess("--record-mode=once").assert_outcomes(passed=backends)
    pytester.runpytest_inprocess("--record-mode=none").assert_outcomes(passed=backends)
