"""Fixtures of the reliability suite: a clean telos state per test, a fresh store, and a debug log on disk.

Every test starts unpatched, with no fault hook, no observers, no failure counts and an empty
process-wide session store, and ends the same way whatever it did. Everything telos logs during a
test (DEBUG and up) is also appended to one file per run (``artifacts_dir``), which the secrets
test scans along with every other file the suite wrote.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import telos_wrap
from telos_wrap import pipeline
from telos_wrap.failopen import reset_failures
from telos_wrap.patch.observers import OBSERVERS
from telos_wrap.sessions import MemoryStore, set_default_store
from telos_wrap.sessions import live as session_live
from telos_wrap.sessions import registry as session_registry

# The throwaway redis-server of the session tests (skips when redis-server is not installed).
from tests.sessions.conftest import redis_cluster_url, redis_url, store_url  # noqa: F401

from .harness import Wire

DEBUG_LOG = "telos_wrap-debug.log"


_ARTIFACTS: list[Path] = []


@pytest.fixture(scope="session")
def artifacts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where reliability tests put every file they write (scanned by ``test_secrets_privacy``)."""
    path = tmp_path_factory.mktemp("reliability-artifacts")
    _ARTIFACTS.append(path)
    return path


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Scan what the suite wrote, also after ``test_secrets_privacy`` ran (the DEBUG log grows to the end)."""
    from .harness import SECRETS

    leaks = [
        f"{path}: {secret[:10]}…"
        for directory in _ARTIFACTS
        for path in directory.rglob("*")
        if path.is_file()
        for secret in SECRETS
        if secret.encode() in path.read_bytes()
    ]
    if leaks:
        print("\nSECRETS FOUND IN FILES THE RELIABILITY SUITE WROTE:\n" + "\n".join(leaks))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def clean_telos(artifacts_dir: Path) -> Iterator[MemoryStore]:
    """Unpatched, hook-free, observer-free, with a fresh default store; telos' log kept at DEBUG.

    The process-wide registries of implicit and hint-named sessions are emptied too: a ``Session``
    object remembers which request indices had their usage recorded, so one reused across tests
    (each with its own store) would carry that memory into the next test.
    """
    telos_wrap.unpatch()
    session_registry._implicit.clear()
    session_registry._named.clear()
    pipeline._stage_hook = None
    OBSERVERS.clear()
    reset_failures()
    store = MemoryStore()
    previous = set_default_store(store)
    logger = logging.getLogger("telos_wrap")
    handler = logging.FileHandler(artifacts_dir / DEBUG_LOG, encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield store
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.setLevel(level)
        telos_wrap.unpatch()
        pipeline._stage_hook = None
        OBSERVERS.clear()
        set_default_store(previous)
        reset_failures()
        # Sessions of this test still holding usage for a store it broke on purpose (a closed port):
        # nothing can write it, and the interpreter's at-exit flush would only warn about it.
        session_live.drop_held()


@pytest.fixture
def wire() -> Wire:
    return Wire()
