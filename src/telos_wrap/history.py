"""The history memo: a session's settled messages, reused so a turn costs what is new.

An agent resends its whole conversation every turn. Everything before the latest turn was already
lifted, canonicalized, banded FOLD and pruned on the turn it settled, and its wire form sent. The
memo keeps, per session and in memory only:

* a *container copy* of each settled message as the SDK handed it over (dicts and lists copied,
  strings and numbers shared — no text is duplicated),
* its bridged IR message, and the engine's wire form of it.

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

    __slots__ = ("_key", "_lock", "_messages", "_snapshot", "side", "wire")

    def __init__(self) -> None:
        self._key: Hashable | None = None
        self._snapshot: list[Any] = []
        self._messages: list[TelosMessage] = []
        #: index → the engine's wire form of a settled message (for ``EngineAdapter.emit(reuse=)``).
        self.wire: dict[int, Any] = {}
        #: Per-message values a session computed on the turn each message was fresh (fingerprints),
        #: by name; entry ``i`` is valid while message ``i`` is settled (cut with the memo).
        self.side: dict[str, list[Any]] = {}
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

    def remember(self, name: str, values: list[Any]) -> None:
        """Store this turn's per-message ``values`` under ``name`` (kept for settled messages)."""
        with self._lock:
            self.side[name] = values

    def recall(self, name: str, settled: int) -> list[Any]:
        """The stored values of the first ``settled`` messages (empty if not all are stored)."""
        with self._lock:
            values = self.side.get(name, [])
            return values[:settled] if len(values) >= settled else []

    def settle(self, key: Hashable, messages: Sequence[Any], ir: TelosIR, latest: int) -> None:
        """Remember messages ``[len(memo), latest)`` of this request as settled history."""
        with self._lock:
            if key != self._key or len(ir.messages) != len(messages):
                return
            for index in range(len(self._snapshot), max(latest, 0)):
                self._snapshot.append(copy_containers(messages[index]))
                self._messages.append(ir.messages[index])
            for values in self.side.values():
                del values[len(self._messages) :]

    def _reset(self, key: Hashable) -> None:
        self._key = key
        self._truncate(0)

    def _truncate(self, keep: int) -> None:
        del self._snapshot[keep:]
        del self._messages[keep:]
        for values in self.side.values():
            del values[keep:]
        for index in [index for index in self.wire if index >= keep]:
            del self.wire[index]


def raw_latest_turn(messages: Sequence[Any], roles: frozenset[str]) -> int:
    """Index of the last message whose role is in ``roles`` (``-1`` if none), on raw wire dicts."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, Mapping) and message.get("role") in roles:
            return index
    return -1
