"""Session stores: where session state lives, with compare-and-set so writers never overwrite each other.

A store keeps, per session id, one JSON text and a *revision* number. Every update is a
compare-and-set: ``compare_and_set(id, expected, text)`` writes only if the stored revision is
still ``expected`` (``0`` = the session does not exist yet) and returns the new revision, or
``None`` when another writer got there first — the caller then reloads, recomputes and retries.
Stores hold JSON text only (never pickle). Each session also owns a small map of *blobs*
(content-addressed texts such as pinned documents) that lives and expires with it.

Revisions are opaque and never reused for a session id: a session that disappears from the store
(evicted, expired, a Redis restarted without persistence) and is created again starts at a fresh
revision, so a worker still holding a revision of the old copy can never compare-and-set over the
new one by accident.

Async clients use the ``a``-prefixed twins (``AsyncSessionStore``) so no store I/O blocks the event
loop; ``swap`` / ``aswap`` are compare-and-set that also return the current state when they lose, so
a lost race costs one round trip, not two. ``store_ops`` gives every store these methods (a store
without them gets a fallback: ``compare_and_set`` then ``load``; a sync-only store's calls run in a
worker thread under asyncio).

Two implementations: ``MemoryStore`` (the default: one process, bounded LRU) and
``telos_wrap.sessions.stores.redis_store.RedisStore`` (several workers or hosts).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from telos_wrap.ir.shared import share, shared_texts

__all__ = [
    "AsyncSessionStore",
    "MemoryStore",
    "SessionStore",
    "StoreOps",
    "Swapped",
    "Versioned",
    "default_store",
    "set_default_store",
    "store_ops",
]


class Dumpable(Protocol):
    """A state that can give its stored text (``SessionState``)."""

    def dumps(self) -> str: ...

    def approx_bytes(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Versioned:
    """A stored state: its JSON ``text`` and the ``revision`` to pass to ``compare_and_set``."""

    revision: int
    text: str


@dataclass(frozen=True, slots=True)
class Swapped:
    """The outcome of a ``swap``: the new ``revision`` if written, else the ``current`` state (or None)."""

    revision: int | None
    current: Versioned | None = None


@runtime_checkable
class SessionStore(Protocol):
    """What a session needs from a store. Implementations must be thread-safe."""

    def load(self, session_id: str) -> Versioned | None:
        """The stored state of ``session_id``, or ``None`` if there is none."""
        ...

    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        """Store ``text`` if the revision is still ``expected`` (0: absent). New revision, or ``None``."""
        ...

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        """Keep ``text`` under ``key`` for as long as the session lives."""
        ...

    def get_blob(self, session_id: str, key: str) -> str | None:
        """A blob put earlier, or ``None``."""
        ...

    def delete(self, session_id: str) -> None:
        """Forget a session and its blobs."""
        ...


@runtime_checkable
class AsyncSessionStore(Protocol):
    """The async twins a store offers to async clients (each does what its sync namesake does)."""

    async def aload(self, session_id: str) -> Versioned | None:
        """The async form of ``load``: the stored ``Versioned`` state, or ``None``. It must stand being
        cancelled: the session drivers race it against the call's store budget and the breaker and cancel it
        past them without waiting (``sync/drivers.py``)."""
        ...

    async def acompare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        """The async form of ``compare_and_set``: the new revision, or ``None`` when the stored revision is no
        longer ``expected`` (0: absent)."""
        ...

    async def aput_blob(self, session_id: str, key: str, text: str) -> None:
        """The async form of ``put_blob``; cancellable like ``aload`` (fleet learning bounds its calls by
        the call's store budget: ``learning/fleet_io.py``)."""
        ...

    async def aget_blob(self, session_id: str, key: str) -> str | None:
        """The async form of ``get_blob``: the blob put under ``key``, or ``None``; cancellable like
        ``aload``."""
        ...

    async def adelete(self, session_id: str) -> None:
        """The async form of ``delete`` (``Session.aerase``): the session's state and blobs are gone."""
        ...


class StoreOps:
    """Every operation a session needs, sync and async, over any ``SessionStore`` (see ``store_ops``)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._native_async = isinstance(store, AsyncSessionStore)
        #: A ``MemoryStore`` (not a subclass, which may override its async twins): nothing it does
        #: waits, so async sessions call its sync methods directly (``drivers.arun``).
        self.inline = type(store) is MemoryStore

    def load(self, session_id: str) -> Versioned | None:
        """The stored state of ``session_id`` (``None``: absent), from the store's ``load``. What the store
        raises propagates; the drivers hand it to the plan as ``Failed``."""
        loaded: Versioned | None = self.store.load(session_id)
        return loaded

    def swap(self, session_id: str, expected: int, text: str) -> Swapped:
        """Compare-and-set ``text`` over revision ``expected`` (0: absent): ``Swapped(revision)`` if written,
        else ``Swapped(None, current)`` with the store's current state (``None``: absent). One round trip with
        the store's own ``swap``, else ``compare_and_set`` then ``load`` (two, not atomic: ``current`` may
        already be newer than the write that won)."""
        native = getattr(self.store, "swap", None)
        if native is not None:
            swapped: Swapped = native(session_id, expected, text)
            return swapped
        written = self.store.compare_and_set(session_id, expected, text)
        return Swapped(written) if written is not None else Swapped(None, self.store.load(session_id))

    def get_blob(self, session_id: str, key: str) -> str | None:
        """The blob ``key`` of ``session_id`` from the store's ``get_blob`` (``None``: not there); what the
        store raises propagates."""
        blob: str | None = self.store.get_blob(session_id, key)
        return blob

    async def aload(self, session_id: str) -> Versioned | None:
        """The async form of ``load``: the store's ``aload``, or its sync ``load`` in a worker thread
        (``asyncio.to_thread``) for a store without async twins. Not bounded here: the drivers race it against
        the call's store budget (``sync/drivers.py``)."""
        if self._native_async:
            loaded: Versioned | None = await self.store.aload(session_id)
            return loaded
        return await asyncio.to_thread(self.load, session_id)

    async def aswap(self, session_id: str, expected: int, text: str) -> Swapped:
        """The async form of ``swap``: the store's ``aswap``; else ``acompare_and_set`` then ``aload``; a
        sync-only store's ``swap`` runs in a worker thread. Not bounded here, like ``aload``."""
        native = getattr(self.store, "aswap", None)
        if native is not None:
            swapped: Swapped = await native(session_id, expected, text)
            return swapped
        if not self._native_async:
            return await asyncio.to_thread(self.swap, session_id, expected, text)
        written = await self.store.acompare_and_set(session_id, expected, text)
        return Swapped(written) if written is not None else Swapped(None, await self.store.aload(session_id))

    async def aget_blob(self, session_id: str, key: str) -> str | None:
        """The async form of ``get_blob``: the store's ``aget_blob``, or its sync ``get_blob`` in a worker
        thread. Not bounded here, like ``aload``."""
        if self._native_async:
            blob: str | None = await self.store.aget_blob(session_id, key)
            return blob
        return await asyncio.to_thread(self.get_blob, session_id, key)


def store_ops(store: SessionStore) -> StoreOps:
    """The ``StoreOps`` of ``store`` (made once per store object)."""
    ops = getattr(store, "_telos_ops", None)
    if isinstance(ops, StoreOps) and ops.store is store:
        return ops
    ops = StoreOps(store)
    try:
        store._telos_ops = ops  # type: ignore[attr-defined]
    except AttributeError:  # a store with __slots__: build it each time (cheap)
        pass
    return ops


#: Revisions of every ``MemoryStore`` come from one counter, so none is ever reused (see above).
_revisions = itertools.count(1)


@dataclass(slots=True)
class _Entry:
    revision: int = 0
    text: str | None = None
    #: The state a session of this process wrote (``MemoryStore.swap_state``); ``text`` is made from
    #: it on the first ``load``.
    state: Dumpable | None = None
    blobs: dict[str, str] = field(default_factory=dict)
    #: What ``bytes`` counted for this entry last (``MemoryStore._account``).
    size: int = 0

    def bytes(self) -> int:
        """About how many bytes the entry holds: its text, else its state's estimate, and its blobs
        (texts shared with other sessions, ``ir.shared``, count once in the shared table)."""
        size = 200 + len(self.text) if self.text is not None else 200
        if self.state is not None:
            size += self.state.approx_bytes()
        for key, text in self.blobs.items():
            size += 100 + len(key) + (0 if shared_texts.holds(text) else len(text))
        return size


#: The default byte bound of a ``MemoryStore`` (docs/sessions.md, "Memory").
DEFAULT_STORE_BYTES = 64 << 20


class MemoryStore:
    """In-process store: a bounded LRU of sessions (the least recently used is forgotten first).

    Args:
        max_sessions: how many sessions to keep; a forgotten session starts again from nothing.
        max_bytes: how many bytes of states and blobs to keep, about (``SessionState.approx_bytes``),
            64 MiB by default; past it the least recently used sessions are forgotten first.
    """

    def __init__(self, max_sessions: int = 10_000, max_bytes: int = DEFAULT_STORE_BYTES) -> None:
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes_held(self) -> int:
        """About how many bytes the store's states and blobs hold (what ``max_bytes`` bounds)."""
        return self._bytes

    def _touch(self, session_id: str, create: bool) -> _Entry | None:
        entry = self._entries.get(session_id)
        if entry is None:
            if not create:
                return None
            entry = self._entries[session_id] = _Entry()
            self._evict()
        else:
            self._entries.move_to_end(session_id)
        return entry

    def _account(self, entry: _Entry) -> None:
        """``entry`` changed: count its bytes again and forget the least recently used past the bound."""
        size = entry.bytes()
        self._bytes += size - entry.size
        entry.size = size
        self._evict()

    def _evict(self) -> None:
        while len(self._entries) > 1 and (
            len(self._entries) > self.max_sessions or self._bytes > self.max_bytes
        ):
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.size

    def load(self, session_id: str) -> Versioned | None:
        """The session's state (``None``: absent or forgotten), now its most recently used. A state written by
        ``swap_state`` is encoded here on its first read, and from then on only its text is kept."""
        with self._lock:
            entry = self._touch(session_id, create=False)
            if entry is None:
                return None
            if entry.text is None and entry.state is not None:
                entry.text = entry.state.dumps()
                entry.state = None  # the text is what is kept (not both)
                self._account(entry)
            return None if entry.text is None else Versioned(entry.revision, entry.text)

    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        """Write ``text`` if the session's revision is still ``expected`` (0: absent): its new revision, drawn
        from one counter for every ``MemoryStore`` of the process (never reused), or ``None`` if another
        writer got there first. Writing may forget the least recently used sessions past ``max_sessions`` /
        ``max_bytes``."""
        with self._lock:
            entry = self._touch(session_id, create=True)
            assert entry is not None
            if entry.revision != expected:
                return None
            entry.revision = next(_revisions)
            entry.text = text
            entry.state = None
            self._account(entry)
            return entry.revision

    def swap_state(self, session_id: str, expected: int, state: Dumpable) -> Swapped:
        """``swap`` of an immutable state object, serialized only if ``load`` is ever asked for it.

        What a session of this process writes to an in-process store (``StoreOps.inline``): its own
        later requests never read the text back, so encoding it on every call (~20 us) would be
        wasted. ``load`` returns exactly the text ``swap`` would have stored.
        """
        with self._lock:
            entry = self._touch(session_id, create=True)
            assert entry is not None
            if entry.revision == expected:
                entry.revision = next(_revisions)
                entry.text = None
                entry.state = state
                self._account(entry)
                return Swapped(entry.revision)
        return Swapped(None, self.load(session_id))

    def swap(self, session_id: str, expected: int, text: str) -> Swapped:
        """``compare_and_set`` that returns the current state when it loses."""
        written = self.compare_and_set(session_id, expected, text)
        return Swapped(written) if written is not None else Swapped(None, self.load(session_id))

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        """Keep ``text`` under ``key`` until the session is deleted or forgotten (the session's entry is made
        if absent). The text is shared through ``ir.shared``, so a document pinned by many sessions is held,
        and counted against ``max_bytes``, once."""
        with self._lock:
            entry = self._touch(session_id, create=True)
            assert entry is not None
            entry.blobs[key] = share(text)
            self._account(entry)

    def get_blob(self, session_id: str, key: str) -> str | None:
        """The blob put under ``key``, or ``None`` (none, or the session was forgotten); the session becomes
        the most recently used."""
        with self._lock:
            entry = self._touch(session_id, create=False)
            return None if entry is None else entry.blobs.get(key)

    def delete(self, session_id: str) -> None:
        """Forget the session's state and blobs at once (nothing happens if it is absent); its bytes leave
        ``bytes_held``."""
        with self._lock:
            dropped = self._entries.pop(session_id, None)
            if dropped is not None:
                self._bytes -= dropped.size

    # In memory nothing blocks: the async twins are the sync methods.
    async def aload(self, session_id: str) -> Versioned | None:
        """The async form of ``load``: the sync method itself, run inline (nothing in memory waits)."""
        return self.load(session_id)

    async def acompare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        """The async form of ``compare_and_set``, run inline (nothing in memory waits)."""
        return self.compare_and_set(session_id, expected, text)

    async def aswap(self, session_id: str, expected: int, text: str) -> Swapped:
        """The async form of ``swap``, run inline (nothing in memory waits)."""
        return self.swap(session_id, expected, text)

    async def aput_blob(self, session_id: str, key: str, text: str) -> None:
        """The async form of ``put_blob``, run inline (nothing in memory waits)."""
        self.put_blob(session_id, key, text)

    async def aget_blob(self, session_id: str, key: str) -> str | None:
        """The async form of ``get_blob``, run inline (nothing in memory waits)."""
        return self.get_blob(session_id, key)

    async def adelete(self, session_id: str) -> None:
        """The async form of ``delete``, run inline (nothing in memory waits)."""
        self.delete(session_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


_default: SessionStore = MemoryStore()
_default_lock = threading.Lock()


def default_store() -> SessionStore:
    """The store of sessions created without ``store=`` (implicit and hint-named ones included)."""
    return _default


def set_default_store(store: SessionStore) -> SessionStore:
    """Use ``store`` for sessions created without ``store=`` from now on; returns the previous one."""
    global _default
    with _default_lock:
        previous, _default = _default, store
    return previous
