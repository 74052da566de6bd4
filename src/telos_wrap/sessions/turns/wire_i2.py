"""I2 on the wire, checked after every request: telos re-sends what it sent, byte for byte.

I2 (append-only) is a property of the bytes a vendor's cache sees, not of the IR: a message telos
sent on one turn must come out byte-identical on the next, or a cache keyed on the request's bytes
(or on a rendering that distinguishes a string from a list of parts) misses from that message on.
The session's ``PromptPrint`` hashes IR payloads, which cannot see a wire *shape* change (string
content sent as ``[{"type": "text", ...}]`` one turn and as a string the next), so the session
keeps this second, wire-level check.

``WireLedger`` holds, in memory, the conversation messages of the session's last request as this
process sent them (the wire objects themselves, shared read-only with the engines' tables) and the
application's hash of each. On the next request, every message the application sent again
unchanged (same hash at the same index) must be re-emitted with the same bytes, apart from:

* cache markers (``cache_control``, ``prompt_cache_breakpoint``) on a content block: they move;
* the previous request's DROP tail: blocks banded DROP (the moved envelope) are left out of the
  comparison, and a message telos added that is nothing but DROP (the trailing system message of the
  OpenAI path) is not an application message at all.

A difference is a telos bug: ``run_turn`` records it as a ``CacheBreak`` with reason
``telos_rewrote`` (never confused with the caller's own ``history_rewritten``), the session logs it
and counts it (``stats.telos_rewrites``), and ``strict=True`` raises. Changes telos makes on purpose
(a newly learned volatile span leaving the system prompt, the request where markers start to pay)
happen outside the messages or to every message in a documented way and are recorded as such.

Cost: a message whose wire object *is* the one sent last time (settled history the engine reused
from its ``PrefixTables``) is equal by construction; only the others are serialized — the messages
that carried a marker or the envelope last turn or carry one now, and the previous latest turn. So
a turn costs O(what changed), plus one pass of identity comparisons in C. Without a history memo
(range folds active, or a stateless call) every message is a new object and the check is O(n).

The ledger is a cache, like the history memo: it is not part of the durable state. A request whose
predecessor was prepared by another worker (or before the process started) is not checked.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import TYPE_CHECKING, Any

from telos_wrap.ir.canon import MARKER_KEYS, compact_json_encoder
from telos_wrap.ir.model import Band, TelosMessage

if TYPE_CHECKING:
    from telos_wrap.sessions.durable.records import CacheBreak

#: Every ``telos_rewrote`` break this process recorded (the test suite fails on any it did not expect).
_seen: list[CacheBreak] = []
_seen_lock = threading.Lock()


def note_telos_rewrote(brk: CacheBreak) -> None:
    """Count a ``telos_rewrote`` break process-wide (``telos_rewrites_seen``)."""
    with _seen_lock:
        _seen.append(brk)
        del _seen[:-64]


def telos_rewrites_seen(*, clear: bool = False) -> tuple[CacheBreak, ...]:
    """The ``telos_rewrote`` breaks recorded in this process (the last 64); ``clear`` forgets them."""
    with _seen_lock:
        found = tuple(_seen)
        if clear:
            _seen.clear()
        return found


__all__ = [
    "MARKER_KEYS",
    "WireEntry",
    "WireLedger",
    "WireMismatch",
    "conversation_entry",
    "note_telos_rewrote",
    "settled_bytes",
    "telos_rewrites_seen",
]


#: JSON in the key order of the value, not ``canonical_json``: the order is part of the bytes sent,
#: and a re-sorted key is exactly the kind of change this check exists to see.
_as_sent = compact_json_encoder(sort_keys=False, allow_nan=False)


def _unmarked(part: Any) -> Any:
    if type(part) is dict and not MARKER_KEYS.isdisjoint(part):
        return {key: value for key, value in part.items() if key not in MARKER_KEYS}
    return part


def settled_bytes(wire: Any, message: TelosMessage | None) -> bytes:
    """The bytes of wire message ``wire`` that a later turn must repeat.

    Its JSON in the key order it was sent (no re-sorting: order is part of the bytes), without
    cache markers on its content blocks and without the blocks ``message`` (its IR) bands DROP
    (string content: without their text at its end).
    """
    if type(wire) is dict:
        content = wire.get("content")
        if type(content) is str and message is not None:
            # A string that carried its turn's envelope at its end (Chat Completions, string form).
            tail = "".join(
                str(block.payload.get("text", ""))
                for block in message.blocks
                if block.band is Band.DROP and isinstance(block.payload, Mapping)
            )
            if tail and content.endswith(tail):
                wire = {**wire, "content": content[: len(content) - len(tail)]}
        elif type(content) is list:
            blocks = message.blocks if message is not None else ()
            aligned = len(blocks) == len(content)
            parts = [
                _unmarked(part)
                for index, part in enumerate(content)
                if not (aligned and blocks[index].band is Band.DROP)
            ]
            wire = {key: (parts if key == "content" else value) for key, value in wire.items()}
    return _as_sent(wire).encode()


@dataclass(frozen=True, slots=True)
class WireEntry:
    """One request's conversation as sent: wire messages, their IR, the application's hashes.

    Attributes:
        request: the request's index in its session.
        wire: the conversation's wire messages (the last ``len(ir)`` entries of ``messages``).
        ir: the IR message each one was emitted from.
        app: one application hash per message the application sent (``AppPrint.messages``).
        forms: one character per application message, the content form it was sent in (the hash
            does not see a string turned into one text part; the wire does).
        hash_len: characters per hash in ``app``.
        route: API, engine and model: a request on another route is not compared (each engine
            writes its own wire forms, and caches are per model anyway).
    """

    request: int
    wire: tuple[Any, ...]
    ir: tuple[TelosMessage, ...]
    app: str
    forms: str
    hash_len: int
    route: tuple[str, str, str] = ("", "", "")

    def same_as_sent(self, other: WireEntry, index: int) -> bool:
        """True if the application sent message ``index`` identically in both requests."""
        start, stop = index * self.hash_len, (index + 1) * self.hash_len
        return self.app[start:stop] == other.app[start:stop] and self.forms[index] == other.forms[index]

    @property
    def app_messages(self) -> int:
        """How many application messages the entry's print covers: the hashes in ``app`` (``hash_len``
        characters each, none when ``hash_len`` is 0), at most as many as ``forms`` has. The I2 check compares
        no message past it."""
        return min(len(self.app) // self.hash_len if self.hash_len else 0, len(self.forms))


@dataclass(frozen=True, slots=True)
class WireMismatch:
    """The first settled message that was not re-sent byte for byte.

    Attributes:
        message: its index in the conversation.
        offset: the first differing byte of its settled form.
        before / after: a short excerpt of the two forms around ``offset`` (content: DEBUG only).
    """

    message: int
    offset: int
    before: str
    after: str


def conversation_entry(
    request: int,
    ir_messages: Sequence[TelosMessage],
    body: Mapping[str, Any],
    app: str,
    forms: str,
    hash_len: int,
    route: tuple[str, str, str],
) -> WireEntry | None:
    """The ``WireEntry`` of a prepared request, or ``None`` if its messages do not line up with the IR."""
    sent = body.get("messages")
    if not isinstance(sent, list) or len(sent) < len(ir_messages):
        return None
    wire = tuple(sent[len(sent) - len(ir_messages) :])
    return WireEntry(request, wire, tuple(ir_messages), app, forms, hash_len, route)


class WireLedger:
    """The last request's conversation as this process sent it (see module docstring). Not thread-safe:
    the session calls it under its lock."""

    __slots__ = ("_checked", "_last", "_last_bytes")

    def __init__(self) -> None:
        self._last: WireEntry | None = None
        #: ``settled_bytes(wire, None)`` of the remembered entry's messages that a check encoded,
        #: by index: the next check compares them again (a cache of telos' own read-only wire
        #: messages; bound to the entry object it was computed for).
        self._last_bytes: tuple[WireEntry, dict[int, bytes]] | None = None
        #: The same, for the entry the latest ``check`` was given (kept if it is remembered).
        self._checked: tuple[WireEntry, dict[int, bytes]] | None = None

    def check(self, current: WireEntry) -> WireMismatch | None:
        """The first message of ``current`` that breaks I2 against the remembered request, or ``None``.

        Only checked when the remembered request is ``current.request - 1`` (this process sent the
        previous request of the session) on the same API, engine and model.
        """
        previous = self._last
        if (
            previous is None
            or previous.request != current.request - 1
            or previous.hash_len != current.hash_len
            or previous.route != current.route
        ):
            return None
        limit = min(previous.app_messages, current.app_messages, len(previous.wire), len(current.wire))
        cached = self._last_bytes
        known = cached[1] if cached is not None and cached[0] is previous else {}
        encoded: dict[int, bytes] = {}
        self._checked = (current, encoded)
        # Identity first, in C: settled history the engine reused is the very same object.
        changed = compress(range(limit), map(operator.is_not, previous.wire[:limit], current.wire[:limit]))
        for index in changed:
            if not previous.same_as_sent(current, index):
                continue  # the application changed this message: the caller's rewrite, not ours
            old = known.get(index)
            if old is None:
                old = settled_bytes(previous.wire[index], None)
            new = encoded[index] = settled_bytes(current.wire[index], None)
            if old == new:
                continue  # the same bytes, markers aside (a DROP block kept as history included)
            before = settled_bytes(previous.wire[index], previous.ir[index])
            after = settled_bytes(current.wire[index], current.ir[index])
            if before != after:
                offset = next(
                    (i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
                    min(len(before), len(after)),
                )
                window = slice(max(0, offset - 24), offset + 40)
                return WireMismatch(
                    index,
                    offset,
                    before[window].decode(errors="replace"),
                    after[window].decode(errors="replace"),
                )
        return None

    def remember(self, entry: WireEntry | None) -> None:
        """Keep ``entry`` as the last request (``None`` forgets: the next request is not checked)."""
        self._last = entry
        checked = self._checked
        self._last_bytes = checked if checked is not None and checked[0] is entry else None
        self._checked = None
