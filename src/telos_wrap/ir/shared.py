"""Texts held once per process, and memo tables bounded in bytes.

A worker serves thousands of conversations that send the same long texts: one agent's system
prompt (20-60 KB), a pinned document, the fingerprint of that prompt. Each conversation's own copy
of such a text (the lift cuts the per-turn clock out of the caller's string and so makes a new
string every call) would cost its size again for as long as the conversation is remembered.
``share(text)`` returns the one equal text this process already holds, content-addressed: a text
many conversations keep is held once, whatever number of them keep it (docs/sessions.md, "What a
session keeps in this process").

``SharedTexts`` is bounded in bytes, least recently shared first out. Dropping an entry never
changes a value anyone holds (a string is immutable and compared by value everywhere): a text
evicted while still in use only stops being shared, the next ``share`` of it starts a new entry.
Only texts of at least ``min_chars`` characters are entered; a short text costs less than an entry.

``BoundedMemo`` is a least-recently-used memo for a pure function of a text, bounded by entries and
by the characters of its keys and values (``functools.lru_cache`` counts entries only: 256 entries
of 50 KB prompts are 12 MB).
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["BoundedMemo", "SharedTexts", "share", "shared_texts", "size_of"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Bytes an entry of a table costs besides its texts (dict slot, list links, tuple): a fair flat figure.
ENTRY_OVERHEAD = 100


def size_of(value: Any) -> int:
    """Bytes ``value`` holds, roughly: a text's characters, the sum over a tuple, list or dict (keys
    and values), ``sys.getsizeof`` otherwise. Used by the bounded tables here to count what they hold."""
    if type(value) is str:
        return len(value) + 49
    if type(value) in (tuple, list, frozenset, set):
        return 56 + 8 * len(value) + sum(size_of(item) for item in value)
    if type(value) is dict:
        return 64 + sum(size_of(k) + size_of(v) + 16 for k, v in value.items())
    return sys.getsizeof(value)


class SharedTexts:
    """Content-addressed texts: ``share(text)`` is an equal text, the same object for equal texts.

    Args:
        max_bytes: characters held at most (least recently shared texts are dropped first).
        min_chars: shorter texts are returned as given, not entered.
    """

    def __init__(self, max_bytes: int = 64 << 20, min_chars: int = 512) -> None:
        if max_bytes < 0 or min_chars < 1:
            raise ValueError("max_bytes must be >= 0 and min_chars >= 1")
        self.max_bytes = max_bytes
        self.min_chars = min_chars
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def share(self, text: str) -> str:
        """The text equal to ``text`` that this process holds (``text`` itself the first time)."""
        if len(text) < self.min_chars or type(text) is not str:
            return text
        # A hit without the lock: ``get`` and ``move_to_end`` are each atomic (C, a ``str`` key); a
        # text dropped by another thread between the two stays a hit (the caller's copy is equal).
        found = self._texts.get(text)
        if found is not None:
            try:
                self._texts.move_to_end(found)
            except KeyError:
                pass
            return found
        with self._lock:
            found = self._texts.get(text)
            if found is not None:
                self._texts.move_to_end(found)
                return found
            if len(text) > self.max_bytes:
                return text
            self._texts[text] = text
            self._bytes += len(text)
            while self._bytes > self.max_bytes:
                _, dropped = self._texts.popitem(last=False)
                self._bytes -= len(dropped)
            return text

    def holds(self, text: str) -> bool:
        """Whether ``text`` is this very object held here (not only an equal one)."""
        return len(text) >= self.min_chars and self._texts.get(text) is text  # one atomic look-up

    @property
    def bytes_held(self) -> int:
        """Characters of the texts held."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._texts)

    def clear(self) -> None:
        with self._lock:
            self._texts.clear()
            self._bytes = 0


#: The process's shared texts (64 MiB at most).
shared_texts = SharedTexts()

#: ``share(text)``: the one copy of ``text`` this process holds (``shared_texts.share``, bound once:
#: several calls per request, so no wrapper function around it).
share: Callable[[str], str] = shared_texts.share


class BoundedMemo(Generic[K, V]):
    """A least-recently-used memo of ``function(key)``, bounded by entries and bytes.

    ``memo(key, *args)`` returns ``function(key, *args)`` from the table when ``key`` was asked
    before: ``key`` must determine the result (``args`` are not kept: a text whose digest is the
    key, say, so the table holds no text). Bytes are ``sizer(key, value)``, else ``size_of`` the key
    and the value. ``keep(key)``, on a miss only, is the key the table holds and ``function`` gets
    (``share`` for a text key: the table holds the process's one copy, and a hit shares nothing).

    A hit takes no lock (``get`` and ``move_to_end`` are each atomic); a miss and its eviction do.
    """

    def __init__(
        self,
        function: Callable[..., V],
        *,
        max_entries: int,
        max_bytes: int,
        sizer: Callable[[Any, V], int] | None = None,
        keep: Callable[[Any], Any] | None = None,
    ) -> None:
        self.function = function
        self.sizer = sizer
        self.keep = keep
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._table: OrderedDict[Any, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __call__(self, key: K, *args: Any) -> V:
        table = self._table
        try:
            found = table[key]  # a subscript, not ``get``: a hit is the common case, one call fewer
        except KeyError:
            pass
        else:
            try:
                table.move_to_end(key)
            except KeyError:  # dropped by another thread meanwhile: still the right value
                pass
            return found[0]
        full = key if self.keep is None else self.keep(key)
        value = self.function(full, *args)
        cost = (self.sizer(full, value) if self.sizer else size_of(key) + size_of(value)) + ENTRY_OVERHEAD
        if cost > self.max_bytes:
            return value
        with self._lock:
            previous = self._table.pop(full, None)
            if previous is not None:
                self._bytes -= previous[1]
            self._table[full] = (value, cost)
            self._bytes += cost
            while len(self._table) > self.max_entries or self._bytes > self.max_bytes:
                _, (_, dropped) = self._table.popitem(last=False)
                self._bytes -= dropped
        return value

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._table)

    def cache_clear(self) -> None:
        with self._lock:
            self._table.clear()
            self._bytes = 0
