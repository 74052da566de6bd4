"""The history memo: a session's settled messages, reused so a turn costs what is new.

An agent resends its whole conversation every turn. Everything before the latest turn was already
lifted, canonicalized, banded FOLD and pruned on the turn it settled, and its wire form sent. The
memo keeps, per session and in memory only:

* a *container copy* of each settled message as the SDK handed it over (dicts and lists copied,
  strings and numbers shared — no text is duplicated),
* its bridged IR message, and what later stages derived from it: per-message ``tables`` (the
  engine's wire form and plan summaries), *side* values (the message's hash as the application
  sent it) and *aggregates* folded over the settled prefix (the session's fingerprints as joined
  strings and uint32 arrays), so a turn extends them instead of walking the history again.

On the next turn the incoming messages are compared with the copies by plain ``==`` — one C-level
walk in which an unchanged string compares by identity — so a message changed in place, or
replaced, is noticed and redone from there on: nothing is trusted because it is the same object.
``==`` alone would take ``True`` for ``1`` and ``1`` for ``1.0`` (and ``0.0`` for ``-0.0``), whose
JSON differs: a copy holds its numbers as ``ExactNumber`` leaves, equal only to a number of the same
type and JSON text, so such an edit is noticed too (the comparison runs Python code only there).
The memo is a cache, never state: dropping it changes no byte that is sent, whatever order
requests arrive in — a retry, a rewind, sibling branches from one prefix, a shorter conversation
with the same first message. Tables and aggregates are bound to the message objects they were
derived from (``PrefixTables``), so they never describe messages other than the ones they are read
for; ``tests/sessions/test_nonlinear.py`` drives a session through all of these in any order.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from telos_wrap.engines.base import PrefixTables
from telos_wrap.ir.model import TelosIR, TelosMessage

__all__ = ["ExactNumber", "HistoryMemo", "exact_copy", "holds_number", "raw_latest_turn"]

_NUMBERS = (bool, int, float)


class ExactNumber:
    """A number in a memo copy: equal only to a number of its own type with the same JSON text.

    Plain ``==`` says ``True == 1 == 1.0`` and ``0.0 == -0.0``; the wire bytes of each differ.
    """

    __slots__ = ("value",)
    __hash__ = None  # type: ignore[assignment]  # a copy's leaf is compared, never hashed

    def __init__(self, value: bool | int | float) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        value = self.value
        if type(other) is not type(value):
            return False
        if type(value) is float:
            return repr(other) == repr(value)  # as JSON writes it: -0.0 is not 0.0, a NaN is a NaN
        return other == value

    def __repr__(self) -> str:
        return f"ExactNumber({self.value!r})"


def exact_copy(value: Any) -> Any:
    """``value`` with every dict and list copied, numbers as ``ExactNumber``, strings shared."""
    if type(value) is dict:
        return {key: exact_copy(item) for key, item in value.items()}
    if type(value) is list:
        return [exact_copy(item) for item in value]
    if type(value) in _NUMBERS:
        return ExactNumber(value)
    return value


def holds_number(value: Any) -> bool:
    """Whether ``value`` has a number anywhere (without one, ``==`` compares it exactly)."""
    if type(value) is dict:
        return any(holds_number(item) for item in value.values())
    if type(value) is list:
        return any(holds_number(item) for item in value)
    return type(value) in _NUMBERS


class HistoryMemo:
    """Settled history of one session (see module docstring). Thread-safe.

    Everything the memo holds per settled message — the snapshot, the IR message, ``side`` values —
    sits in lists aligned by index and cut in one place (``_truncate``). What is derived from a
    prefix of messages (the engines' ``tables``, ``aggregate`` folds) is bound to the very message
    objects it was derived from (``PrefixTables``), so it can never be read for other messages.
    """

    __slots__ = ("_key", "_lock", "_messages", "_side", "_snapshot", "tables")

    def __init__(self) -> None:
        self._key: Hashable | None = None
        self._snapshot: list[Any] = []
        self._messages: list[TelosMessage] = []
        #: name → one value per settled message (see ``settle``).
        self._side: dict[str, list[Any]] = {}
        #: The engines' per-message tables and the session's prefix folds (a cache, never state).
        self.tables = PrefixTables()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._messages)

    def reusable(self, key: Hashable, messages: Sequence[Any], latest: int) -> tuple[TelosMessage, ...]:
        """The settled IR messages that still match the start of ``messages`` (before ``latest``).

        ``key`` names everything else the settled form depends on (API, engine, DROP patterns,
        policy switches); a different key empties the memo. A request that shares only part of
        the memo (a retry, a rewind, a sibling branch) gets that part; the memo keeps the rest
        until a request that goes past the point where they differ replaces it.
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
            if keep < limit:  # they differ at ``keep``: what the memo holds from there on is gone
                self._truncate(keep)
            return tuple(self._messages[:keep])

    def aggregate(self, name: str, messages: Sequence[TelosMessage]) -> tuple[int, Any] | None:
        """``(count, value)`` stored under ``name`` if it was folded over ``messages[:count]``.

        An aggregate (a joined string of per-message hashes, say) lets a turn extend what earlier
        turns built instead of walking every settled message again: touching a thousand objects
        that the SDK's own work has pushed out of the CPU caches costs more than hashing a turn.
        It is bound to the message objects it was folded over (``PrefixTables.fold``).
        """
        with self._lock:
            return self.tables.fold(name, messages)

    def keep_aggregate(self, name: str, messages: Sequence[TelosMessage], count: int, value: Any) -> None:
        """Store ``value``, folded over ``messages[:count]`` (see ``shared_prefix`` for a useful count)."""
        with self._lock:
            self.tables.keep_fold(name, messages, count, value)

    def shared_prefix(self, messages: Sequence[TelosMessage], settled: int) -> int:
        """How many leading ``messages`` (a request's IR, after ``settle``) are the memo's own.

        The first ``settled`` were reused from the memo. If ``settle`` appended this request's
        messages, the memo's last message is the very object at that index of ``messages`` (a
        message lifted this turn is a new object, never one of an earlier request). Folding an
        aggregate over more is harmless (it is bound to the objects) but useless: only the memo's
        messages come back.
        """
        with self._lock:
            count = len(self._messages)
            if settled < count <= len(messages) and self._messages[count - 1] is messages[count - 1]:
                return count
            return min(settled, count)

    def side(self, name: str, start: int, stop: int) -> list[Any] | None:
        """The ``side`` values ``name`` of settled messages ``start..stop-1`` (``None``: not kept)."""
        with self._lock:
            values = self._side.get(name)
            if values is None or not 0 <= start <= stop <= len(values):
                return None
            return values[start:stop]

    def settle(
        self,
        key: Hashable,
        messages: Sequence[Any],
        ir: TelosIR,
        latest: int,
        sent: Sequence[Any] | None = None,
        side: Mapping[str, Sequence[Any]] | None = None,
    ) -> None:
        """Remember messages ``[len(memo), latest)`` of this request as settled history.

        ``sent`` (the wire messages of this request, aligned with ``messages``; engines keep and
        resend them read-only) lets a message that was sent exactly as it came be its own
        snapshot, so the memo holds one copy of it instead of two. Value equality is all the
        snapshot needs: ``==`` ignores the canonical key order the wire form has.

        ``side`` (name → one value per message of this request) is kept with each message the
        memo settles and handed back by ``side``: what a later turn needs of a settled message
        that only the turn it was new could compute (its hash as the application sent it, say).
        A name is kept only while every settle since the memo's first message gave it.
        """
        with self._lock:
            # ``ir`` may end with messages telos appended (a trailing envelope message): never settled.
            if key != self._key or len(ir.messages) < len(messages):
                return
            if sent is not None and len(sent) != len(messages):
                sent = None
            start, stop = len(self._snapshot), latest
            if stop <= start:
                return
            if start > 0 and self._messages[start - 1] is not ir.messages[start - 1]:
                return  # this request did not reuse all of the memo: nothing of it follows the memo
            given = side or {}
            for name in [name for name in self._side if name not in given]:
                del self._side[name]
            for name, values in given.items():
                kept = self._side.setdefault(name, []) if start == 0 else self._side.get(name)
                if kept is None or len(kept) != start or len(values) < stop:
                    self._side.pop(name, None)
                    continue
                kept.extend(values[start:stop])
            for index in range(start, stop):
                message = messages[index]
                wire = sent[index] if sent is not None else None
                # The wire form may stand in for a copy only where ``==`` is exact: no numbers.
                shared = type(wire) is dict and wire == message and not holds_number(message)
                self._snapshot.append(wire if shared else exact_copy(message))
                self._messages.append(ir.messages[index])

    def _reset(self, key: Hashable) -> None:
        self._key = key
        self._truncate(0)
        self.tables.clear()

    def _truncate(self, keep: int) -> None:
        del self._snapshot[keep:]
        del self._messages[keep:]
        for values in self._side.values():
            del values[keep:]


def raw_latest_turn(messages: Sequence[Any], roles: frozenset[str]) -> int:
    """Index of the last message whose role is in ``roles`` (``-1`` if none), on raw wire dicts."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, Mapping) and message.get("role") in roles:
            return index
    return -1
