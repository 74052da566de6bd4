"""Fixtures of the security suite: a fresh process default store per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from telos_wrap.sessions import MemoryStore, set_default_store


@pytest.fixture(autouse=True)
def fresh_store() -> Iterator[MemoryStore]:
    store = MemoryStore()
    previous = set_default_store(store)
    try:
        yield store
    finally:
        set_default_store(previous)


# The suite's real Redis (a throwaway redis-server on a free port, or TELOS_REDIS_URL).
from tests.sessions.conftest import redis_prefix, redis_url  # noqa: E402, F401
