"""Integration suite: prints each scenario's before/after line (docs/integrations.md quotes them)."""

from __future__ import annotations

import gc
from typing import Any

import pytest


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
