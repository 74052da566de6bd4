"""The migration read of a tenant's entry (``sessions/tenancy.py``, docs/sessions.md "Tenants").

A tenant's key (``<id>@t:<namespace>``) that holds nothing yet is started from the entry the id had
in the layout before tenants (the id's own key): ``load`` / ``aload`` answer the session's ``LOAD``
with that entry at revision 0 (absent: the session's next compare-and-set creates the tenant's
entry), its pinned blobs copied to the tenant's key first. The drivers run each as one store
operation (raced against the breaker like any read; a failure goes back into the plan). An entry
that is not a state of this session is no entry (store contents are not trusted: F1).
"""

from __future__ import annotations

import asyncio
import logging

from telos_wrap.errors import StoreEntryError
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.hashed import session_hash
from telos_wrap.sessions.stores.store import AsyncSessionStore, StoreOps, Versioned

__all__ = ["aload", "load"]

logger = logging.getLogger("telos_wrap.sessions")


def _legacy(text: str, session_id: str) -> SessionState | None:
    """The state of ``session_id`` in an entry of the earlier layout, or ``None`` if it is not one."""
    try:
        state = SessionState.loads(text)
    except Exception:  # store contents are not trusted (docs/security.md, F1): nothing to carry
        return None
    return state if state.session_id == session_id else None


def load(ops: StoreOps, key: str, legacy: str | None) -> Versioned | None:
    """The session's entry at ``key``; if there is none, the entry of the earlier layout (``legacy``:
    the id's own key) as a new one (revision 0: the session's next compare-and-set creates the
    tenant's entry), its pinned blobs copied to ``key`` first. Raises what the store raises for
    ``key`` (the session's plan decides: ``plans.StateSync.plan``); an unreadable earlier entry is
    no entry."""
    found = ops.load(key)
    if found is not None or legacy is None or legacy == key:
        return found
    try:
        old = ops.load(legacy)
    except StoreEntryError:
        return None
    state = None if old is None else _legacy(old.text, legacy)
    if old is None or state is None:
        return None
    for blob in set(state.pins.values()):
        text = ops.get_blob(legacy, blob)
        if text is not None:
            ops.store.put_blob(key, blob, text)
    _moved(legacy, state)
    return Versioned(0, old.text)


async def aload(ops: StoreOps, key: str, legacy: str | None) -> Versioned | None:
    """``load`` with the store's async operations."""
    found = await ops.aload(key)
    if found is not None or legacy is None or legacy == key:
        return found
    try:
        old = await ops.aload(legacy)
    except StoreEntryError:
        return None
    state = None if old is None else _legacy(old.text, legacy)
    if old is None or state is None:
        return None
    store = ops.store
    for blob in set(state.pins.values()):
        text = await ops.aget_blob(legacy, blob)
        if text is not None:
            if isinstance(store, AsyncSessionStore):
                await store.aput_blob(key, blob, text)
            else:
                await asyncio.to_thread(store.put_blob, key, blob, text)
    _moved(legacy, state)
    return Versioned(0, old.text)


def _moved(session_id: str, state: SessionState) -> None:
    logger.debug(
        "telos_wrap: session %s: its tenant's entry starts from the earlier layout's (%d requests)",
        session_hash(session_id),
        state.requests,
    )
