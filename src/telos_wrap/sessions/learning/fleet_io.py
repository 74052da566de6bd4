"""Fleet learning's store I/O (the facts themselves: ``fleet.py``): read a template's facts, publish new ones.

Never breaks a call: while the store's circuit breaker is open nothing is tried (and nothing is
counted as a skipped session call); a failure goes to the breaker (which warns once per window,
as for any store failure), is logged at DEBUG and reads as "no facts". Publishing merges by union
(capped at ``fleet.MAX_FACTS``) with a read and a write: two conversations publishing at the same
moment may lose one fact, which the next conversation that learns it publishes again.

Conversation lengths (``lengths.py``) cost no store I/O per request: each request adds its count to
this process's pending counts (``note_reached``, in memory), and the next conversation this process
starts on the same store and application publishes them with the read and write its first request
already makes (``fleet_for``). Two processes publishing at the same moment may lose one's counts
(statistics, not facts: the next publish goes on counting).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
from telos_wrap.sessions.learning.lengths import MAX_TRACKED, NO_LENGTHS, Lengths, count_reached
from telos_wrap.sessions.stores.breaker import breaker_of
from telos_wrap.sessions.stores.budget import bounded
from telos_wrap.sessions.stores.store import AsyncSessionStore, SessionStore

__all__ = [
    "FleetStart",
    "afacts_for",
    "afleet_for",
    "alookup",
    "apublish",
    "apublish_learned",
    "facts_for",
    "fleet_for",
    "lookup",
    "note_reached",
    "publish",
    "publish_learned",
]

logger = logging.getLogger("telos_wrap.sessions")

Entry = tuple[tuple[Fact, ...], tuple[str, ...], Lengths]
_NONE: Entry = ((), (), Lengths())


# -- the store (fail open) --------------------------------------------------------------------------


def lookup(store: SessionStore, space: str, template: str) -> tuple[Fact, ...]:
    """The facts the fleet holds for application ``template`` in ``space`` (``()`` on any failure)."""
    return lookup_entry(store, space, template)[0]


def lookup_entry(store: SessionStore, space: str, template: str) -> Entry:
    """``(facts, prints, lengths)`` the fleet holds for ``template`` in ``space`` (none on any failure)."""
    breaker = breaker_of(store, fleet_id(space, template))
    if breaker.is_open:  # left alone for the window; not counted as a session call skipped
        return _NONE
    try:
        text = store.get_blob(fleet_id(space, template), FACTS)
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be read", exc_info=True)
        return _NONE
    breaker.success()
    return decode_entry(text)


async def alookup(store: SessionStore, space: str, template: str) -> tuple[Fact, ...]:
    """``lookup`` for async code."""
    return (await alookup_entry(store, space, template))[0]


async def alookup_entry(store: SessionStore, space: str, template: str) -> Entry:
    """``lookup_entry`` for async code (the store's async client; a sync-only store in a thread)."""
    breaker = breaker_of(store, fleet_id(space, template))
    if breaker.is_open:  # left alone for the window; not counted as a session call skipped
        return _NONE
    try:
        if isinstance(store, AsyncSessionStore):
            text = await bounded(store.aget_blob(fleet_id(space, template), FACTS))
        else:
            text = await bounded(asyncio.to_thread(store.get_blob, fleet_id(space, template), FACTS))
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be read", exc_info=True)
        return _NONE
    breaker.success()
    return decode_entry(text)


def publish(
    store: SessionStore,
    space: str,
    template: str,
    new: Sequence[Fact],
    shape: Sequence[str] = (),
    reached: Lengths = NO_LENGTHS,
) -> None:
    """Add ``new`` to the facts of ``template`` in ``space`` (and its ``shape`` if it has none yet,
    and the counts ``reached`` to its conversation lengths). Never raises."""
    breaker = breaker_of(store, fleet_id(space, template))
    if not (new or shape or reached) or breaker.is_open:
        return
    key = fleet_id(space, template)
    try:
        known, prints, lengths = decode_entry(store.get_blob(key, FACTS))
        facts = merged(known, new)
        if facts != known or (shape and not prints) or reached:
            store.put_blob(key, FACTS, encode(facts, prints or shape, lengths.plus(reached)))
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be written", exc_info=True)
        return
    breaker.success()


async def apublish(
    store: SessionStore,
    space: str,
    template: str,
    new: Sequence[Fact],
    shape: Sequence[str] = (),
    reached: Lengths = NO_LENGTHS,
) -> None:
    """``publish`` for async code."""
    breaker = breaker_of(store, fleet_id(space, template))
    if not (new or shape or reached) or breaker.is_open:
        return
    key = fleet_id(space, template)
    try:
        if isinstance(store, AsyncSessionStore):
            known, prints, lengths = decode_entry(await bounded(store.aget_blob(key, FACTS)))
            facts = merged(known, new)
            if facts != known or (shape and not prints) or reached:
                await bounded(
                    store.aput_blob(key, FACTS, encode(facts, prints or shape, lengths.plus(reached)))
                )
        else:
            await bounded(asyncio.to_thread(publish, store, space, template, new, shape, reached))
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


@dataclass(frozen=True, slots=True)
class FleetStart:
    """What the fleet tells a conversation at its first request in this process.

    Attributes:
        facts: the application's facts (``fleet.Fact``), each verified on the prompt before use.
        note: what per-conversation text early in the system prompt costs (``fleet_shape``).
        lengths: how long the application's conversations ran (``lengths.Lengths``), this
            process's counts not yet published included.
        where: ``(namespace, application)`` of the conversation, for ``note_reached``.
    """

    facts: tuple[Fact, ...] = ()
    note: str | None = None
    lengths: Lengths = NO_LENGTHS
    where: tuple[str, str] | None = None


def facts_for(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints, tenant: str | None = None
) -> tuple[Fact, ...]:
    """The fleet's facts for the application of ``body`` (``()``: none, or a failure);
    ``tenant``: the call's tenant digest (``fleet.namespace``)."""
    return fleet_for(store, api, body, hints, tenant).facts


def fleet_for(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints, tenant: str | None = None
) -> FleetStart:
    """What the fleet holds for a conversation's first request (``FleetStart``): the facts of its
    application, what per-conversation text early in its system prompt costs the application
    (``fleet_shape``), and its conversation lengths. The first conversation of an application to
    find no shape stores its own, and this process's pending length counts are published (one
    write, only then). Never raises."""
    where = _where(api, body, hints, tenant)
    if where is None:
        return FleetStart()
    facts, theirs, stored = lookup_entry(store, *where)
    texts = _texts(api, body, hints)
    note = _note(where[0], texts, theirs)
    pending = _take_pending(store, where)
    if not breaker_of(store, fleet_id(*where)).is_open:
        shape = () if theirs else _shape(where[0], texts)
        if shape or pending:
            publish(store, *where, (), shape, pending)
    return FleetStart(facts, note, stored.plus(pending), where)


async def afleet_for(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints, tenant: str | None = None
) -> FleetStart:
    """``fleet_for`` for async code."""
    where = _where(api, body, hints, tenant)
    if where is None:
        return FleetStart()
    facts, theirs, stored = await alookup_entry(store, *where)
    texts = _texts(api, body, hints)
    note = _note(where[0], texts, theirs)
    pending = _take_pending(store, where)
    if not breaker_of(store, fleet_id(*where)).is_open:
        shape = () if theirs else _shape(where[0], texts)
        if shape or pending:
            await apublish(store, *where, (), shape, pending)
    return FleetStart(facts, note, stored.plus(pending), where)


async def afacts_for(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints, tenant: str | None = None
) -> tuple[Fact, ...]:
    """``facts_for`` for async code."""
    return (await afleet_for(store, api, body, hints, tenant)).facts


# -- conversation lengths: counted in memory, published at the next conversation's start ----------

#: Applications with pending counts kept per store (the oldest are dropped past it).
MAX_PENDING = 1_024
_pending_lock = threading.Lock()
#: Counts as plain tuples of ints, which the collector stops tracking.
_pending: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], tuple[int, ...]]] = weakref.WeakKeyDictionary()


def note_reached(store: SessionStore, where: tuple[str, str], requests: int) -> None:
    """Count, in this process, that a conversation of application ``where`` made its request number
    ``requests`` (1-based); published by the next ``fleet_for`` on the same store and application.
    No I/O; never raises."""
    if not 1 <= requests <= MAX_TRACKED:
        return  # a longer conversation is simply long (``Lengths.one``)
    try:
        with _pending_lock:
            by_app = _pending.setdefault(store, {})
            by_app[where] = count_reached(by_app.pop(where, ()), requests)
            while len(by_app) > MAX_PENDING:
                del by_app[next(iter(by_app))]
    except TypeError:  # a store that cannot be weakly referenced: its lengths are not counted
        logger.debug("telos_wrap: conversation lengths not counted for this store", exc_info=True)


def _take_pending(store: SessionStore, where: tuple[str, str]) -> Lengths:
    try:
        with _pending_lock:
            by_app = _pending.get(store)
            return Lengths(by_app.pop(where, ())) if by_app else Lengths()
    except TypeError:
        return Lengths()


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
