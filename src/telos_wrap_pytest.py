"""telos_wrap's pytest plugin, as registered (entry point ``pytest11``: ``telos_wrap``).

This module is what pytest loads in *every* session of an environment where telos-wrap is
installed, so it is deliberately inert: it imports nothing of telos_wrap (importing the package
costs ~0.2 s), patches nothing and touches no warning filter. It only registers the
``telos_cache`` marker (so ``--strict-markers`` accepts it), defines the ``telos_cache`` fixture,
checks the marker's budget after a marked test, and gives pytest-recording's VCR a ``telos_body``
matcher *name* (used only when a ``vcr_config`` lists it). The work lives in the testing package,
``telos_wrap.testing`` (``pytest_plugin``, ``vcr_matcher``), imported the first time a test uses the
fixture or the marker, or the matcher compares a request. Disable it with ``-p no:telos_wrap``.

It stays a top-level module, outside ``telos_wrap.testing``, for that inertness: Python runs a
package's ``__init__`` before any of its modules, and ``import telos_wrap`` costs ~0.4 s (the
public API; measured with ``python -X importtime -c "import telos_wrap"``), which every pytest run in
an environment with telos-wrap installed would pay. See ``docs/testing.md``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

MARKER = "telos_cache"
FIXTURE = "telos_cache"

_MARKER_HELP = (
    "telos_cache(min_hit_ratio=None, max_breaks=None, max_cost_ratio=None, engine=None, "
    "learn_volatility=True): run the test with telos_wrap.patch() and a session, replay the requests it "
    "sent through telos and the built-in emulator, and fail it when the cache budget is not met "
    "(docs/testing.md)"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER_HELP)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A marked test gets the fixture as if it had asked for it (like ``usefixtures``).
    for item in items:
        if item.get_closest_marker(MARKER) is None:
            continue
        names = getattr(item, "fixturenames", None)
        if isinstance(names, list) and FIXTURE not in names:
            names.append(FIXTURE)


@pytest.fixture(name=FIXTURE)
def _telos_cache(request: pytest.FixtureRequest) -> Iterator[Any]:
    """``telos_wrap.patch()`` and one session for this test (``testing.pytest_plugin.TelosCache``)."""
    from telos_wrap.testing.pytest_plugin import TelosCache

    with TelosCache.for_node(request.node) as cache:
        yield cache


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    result = yield
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        funcargs = getattr(item, "funcargs", {})
        from telos_wrap.testing.pytest_plugin import check_marker

        check_marker(funcargs.get(FIXTURE), marker)
    return result


def _telos_body(r1: Any, r2: Any) -> Any:
    from telos_wrap.testing.vcr_matcher import telos_body

    return telos_body(r1, r2)


@pytest.hookimpl(optionalhook=True)
def pytest_recording_configure(config: pytest.Config, vcr: Any) -> None:
    """pytest-recording's hook: make ``"telos_body"`` a matcher name its VCR knows."""
    vcr.register_matcher("telos_body", _telos_body)
