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
from telos_wrap.sessions.learning import fleet_shape
from telos_wrap.sessions.learning.fleet import (
    FACTS,
    Fact,
    application_key,
    decode_entry,
    encode,
    fleet_id,
    merged,
    namespace,
    system_pin_texts,
)
from telos_wrap.sessions.stores.breaker import breaker_of
from telos_wrap.sessions.stores.store import AsyncSessionStore, SessionStore

__all__ = [
    "afacts_for",
    "afleet_for",
    "alookup",
    "apublish",
    "apublish_learned",
    "facts_for",
    "fleet_for",
    "lookup",
    "publish",
    "publish_learned",
]

logger = logging.getLogger("telos_wrap.sessions")


# -- the store (fail open) --------------------------------------------------------------------------


def lookup(store: SessionStore, space: str, template: str) -> tuple[Fact, ...]:
    """The facts the fleet holds for application ``template`` in ``space`` (``()`` on any failure)."""
    return lookup_entry(store, space, template)[0]


def lookup_entry(store: SessionStore, space: str, template: str) -> tuple[tuple[Fact, ...], tuple[str, ...]]:
    """``(facts, prints)`` the fleet holds for ``template`` in ``space`` (none on any failure)."""
    breaker = breaker_of(store, fleet_id(space, template))
    if breaker.is_open:  # left alone for the window; not counted as a session call skipped
        return (), ()
    try:
        text = store.get_blob(fleet_id(space, template), FACTS)
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be read", exc_info=True)
        return (), ()
    breaker.success()
    return decode_entry(text)


async def alookup(store: SessionStore, space: str, template: str) -> tuple[Fact, ...]:
    """``lookup`` for async code."""
    return (await alookup_entry(store, space, template))[0]


async def alookup_entry(
    store: SessionStore, space: str, template: str
) -> tuple[tuple[Fact, ...], tuple[str, ...]]:
    """``lookup_entry`` for async code (the store's async client; a sync-only store in a thread)."""
    breaker = breaker_of(store, fleet_id(space, template))
    if breaker.is_open:  # left alone for the window; not counted as a session call skipped
        return (), ()
    try:
        if isinstance(store, AsyncSessionStore):
            text = await store.aget_blob(fleet_id(space, template), FACTS)
        else:
            text = await asyncio.to_thread(store.get_blob, fleet_id(space, template), FACTS)
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be read", exc_info=True)
        return (), ()
    breaker.success()
    return decode_entry(text)


def publish(
    store: SessionStore, space: str, template: str, new: Sequence[Fact], shape: Sequence[str] = ()
) -> None:
    """Add ``new`` to the facts of ``template`` in ``space`` (and its ``shape`` if it has none yet).
    Never raises."""
    breaker = breaker_of(store, fleet_id(space, template))
    if not (new or shape) or breaker.is_open:
        return
    key = fleet_id(space, template)
    try:
        known, prints = decode_entry(store.get_blob(key, FACTS))
        facts = merged(known, new)
        if facts != known or (shape and not prints):
            store.put_blob(key, FACTS, encode(facts, prints or shape))
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be written", exc_info=True)
        return
    breaker.success()


async def apublish(
    store: SessionStore, space: str, template: str, new: Sequence[Fact], shape: Sequence[str] = ()
) -> None:
    """``publish`` for async code."""
    breaker = breaker_of(store, fleet_id(space, template))
    if not (new or shape) or breaker.is_open:
        return
    key = fleet_id(space, template)
    try:
        if isinstance(store, AsyncSessionStore):
            known, prints = decode_entry(await store.aget_blob(key, FACTS))
            facts = merged(known, new)
            if facts != known or (shape and not prints):
                await store.aput_blob(key, FACTS, encode(facts, prints or shape))
        else:
            await asyncio.to_thread(publish, store, space, template, new, shape)
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
    """The fleet's facts for the application of ``body`` (``()``: none, or a failure);
    ``tenant``: the call's tenant digest (``fleet.namespace``)."""
    return fleet_for(store, api, body, hints, tenant)[0]


def fleet_for(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints, tenant: str | None = None
) -> tuple[tuple[Fact, ...], str | None]:
    """``(facts, note)`` for a conversation's first request: the fleet's facts for its application,
    and what per-conversation text early in its system prompt costs the application
    (``fleet_shape``; ``None``: nothing to say). The first conversation of an application to find
    no shape stores its own (one write). Never raises."""
    where = _where(api, body, hints, tenant)
    if where is None:
        return (), None
    facts, theirs = lookup_entry(store, *where)
    texts = _texts(api, body, hints)
    note = _note(where[0], texts, theirs)
    if not theirs and not breaker_of(store, fleet_id(*where)).is_open:
        publish(store, *where, (), _shape(where[0], texts))
    return facts, note


async def afleet_for(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints, tenant: str | None = None
) -> tuple[tuple[Fact, ...], str | None]:
    """``fleet_for`` for async code."""
    where = _where(api, body, hints, tenant)
    if where is None:
        return (), None
    facts, theirs = await alookup_entry(store, *where)
    texts = _texts(api, body, hints)
    note = _note(where[0], texts, theirs)
    if not theirs and not breaker_of(store, fleet_id(*where)).is_open:
        await apublish(store, *where, (), _shape(where[0], texts))
    return facts, note


async def afacts_for(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints, tenant: str | None = None
) -> tuple[Fact, ...]:
    """``facts_for`` for async code."""
    return (await afleet_for(store, api, body, hints, tenant))[0]


def _texts(api: Api, body: Mapping[str, Any], hints: TelosHints) -> list[str] | None:
    """The system prompt's PIN texts, read once for the note and the shape (``None``: unreadable)."""
    try:
        return system_pin_texts(api, body, hints.drop_patterns)
    except Exception:  # never breaks a call: no note, no shape
        logger.debug("telos_wrap: no fleet shape for this request", exc_info=True)
        return None


def _shape(space: str, texts: list[str] | None) -> tuple[str, ...]:
    if texts is None:
        return ()
    try:
        return fleet_shape.prints(space, texts)
    except Exception:  # never breaks a call: no shape
        logger.debug("telos_wrap: no fleet shape for this request", exc_info=True)
        return ()


def _note(space: str, texts: list[str] | None, theirs: Sequence[str]) -> str | None:
    if texts is None:
        return None
    try:
        found = fleet_shape.early_text(space, texts, theirs)
    except Exception:  # never breaks a call: nothing to say
        logger.debug("telos_wrap: no fleet shape note for this request", exc_info=True)
        return None
    return None if found is None else found.note()


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
