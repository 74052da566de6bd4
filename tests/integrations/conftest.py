"""Integration suite: the ``before_after`` fixture every framework test runs its agent with, and
each scenario's before/after line printed at the end (docs/integrations.md quotes them)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from telos_wrap.emulator import Replier, ToolCall, tool_loop

from .agent_kit import FINAL_TEXT, SCRIPT, Run, check, run_both, summary

#: ``before_after``'s default ``requests``: the script's tool calls, then the answer.
_SCRIPTED: Any = object()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = [
        value
        for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", [])
        for name, value in getattr(report, "user_properties", [])
        if name == "summary"
    ]
    if lines:
        terminalreporter.section("telos_wrap integrations: cache efficiency before -> after patch()")
        for line in sorted(lines):
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _unpatched_after() -> Any:
    yield
    import telos_wrap

    telos_wrap.unpatch()
    gc.collect()  # the frameworks' unclosed sockets are reported here, under this test's filters


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The frameworks keep their own HTTP clients open across runs (pydantic-ai caches one per
    provider, LiteLLM one per process); the sockets they leave are theirs, patched or not."""
    for item in items:
        if "integrations" in item.nodeid:
            item.add_marker(pytest.mark.filterwarnings("ignore::ResourceWarning"))
            item.add_marker(pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"))
            # LiteLLM >= 1.110 declares TypedDicts with ``ReadOnly`` items (OAuth payloads); pydantic
            # 2.14 warns when it builds their schema in LiteLLM's own call path, patched or not.
            item.add_marker(
                pytest.mark.filterwarnings("ignore:.* the `ReadOnly` qualifier:UserWarning:pydantic")
            )


@pytest.fixture
def before_after(record_property: Any) -> Callable[..., tuple[Run, Run]]:
    """Run ``agent(base_url)`` without and with ``patch()`` (:func:`agent_kit.run_both`, whose options
    it takes), record the ``name: efficiency before -> after`` line, then apply :func:`agent_kit.check`.
    The line is recorded before the checks, so a failing scenario still prints its figures.

    The emulator's model calls the tools of ``script`` (:data:`agent_kit.SCRIPT`; the newer frameworks
    :data:`agent_kit.FEW_CALLS`), then answers :data:`agent_kit.FINAL_TEXT`, unless a ``replier`` of
    the test's own answers instead. ``requests``: the model requests of each run (by default the
    script's calls and the answer; ``None``: as many as the run without ``patch()`` sent)."""

    def run(
        name: str,
        agent: Callable[[str], Any],
        *,
        openai_engine: bool = False,
        engines: Callable[[str], dict[str, str]] | None = None,
        script: Sequence[ToolCall] = SCRIPT,
        replier: Replier | None = None,
        requests: int | None = _SCRIPTED,
    ) -> tuple[Run, Run]:
        if requests is _SCRIPTED:
            requests = len(script) + 1
        if replier is None:
            replier = tool_loop(list(script), FINAL_TEXT)
        plain, patched = run_both(agent, openai_engine=openai_engine, replier=replier, engines=engines)
        record_property("summary", summary(name, plain, patched))
        check(
            plain,
            patched,
            requests=len(plain.emulator.requests) if requests is None else requests,
        )
        return plain, patched

    return run
