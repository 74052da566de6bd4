"""The process-wide default session store, swapped for one test and put back: one helper for every suite.

``default_store(store)`` is the context manager; ``fresh_store`` is the autouse fixture built on it,
active in a directory whose ``conftest.py`` imports it (``tests/sessions``, ``tests/security``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

import pytest

from telos_wrap.sessions import MemoryStore, SessionStore, set_default_store

__all__ = ["default_store", "fresh_store"]

S = TypeVar("S", bound=SessionStore)


@contextmanager
def default_store(store: S) -> Iterator[S]:
    """``store`` as the process-wide default session store inside the block; the previous one after."""
    previous = set_default_store(store)
    try:
        yield store
    finally:
        set_default_store(previous)


@pytest.fixture(autouse=True)
def fresh_store() -> Iterator[MemoryStore]:
    """Every test starts with an empty process-wide session store."""
    with default_store(MemoryStore()) as store:
        yield store
