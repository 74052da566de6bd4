"""Session stores: where session state lives, with compare-and-set so writers never overwrite each other.

A store keeps, per session id, one JSON text and a *revision* number. Every update is a
compare-and-set: ``compare_and_set(id, expected, text)`` writes only if the stored revision is
still ``expected`` (``0`` = the session does not exist yet) and returns the new revision, or
``None`` when another writer got there first — the caller then reloads, recomputes and retries.
Stores hold JSON text only (never pickle). Each session also owns a small map of *blobs*
(content-addressed texts such as pinned documents) that lives and expires with it.

Two implementations: ``MemoryStore`` (the default: one process, bounded LRU) and
``telos_wrap.sessions.redis_store.RedisStore`` (several workers or hosts).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["MemoryStore", "SessionStore", "Versioned", "default_store", "set_default_store"]


@dataclass(frozen=True, slots=True)
class Versioned:
    """A stored state: its JSON ``text`` and the ``revision`` to pass to ``compare_and_set``."""

    revision: int
    text: str


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


@dataclass(slots=True)
class _Entry:
    revision: int = 0
    text: str | None = None
    blobs: dict[str, str] = field(default_factory=dict)


class MemoryStore:
    """In-process store: a bounded LRU of sessions (the least recently used is forgotten first).

    Args:
        max_sessions: how many sessions to keep; a forgotten session starts again from nothing.
    """

    def __init__(self, max_sessions: int = 10_000) -> None:
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.max_sessions = max_sessions
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def _touch(self, session_id: str, create: bool) -> _Entry | None:
        entry = self._entries.get(session_id)
        if entry is None:
            if not create:
                return None
            entry = self._entries[session_id] = _Entry()
            while len(self._entries) > self.max_sessions:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(session_id)
        return entry

    def load(self, session_id: str) -> Versioned | None:
        with self._lock:
            entry = self._touch(session_id, create=False)
            if entry is None or entry.text is None:
                return None
            return Versioned(entry.revision, entry.text)

    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        with self._lock:
            entry = self._touch(session_id, create=True)
            assert entry is not None
            if entry.revision != expected:
                return None
            entry.revision += 1
            entry.text = text
            return entry.revision

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        with self._lock:
            entry = self._touch(session_id, create=True)
            assert entry is not None
            entry.blobs[key] = text

    def get_blob(self, session_id: str, key: str) -> str | None:
        with self._lock:
            entry = self._touch(session_id, create=False)
            return None if entry is None else entry.blobs.get(key)

    def delete(self, session_id: str) -> None:
        with self._lock:
            self._entries.pop(session_id, None)

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
