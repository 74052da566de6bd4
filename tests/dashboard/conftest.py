"""The dashboard's tests: a short replay of the demo session, shared by the module's tests."""

from __future__ import annotations

import pytest

from telos_wrap.dashboard.from_replay import from_replay
from telos_wrap.dashboard.model import Dashboard
from telos_wrap.replay.comparison import Comparison, compare
from telos_wrap.replay.runner import AS_SENT, AUTO_CACHING, TELOS, demo_path, load_sessions
from tests.sessions.conftest import redis_prefix, redis_url  # noqa: F401 - fixtures for test_store

#: Requests of the demo session replayed: enough for a write, reads and its one cache break (request 10).
DEMO_REQUESTS = 14


@pytest.fixture(scope="package")
def demo_board() -> Dashboard:
    """The dashboard of the demo session's first requests, with the break sentences kept."""
    sessions = load_sessions(demo_path(), limit=DEMO_REQUESTS)
    return from_replay("demo", sessions, engine="anthropic", show_text=True)


@pytest.fixture(scope="package")
def demo_replay() -> Comparison:
    """``telos-wrap replay``'s own comparison of the same requests."""
    sessions = load_sessions(demo_path(), limit=DEMO_REQUESTS)
    return compare(
        "demo",
        sessions,
        engine="anthropic",
        variants=["recorded"],
        strategies=[AS_SENT, AUTO_CACHING, TELOS],
        show_progress=False,
    )
