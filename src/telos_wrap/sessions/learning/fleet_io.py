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
import functools
import logging
import threading
import weakref
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api
from telos_wrap.sessions.learning import fleet_shape
from telos_wrap.sessions.learning.digests import space_key
from telos_wrap.sessions.learning.fleet import (
    FACTS,
    Entry,
    Fact,
    application_key,
    contributor,
    decode_entry,
    fleet_id,
    merged,
    namespace,
    system_pin_texts,
    with_contributor,
)
from telos_wrap.sessions.learning.lengths import MAX_TRACKED, NO_LENGTHS, Lengths, count_reached
from telos_wrap.sessions.stores.breaker import StoreBreaker, breaker_of
from telos_wrap.sessions.stores.budget import StoreTimeSpent, bounded
from telos_wrap.sessions.stores.store import AsyncSessionStore, SessionStore

__all__ = [
    "FleetStart",
    "Plan",
    "aerase",
    "afleet_for",
    "apublish_learned",
    "arun_plan",
    "digest_key",
    "erase",
    "erase_plan",
    "fleet_for",
    "fleet_plan",
    "learned_plan",
    "lookup_entry",
    "note_reached",
    "publish",
    "publish_learned",
    "run_plan",
]

logger = logging.getLogger("telos_wrap.sessions")

T = TypeVar("T")

_NONE = Entry()
#: The blob of a session that lists the fleet entries it contributed to (``erase``).
CONTRIBUTED = "fleet"
#: At most this many entries listed per session.
MAX_CONTRIBUTED = 16


# -- the store operations, as plans (sans-IO) and their two drivers ---------------------------------
#
# Each store conversation of this module is written once, as a plan: a generator that yields the blob
# operations it needs (``_Get``, ``_Put``), is sent each answer, and has each failure thrown into it
# (so its own ``try`` handles it, as straight-line code would). ``run_plan`` answers with the store's
# sync methods, ``arun_plan`` with its async twins (a sync-only store's in a thread), each within what
# is left of the call's store budget (``stores/budget.py``). The sync and async entry points below are
# thin shells over the same plan (tests/sessions/test_fleet_plans.py drives both through each); a
# session's request path runs the plans themselves (``fleet_plan``, ``learned_plan``, ``erase_plan``)
# as steps of its own plans (``SessionRuntime``, tests/sessions/test_prepare_plans.py).


@dataclass(frozen=True, slots=True)
class _Get:
    """Read blob ``name`` of store entry ``key`` (answered with its text or ``None``)."""

    key: str
    name: str


@dataclass(frozen=True, slots=True)
class _Put:
    """Write ``text`` as blob ``name`` of store entry ``key``."""

    key: str
    name: str
    text: str


#: A plan of this module: yields ``_Get`` / ``_Put``, is sent their answers, returns a ``T``.
Plan = Generator[_Get | _Put, str | None, T]


class _Steps(Generic[T]):
    """A plan being run: its next operation after the last answer (or failure), then its result."""

    __slots__ = ("error", "plan", "result", "value")

    def __init__(self, plan: Plan[T]) -> None:
        self.plan = plan
        self.value: str | None = None
        self.error: Exception | None = None
        self.result: T | None = None

    def next(self) -> _Get | _Put | None:
        """The next operation (``None``: the plan ended, its value is in ``result``)."""
        try:
            op = self.plan.send(self.value) if self.error is None else self.plan.throw(self.error)
        except StopIteration as stop:
            self.result = stop.value
            return None
        self.value, self.error = None, None
        return op


def run_plan(plan: Plan[T], store: SessionStore) -> T:
    """Run ``plan`` with the store's sync methods."""
    steps = _Steps(plan)
    while (op := steps.next()) is not None:
        try:
            if isinstance(op, _Get):
                steps.value = store.get_blob(op.key, op.name)
            else:
                store.put_blob(op.key, op.name, op.text)
        except Exception as exc:
            steps.error = exc
    return steps.result  # type: ignore[return-value]


async def arun_plan(plan: Plan[T], store: SessionStore) -> T:
    """Run ``plan`` with the store's async methods (a sync-only store's in a thread), each bounded by
    what is left of the call's store budget."""
    steps = _Steps(plan)
    while (op := steps.next()) is not None:
        try:
            steps.value = await bounded(_acall(store, op))
        except Exception as exc:
            steps.error = exc
    return steps.result  # type: ignore[return-value]


async def _acall(store: SessionStore, op: _Get | _Put) -> str | None:
    if isinstance(store, AsyncSessionStore):
        if isinstance(op, _Get):
            return await store.aget_blob(op.key, op.name)
        await store.aput_blob(op.key, op.name, op.text)
        return None
    if isinstance(op, _Get):
        return await asyncio.to_thread(store.get_blob, op.key, op.name)
    await asyncio.to_thread(store.put_blob, op.key, op.name, op.text)
    return None


def _failed(breaker: StoreBreaker, exc: BaseException) -> None:
    """A fleet store call failed: the breaker hears of it, unless nothing was sent (an async call
    with no store time left: ``stores/budget.py``), which says nothing of the store."""
    if not isinstance(exc, StoreTimeSpent):
        breaker.failure(exc)


def _lookup_plan(store: SessionStore, space: str, template: str) -> Plan[Entry]:
    """What the fleet holds for ``template`` in ``space`` (none on any failure; fail open)."""
    key = fleet_id(space, template)
    breaker = breaker_of(store, key)
    if breaker.is_open:  # left alone for the window; not counted as a session call skipped
        return _NONE
    try:
        text = yield _Get(key, FACTS)
    except Exception as exc:
        _failed(breaker, exc)
        logger.debug("telos_wrap: fleet facts could not be read", exc_info=True)
        return _NONE
    breaker.success()
    return decode_entry(text)


def lookup_entry(store: SessionStore, space: str, template: str) -> Entry:
    """``(facts, prints, lengths)`` the fleet holds for ``template`` in ``space`` (none on any failure)."""
    return run_plan(_lookup_plan(store, space, template), store)


def _updated(
    known: Entry, new: Sequence[Fact], shape: Sequence[str], reached: Lengths, by: str
) -> Entry | None:
    """The entry after adding ``new`` (from contributor ``by``), ``shape`` if it has none, ``reached``;
    ``None`` when nothing changes."""
    facts = merged(known.facts, with_contributor(new, by) if by else new)
    prints, prints_by = known.prints, known.prints_by
    if shape and not prints:
        prints, prints_by = tuple(shape), by
    if facts == known.facts and prints == known.prints and not reached:
        return None
    return Entry(facts, prints, known.lengths.plus(reached), prints_by)


def _publish_plan(
    store: SessionStore,
    space: str,
    template: str,
    new: Sequence[Fact],
    shape: Sequence[str] = (),
    reached: Lengths = NO_LENGTHS,
    session_id: str | None = None,
) -> Plan[None]:
    """See ``publish`` (fail open)."""
    key = fleet_id(space, template)
    breaker = breaker_of(store, key)
    if not (new or shape or reached) or breaker.is_open:
        return
    by = contributor(space_key(space), session_id) if session_id is not None else ""
    try:
        entry = _updated(decode_entry((yield _Get(key, FACTS))), new, shape, reached, by)
        if entry is not None:
            yield _Put(key, FACTS, entry.encode())
            if by and session_id is not None and (new or shape):
                text = _listed((yield _Get(session_id, CONTRIBUTED)), key, by)
                if text is not None:
                    yield _Put(session_id, CONTRIBUTED, text)
    except Exception as exc:
        _failed(breaker, exc)
        logger.debug("telos_wrap: fleet facts could not be written", exc_info=True)
        return
    breaker.success()


def publish(
    store: SessionStore,
    space: str,
    template: str,
    new: Sequence[Fact],
    shape: Sequence[str] = (),
    reached: Lengths = NO_LENGTHS,
    session_id: str | None = None,
) -> None:
    """Add ``new`` to the facts of ``template`` in ``space`` (and its ``shape`` if it has none yet,
    and the counts ``reached`` to its conversation lengths), naming ``session_id`` (a keyed digest
    of it) as their contributor; the session's ``CONTRIBUTED`` blob then lists the entry, for
    ``erase``. Never raises."""
    run_plan(_publish_plan(store, space, template, new, shape, reached, session_id), store)


def _listed(text: str | None, key: str, by: str) -> str | None:
    """The ``CONTRIBUTED`` blob with ``key`` (written by ``by``) added, or ``None`` if listed already."""
    entries = [line for line in (text or "").split("\n") if line.count(" ") == 1][:MAX_CONTRIBUTED]
    line = f"{key} {by}"
    if line in entries or len(entries) >= MAX_CONTRIBUTED:
        return None
    return "\n".join([*entries, line])


def erase_plan(session_id: str) -> Plan[int]:
    """See ``erase`` (raises what the store raises)."""
    changed = 0
    for line in ((yield _Get(session_id, CONTRIBUTED)) or "").split("\n"):
        key, _, by = line.partition(" ")
        if not key.startswith("telos-fleet:") or not by:
            continue
        text = yield _Get(key, FACTS)
        if text is None:
            continue
        entry = decode_entry(text)
        kept = entry.without(by)
        if kept != entry:
            yield _Put(key, FACTS, kept.encode())
            changed += 1
    return changed


def erase(store: SessionStore, session_id: str) -> int:
    """Remove what session ``session_id`` taught the fleet: every fact it contributed to, and the
    prompt shape it stored, in each entry its ``CONTRIBUTED`` blob lists. Returns how many entries
    changed. Raises what the store raises (an erasure must not fail silently)."""
    return run_plan(erase_plan(session_id), store)


async def aerase(store: SessionStore, session_id: str) -> int:
    """``erase`` for async code."""
    return await arun_plan(erase_plan(session_id), store)


# -- what a session calls (the hook in ``core.py``) ------------------------------------------------


@functools.lru_cache(maxsize=256)
def _key_of(space: str) -> bytes:
    return space_key(space)


def digest_key(hints: TelosHints, tenant: str | None = None) -> bytes:
    """The key a session's learned state is digested with: its fleet namespace's
    (``fleet.namespace`` of the call's tenant signals; ``digests.space_key``)."""
    return _key_of(namespace(hints.isolation, tenant))


def _where(
    api: Api, body: Mapping[str, Any], hints: TelosHints, tenant: str | None
) -> tuple[str, str] | None:
    space = namespace(hints.isolation, tenant)
    template = application_key(api, body, hints.drop_patterns, space)
    return None if template is None else (space, template)


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


def fleet_plan(
    store: SessionStore,
    api: Api,
    body: Mapping[str, Any],
    hints: TelosHints,
    tenant: str | None,
    session_id: str | None,
) -> Plan[FleetStart]:
    """See ``fleet_for`` (fail open)."""
    where = _where(api, body, hints, tenant)
    if where is None:
        return FleetStart()
    found = yield from _lookup_plan(store, *where)
    facts, theirs, stored = found.facts, found.prints, found.lengths
    texts = _texts(api, body, hints)
    note = _note(where[0], texts, theirs)
    pending = _take_pending(store, where)
    if not breaker_of(store, fleet_id(*where)).is_open:
        shape = () if theirs else _shape(where[0], texts)
        if shape or pending:
            yield from _publish_plan(store, *where, (), shape, pending, session_id)
    return FleetStart(facts, note, stored.plus(pending), where)


def fleet_for(
    store: SessionStore,
    api: Api,
    body: Mapping[str, Any],
    hints: TelosHints,
    tenant: str | None = None,
    session_id: str | None = None,
) -> FleetStart:
    """What the fleet holds for a conversation's first request (``FleetStart``): the facts of its
    application, what per-conversation text early in its system prompt costs the application
    (``fleet_shape``), and its conversation lengths. The first conversation of an application to
    find no shape stores its own, and this process's pending length counts are published (one
    write, only then). ``tenant``: the call's tenant digest (``fleet.namespace``). Never raises."""
    return run_plan(fleet_plan(store, api, body, hints, tenant, session_id), store)


async def afleet_for(
    store: SessionStore,
    api: Api,
    body: Mapping[str, Any],
    hints: TelosHints,
    tenant: str | None = None,
    session_id: str | None = None,
) -> FleetStart:
    """``fleet_for`` for async code."""
    return await arun_plan(fleet_plan(store, api, body, hints, tenant, session_id), store)


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


def learned_plan(
    store: SessionStore,
    api: Api,
    body: Mapping[str, Any],
    hints: TelosHints,
    facts: Sequence[Fact],
    tenant: str | None,
    session_id: str | None,
) -> Plan[None]:
    """See ``publish_learned`` (fail open)."""
    where = _where(api, body, hints, tenant) if facts else None
    if where is not None:
        yield from _publish_plan(store, *where, facts, session_id=session_id)


def publish_learned(
    store: SessionStore,
    api: Api,
    body: Mapping[str, Any],
    hints: TelosHints,
    facts: Sequence[Fact],
    tenant: str | None = None,
    session_id: str | None = None,
) -> None:
    """Publish the facts a request learned (``TurnResult.facts``) under its application, naming
    ``session_id`` as their contributor. Never raises."""
    run_plan(learned_plan(store, api, body, hints, facts, tenant, session_id), store)


async def apublish_learned(
    store: SessionStore,
    api: Api,
    body: Mapping[str, Any],
    hints: TelosHints,
    facts: Sequence[Fact],
    tenant: str | None = None,
    session_id: str | None = None,
) -> None:
    """``publish_learned`` for async code."""
    await arun_plan(learned_plan(store, api, body, hints, facts, tenant, session_id), store)
