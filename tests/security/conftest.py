"""Fixtures of the security suite: a fresh process default store per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.over_http import Wire, emulator_over_http

# The suite's real Redis (a throwaway redis-server on a free port, or TELOS_REDIS_URL).
from tests.sessions.conftest import redis_prefix, redis_url  # noqa: F401
from tests.stores import fresh_store  # noqa: F401  (autouse: a fresh default store per test)


@pytest.fixture
def wire(patched: None) -> Iterator[Wire]:
    """The emulator over real HTTP (tests/over_http.py) under ``telos_wrap.patch(strict=True)``."""
    with emulator_over_http() as wire:
        yield wire


@pytest.fixture
def bare_wire() -> Iterator[Wire]:
    """The emulator over real HTTP with nothing patched: the test patches when it means to."""
    with emulator_over_http() as wire:
        yield wire


@pytest.fixture
def lenient_wire(patched_lenient: None) -> Iterator[Wire]:
    """The emulator over real HTTP under ``telos_wrap.patch()`` without ``strict``: a telos failure
    sends the request as built (fail open)."""
    with emulator_over_http() as wire:
        yield wire
