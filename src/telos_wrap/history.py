"""The history memo: a session's settled messages, reused so a turn costs what is new.

An agent resends its whole conversation every turn. Everything before the latest turn was already
lifted, canonicalized, banded FOLD and pruned on the turn it settled, and its wire form sent. The
memo keeps, per session and in memory only:

* a *container copy* of each settled message as the SDK handed it over (dicts and lists copied,
  strings and numbers shared — no text is duplicated),
* its bridged IR message, and what later stages derived from it: per-message ``tables`` (the
  engine's wire form and plan summaries) and *aggregates* folded over the settled prefix (the
  session's fingerprints as joined strings and uint32 arrays), so a turn extends them instead of
  walking the history again.

On the next turn the incoming messages are compared with the copies by plain ``==`` — one C-level
walk in which an unchanged string compares by identity — so a message changed in place, or
replaced, is noticed and redone from there on: nothing is trusted because it is the same object.
The memo is a cache, never state: dropping it changes no byte that is sent.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from telos_wrap.ir.model import TelosIR, TelosMessage

__all__ = ["HistoryMemo", "copy_containers", "raw_latest_turn"]


def copy_containers(value: Any) -> Any:
    """``value`` with every dict and list copied and every leaf shared (immutable JSON scalars)."""
    if type(value) is dict:
        return {key: copy_containers(item) for key, item in value.items()}
    if type(value) is list:
        return [copy_containers(item) for item in value]
    return value


class HistoryMemo:
    """Settled history of one session (see module docstring). Thread-safe."""

    __slots__ = ("_aggregates", "_key", "_lock", "_messages", "_snapshot", "tables")

    def __init__(self) -> None:
        self._key: Hashable | None = None
        self._snapshot: list[Any] = []
        self._messages: list[TelosMessage] = []
        #: Per-message tables by name (the engines' ``PrefixTables``): entry ``i`` is valid while
        #: message ``i`` is settled; cut with the memo.
        self.tables: dict[str, list[Any]] = {}
        #: name → (count, value): a value folded over the first ``count`` settled messages.
        self._aggregates: dict[str, tuple[int, Any]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._messages)

    def reusable(self, key: Hashable, messages: Sequence[Any], latest: int) -> tuple[TelosMessage, ...]:
        """The settled IR messages that still match the start of ``messages`` (before ``latest``).

        ``key`` names everything else the settled form depends on (API, engine, DROP patterns,
        policy switches); a different key empties the memo.
        """
        with self._lock:
            if key != self._key:
                self._reset(key)
                return ()
            limit = min(len(self._snapshot), max(latest, 0))
            if limit and list(messages[:limit]) == self._snapshot[:limit]:
                return tuple(self._messages[:limit])
            keep = 0
            while keep < limit and messages[keep] == self._snapshot[keep]:
                keep += 1
            self._truncate(keep)
            return tuple(self._messages)

    def aggregate(self, name: str, settled: int) -> tuple[int, Any] | None:
        """``(count, value)`` stored under ``name`` if it covers no more than ``settled`` messages.

        An aggregate (a joined string of per-message hashes, say) lets a turn extend what earlier
        turns built instead of walking every settled message again: touching a thousand objects
        that the SDK's own work has pushed out of the CPU caches costs more than hashing a turn.
        """
        with self._lock:
            found = self._aggregates.get(name)
            return found if found is not None and found[0] <= settled else None

    def keep_aggregate(self, name: str, count: int, value: Any) -> None:
        """Store ``value``, folded over the first ``count`` settled messages (see ``shared_prefix``)."""
        with self._lock:
            if count <= len(self._messages):
                self._aggregates[name] = (count, value)

    def shared_prefix(self, messages: Sequence[TelosMessage], settled: int) -> int:
        """How many leading ``messages`` (a request's IR, after ``settle``) are the memo's own.

        The first ``settled`` were reused from the memo. If ``settle`` appended this request's
        messages, the memo's last message is the very object at that index of ``messages`` (a
        message lifted this turn is a new object, never one of an earlier request).
        """
        with self._lock:
            count = len(self._messages)
            if settled < count <= len(messages) and self._messages[count - 1] is messages[count - 1]:
                return count
            return min(settled, count)

    def settle(
        self,
        key: Hashable,
        messages: Sequence[Any],
        ir: TelosIR,
        latest: int,
        sent: Sequence[Any] | None = None,
    ) -> None:
        """Remember messages ``[len(memo), latest)`` of this request as settled history.

        ``sent`` (the wire messages of this request, aligned with ``messages``; engines keep and
        resend them read-only) lets a message that was sent exactly as it came be its own
        snapshot, so the memo holds one copy of it instead of two. Value equality is all the
        snapshot needs: ``==`` ignores the canonical key order the wire form has.
        """
        with self._lock:
            # ``ir`` may end with messages telos appended (a trailing envelope message): never settled.
            if key != self._key or len(ir.messages) < len(messages):
                return
            if sent is not None and len(sent) != len(messages):
                sent = None
            for index in range(len(self._snapshot), max(latest, 0)):
                message = messages[index]
                wire = sent[index] if sent is not None else None
                self._snapshot.append(
                    wire if type(wire) is dict and wire == message else copy_containers(message)
                )
                self._messages.append(ir.messages[index])
            for values in self.tables.values():
                del values[len(self._messages) :]

    def _reset(self, key: Hashable) -> None:
        self._key = key
        self._truncate(0)

    def _truncate(self, keep: int) -> None:
        del self._snapshot[keep:]
        del self._messages[keep:]
        for values in self.tables.values():
            del values[keep:]
        for name in [name for name, (count, _) in self._aggregates.items() if count > keep]:
            del self._aggregates[name]


def raw_latest_turn(messages: Sequence[Any], roles: frozenset[str]) -> int:
    """Index of the last message whose role is in ``roles`` (``-1`` if none), on raw wire dicts."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, Mapping) and message.get("role") in roles:
            return index
    return -1
