"""Fleet learning's store I/O (the facts themselves: ``fleet.py``): read a template's facts, publish new ones.

Never breaks a call: while the store's circuit breaker is open nothing is tried (and nothing is
counted as a skipped session call); a failure goes to the breaker (which warns once per window,
as for any store failure), is logged at DEBUG and reads as "no facts". Publishing merges by union
(capped at ``fleet.MAX_FACTS``) with a read and a write: two conversations publishing at the same
moment may lose one fact, which the next conversation that learns it publishes again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api
from telos_wrap.sessions.breaker import breaker_of
from telos_wrap.sessions.fleet import (
    FACTS,
    Fact,
    application_key,
    decode,
    encode,
    fleet_id,
    merged,
    namespace,
)
from telos_wrap.sessions.store import AsyncSessionStore, SessionStore

__all__ = [
    "afacts_for",
    "alookup",
    "apublish",
    "apublish_learned",
    "facts_for",
    "lookup",
    "publish",
    "publish_learned",
]

logger = logging.getLogger("telos_wrap.sessions")


# -- the store (fail open) --------------------------------------------------------------------------


def lookup(store: SessionStore, space: str, template: str) -> tuple[Fact, ...]:
    """The facts the fleet holds for ``template`` in ``space`` (``()`` on any failure)."""
    breaker = breaker_of(store)
    if breaker.is_open:  # left alone for the window; not counted as a session call skipped
        return ()
    try:
        text = store.get_blob(fleet_id(space, template), FACTS)
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be read", exc_info=True)
        return ()
    breaker.success()
    return decode(text)


async def alookup(store: SessionStore, space: str, template: str) -> tuple[Fact, ...]:
    """``lookup`` for async code (the store's async client; a sync-only store in a thread)."""
    breaker = breaker_of(store)
    if breaker.is_open:  # left alone for the window; not counted as a session call skipped
        return ()
    try:
        if isinstance(store, AsyncSessionStore):
            text = await store.aget_blob(fleet_id(space, template), FACTS)
        else:
            text = await asyncio.to_thread(store.get_blob, fleet_id(space, template), FACTS)
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be read", exc_info=True)
        return ()
    breaker.success()
    return decode(text)


def publish(store: SessionStore, space: str, template: str, new: Sequence[Fact]) -> None:
    """Add ``new`` to the facts of ``template`` in ``space``. Never raises."""
    breaker = breaker_of(store)
    if not new or breaker.is_open:
        return
    key = fleet_id(space, template)
    try:
        known = decode(store.get_blob(key, FACTS))
        facts = merged(known, new)
        if facts != known:
            store.put_blob(key, FACTS, encode(facts))
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be written", exc_info=True)
        return
    breaker.success()


async def apublish(store: SessionStore, space: str, template: str, new: Sequence[Fact]) -> None:
    """``publish`` for async code."""
    breaker = breaker_of(store)
    if not new or breaker.is_open:
        return
    key = fleet_id(space, template)
    try:
        if isinstance(store, AsyncSessionStore):
            known = decode(await store.aget_blob(key, FACTS))
            facts = merged(known, new)
            if facts != known:
                await store.aput_blob(key, FACTS, encode(facts))
        else:
            await asyncio.to_thread(publish, store, space, template, new)
            return
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be written", exc_info=True)
        return
    breaker.success()


# -- what a session calls (the hook in ``core.py``) ------------------------------------------------


def _where(
    api: Api, body: Mapping[str, Any], hints: TelosHints, tenant: str | None
) -> tuple[str, str] | None:
    template = application_key(api, body, hints.drop_patterns)
    return None if template is None else (namespace(hints.isolation, tenant), template)


def facts_for(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints, tenant: str | None = None
) -> tuple[Fact, ...]:
    """The fleet's facts for the template of ``body``'s system prompt (``()``: none, or a failure);
    ``tenant``: the call's tenant digest (``fleet.namespace``)."""
    where = _where(api, body, hints, tenant)
    return () if where is None else lookup(store, *where)


async def afacts_for(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints, tenant: str | None = None
) -> tuple[Fact, ...]:
    """``facts_for`` for async code."""
    where = _where(api, body, hints, tenant)
    return () if where is None else await alookup(store, *where)


def publish_learned(
    store: SessionStore,
    api: Api,
    body: Mapping[str, Any],
    hints: TelosHints,
    facts: Sequence[Fact],
    tenant: str | None = None,
) -> None:
    """Publish the facts a request learned (``TurnResult.facts``) under its template. Never raises."""
    where = _where(api, body, hints, tenant) if facts else None
    if where is not None:
        publish(store, *where, facts)


async def apublish_learned(
    store: SessionStore,
    api: Api,
    body: Mapping[str, Any],
    hints: TelosHints,
    facts: Sequence[Fact],
    tenant: str | None = None,
) -> None:
    """``publish_learned`` for async code."""
    where = _where(api, body, hints, tenant) if facts else None
    if where is not None:
        await apublish(store, *where, facts)
