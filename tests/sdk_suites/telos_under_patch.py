"""A pytest plugin that runs an SDK's own test suite under ``telos_wrap.patch()`` (``nox -s sdk_suites``).

Loaded with ``-p telos_under_patch`` (this directory on ``PYTHONPATH``) from the root of the SDK's
unpacked sdist, so nothing of the SDK's suite is edited: ``patch()`` is applied when the plugin is
loaded, before the suite's conftest imports the SDK, and stays on for the whole run.
``TELOS_SUITE_PATCH=0`` loads the plugin without patching (the baseline run the exceptions are
judged against).

The tests in ``known_exceptions.toml`` are skipped with their reason, so a run's summary lists each
one and why: tests that fail without telos too in this environment, and tests that cannot pass under
``patch()`` for a documented reason. Anything else that fails is a regression. The run's summary
also prints telos' own fallbacks (``telos_wrap.failure_counts()``): a request telos gave up on goes
out as the SDK's own, so its test passes, but the count says telos did not do its work there.
"""

from __future__ import annotations

import os
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import tomllib  # type: ignore[import-not-found]  # runs on the suites' Python (3.11+), not 3.10

import telos_wrap

EXCEPTIONS = Path(__file__).with_name("known_exceptions.toml")


def _matches(entry: dict[str, Any], sdk: str, nodeid: str) -> bool:
    """Whether the exception ``entry`` names the test ``nodeid`` of the installed ``sdk``."""
    if entry["sdk"] != sdk:
        return False
    lines = entry.get("versions")
    if lines and not any(version(sdk).startswith(line) for line in lines):
        return False
    tests = entry["tests"] if "tests" in entry else [entry["test"]]
    return any(nodeid == test or nodeid.startswith((test + "[", test + "::")) for test in tests)


def _sdk() -> str:
    """The SDK whose suite is run: the ``name`` in the current directory's pyproject.toml."""
    with open("pyproject.toml", "rb") as file:
        name = tomllib.load(file)["project"]["name"]
    return str(name)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("TELOS_SUITE_PATCH", "1") != "0":
        telos_wrap.patch()
    config.addinivalue_line("markers", "telos_known_exception: skipped by telos_under_patch")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    with EXCEPTIONS.open("rb") as file:
        entries = tomllib.load(file)["exception"]
    sdk = _sdk()
    for item in items:
        for entry in entries:
            if _matches(entry, sdk, item.nodeid):
                reason = f"telos known exception ({entry['kind']}): {entry['reason']}"
                item.add_marker(pytest.mark.skip(reason=reason))
                break


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if os.environ.get("TELOS_SUITE_PATCH", "1") != "0":
        counts = dict(telos_wrap.failure_counts())
        terminalreporter.write_line(f"telos_wrap fallbacks during the run (failure_counts): {counts}")
