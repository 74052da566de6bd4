"""Cache entries written at breakpoints (Anthropic; OpenAI GPT-5.6+ explicit/implicit breakpoints).

An entry is the prefix ending at one breakpoint, identified by ``(namespace, prefix hash)``.
It lives ``ttl`` seconds after its last write or read (both vendors refresh on use:
docs/vendor-facts.md §1.2, each hit refreshes the TTL; §2.2, a prefix stays eligible for 30 minutes
after its last write or read).  Not thread-safe on its own; callers hold their cache lock.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass
class Entry:
    """One cached prefix."""

    tokens: int
    ttl: float
    expires_at: float


@dataclass
class EntryStore:
    """Breakpoint entries keyed by ``(namespace, prefix hash)``."""

    _entries: dict[tuple[Hashable, bytes], Entry] = field(default_factory=dict)

    def get(self, namespace: Hashable, prefix_hash: bytes, now: float) -> Entry | None:
        """The live entry for this prefix, or None (expired entries are dropped)."""
        key = (namespace, prefix_hash)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if now >= entry.expires_at:
            del self._entries[key]
            return None
        return entry

    def put(self, namespace: Hashable, prefix_hash: bytes, tokens: int, ttl: float, now: float) -> None:
        """Write (or refresh) an entry; a refresh never shortens an entry's TTL."""
        entry = self.get(namespace, prefix_hash, now)
        if entry is None:
            self._entries[(namespace, prefix_hash)] = Entry(tokens, ttl, now + ttl)
        else:
            entry.ttl = max(entry.ttl, ttl)
            entry.expires_at = max(entry.expires_at, now + entry.ttl)

    def touch(self, entry: Entry, now: float) -> None:
        """Refresh an entry that was read."""
        entry.expires_at = max(entry.expires_at, now + entry.ttl)

    def clear(self) -> None:
        """Drop every entry."""
        self._entries.clear()
