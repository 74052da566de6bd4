"""Fixtures of the security suite: a fresh process default store per test."""

from __future__ import annotations

# The suite's real Redis (a throwaway redis-server on a free port, or TELOS_REDIS_URL).
from tests.sessions.conftest import redis_prefix, redis_url  # noqa: F401
from tests.stores import fresh_store  # noqa: F401  (autouse: a fresh default store per test)
