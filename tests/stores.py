"""The process-wide default session store, swapped for one test and put back: one helper for every suite.

``default_store(store)`` is the context manager; ``fresh_store`` is the autouse fixture built on it,
active in a directory whose ``conftest.py`` imports it (``tests/sessions``, ``tests/security``).
``fleet_blobs(store)`` reads what fleet learning wrote into a ``MemoryStore``. ``key_of`` and
``reader_of`` read a named session where its calls' tenant keeps it (docs/sessions.md, "Tenants").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

import pytest

from telos_wrap.sessions import MemoryStore, Session, SessionStore, set_default_store
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.learning.fleet import FLEET_PREFIX
from telos_wrap.sessions.tenancy import SHARED

__all__ = ["default_store", "fleet_blobs", "fresh_store", "key_of", "reader_of"]

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


def fleet_blobs(store: MemoryStore) -> dict[str, str]:
    """The fleet's entries in ``store`` (fleet learning's, not the sessions'): key → blob text."""
    return {
        key: blob
        for key, entry in store._entries.items()
        if key.startswith(FLEET_PREFIX)
        for blob in entry.blobs.values()
    }


def key_of(session_id: str, api_key: str = "test") -> str:
    """The key a named session's state is kept under when its calls come from an Anthropic client
    with ``api_key`` and the default base URL (the tenant's key: docs/sessions.md, "Tenants")."""
    import anthropic

    client = anthropic.Anthropic(api_key=api_key)
    try:
        return Session(session_id).bind(client).store_key
    finally:
        client.close()


def reader_of(session: Session) -> Session:
    """Another process's view of ``session``: a fresh object of its id on its store, bound to the
    tenant ``session`` is bound to (it reads the same stored entry: ``Session.store_key``)."""
    other = Session(session.id, store=session.store, scope=session.scope)
    if session.bound:
        runtime_of(other).bind_tenant(runtime_of(session)._space or SHARED)
    assert other.store_key == session.store_key
    return other
