"""The durable state of a session: hashes, positions, counters and the session's own decisions.

``SessionState`` is what a session store holds (as canonical JSON). It never copies the
conversation: a request is remembered as short hashes and byte sizes of its prompt positions
(``PromptPrint``) and of the application's messages (``AppPrint``). What it does hold verbatim is
what the *session* decided — fold summaries, learned DROP patterns, cache-break records — and the
usage counters. A 1,000-turn session stays well under 1 MB (see ``docs/sessions.md``).

Shape (JSON)::

    {"schema": 3, "id": "chat-42", "requests": 12, "refreshes": 0, "refreshes_since_request": 0,
     "unreported": 0, "breaks": 1, "by_engine": {"anthropic": 12},
     "usage": {"anthropic": {"responses": 12, "raw": .., "read": .., "write": .., "write_1h": ..,
                             "output": ..}},
     "last": {PromptPrint}, "app": {AppPrint}, "last_response": ["msg_…", 11],
     "pins": {"slug": "blob key"}, "slug_folds": [..], "range_folds": [..], "volatile": [..],
     "suspects": [..], "recent_breaks": [..], "filtered": {"digest": "aggressive/1|9120|1480"}}

Integer arrays of a print (``sizes``, ``msg_blocks``) are stored packed: base64 of little-endian
uint32 values. At 1,000 turns they are thousands of numbers, and the C JSON encoder spends ~85 ns
on each (measured), while packing costs a few microseconds in all; schema 1 (plain lists) is still
read. A print's JSON text is encoded once and reused, so the second write of a request (its usage)
does not encode the conversation's positions again.

Why one module, over 500 lines: the state, its prints and its usage counters are one JSON document
with one schema; its reader and writer (``to_json`` / ``from_json``, the packed arrays) must change
together, and each field the round's features added (``filtered``, ``clear_folds``) is a few lines
of each.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from telos_wrap.ir.canon import canonical_json
from telos_wrap.ir.shared import shared_texts
from telos_wrap.sessions.durable.records import CacheBreak, ClearFold, RangeFold, SlugFold, VolatileSpan

__all__ = [
    "HASH_LEN",
    "SCHEMA",
    "AppPrint",
    "EngineUsage",
    "PromptPrint",
    "SessionState",
    "hash_list",
    "short_hash",
]

SCHEMA = 3
#: Schemas ``SessionState.loads`` reads (1 stored integer arrays as plain JSON lists; 1 and 2
#: fingerprinted the system prompt as line hashes only: read, and learning restarts from the next request).
READABLE_SCHEMAS = (1, 2, 3)
#: Hex characters per position hash (48 bits: collisions are irrelevant at a session's scale).
HASH_LEN = 12
#: How many cache breaks the state keeps verbatim (all of them are counted).
RECENT_BREAKS = 16

Segment = Literal["tools", "system", "messages"]


def short_hash(data: bytes) -> str:
    """A ``HASH_LEN``-hex-character BLAKE2b digest of ``data``."""
    return hashlib.blake2b(data, digest_size=HASH_LEN // 2).hexdigest()


def ints(values: Iterable[int] = ()) -> array[int]:
    """A print's integer array: contiguous uint32 (``array("I")``), so a 1,000-turn print is copied
    with one memcpy instead of touching a thousand int objects."""
    return array("I", values)


def pack_ints(values: array[int]) -> str:
    """A uint32 array as base64 of little-endian uint32 (see module docstring)."""
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CI
        values = array("I", values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def unpack_ints(data: Any) -> array[int]:
    """The uint32 array of ``pack_ints`` text, or of a plain JSON list (schema 1)."""
    if isinstance(data, list):
        return ints(int(n) for n in data)
    values = ints()
    values.frombytes(base64.b64decode(str(data), validate=True))
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CI
        values.byteswap()
    return values


def hash_list(joined: str) -> list[str]:
    """The ``HASH_LEN``-character hashes of a concatenation."""
    return [joined[i : i + HASH_LEN] for i in range(0, len(joined), HASH_LEN)]


@dataclass(frozen=True, slots=True)
class PromptPrint:
    """One sent request's prompt as the cache sees it: a hash and a byte size per position.

    Positions are the prompt's blocks in render order (tools, system blocks, then every block of
    every message); markers are not content and are excluded from the hashes.

    Attributes:
        engine / model: the engine adapter and the model.
        params: hash of the request parameters that invalidate the messages cache
            (``tool_choice``, ``thinking``, ``speed``).
        n_tools / n_system: positions in the tools and system segments.
        msg_blocks: positions per message (a uint32 array, never changed in place).
        hashes: the positions' hashes, concatenated (``HASH_LEN`` characters each).
        sizes: the positions' sizes in canonical bytes (a uint32 array, never changed in place).
        cached_upto: the last position covered by what this request cached (its last breakpoint, or
            for automatic-caching engines the last position before the DROP tail); -1 when none.
        breakpoints: ``(position, ttl seconds)`` of each cache anchor.
        at: when the request was prepared (session clock, seconds).
    """

    engine: str
    model: str
    params: str
    n_tools: int
    n_system: int
    msg_blocks: array[int]
    hashes: str
    sizes: array[int]
    cached_upto: int
    breakpoints: tuple[tuple[int, int], ...]
    at: float
    _text: str | None = field(default=None, init=False, repr=False, compare=False)
    #: ``sum(sizes)``, once known (``total_size``; ``prompt_print`` gives it from the memo's totals).
    _total: int = field(default=-1, init=False, repr=False, compare=False)

    @property
    def positions(self) -> int:
        """How many positions the prompt has: tools, system blocks, then every message's blocks
        (``len(sizes)``)."""
        return len(self.sizes)

    def total_size(self) -> int:
        """The sum of ``sizes`` (canonical bytes of the whole prompt), summed at most once per print:
        a sum over a uint32 array makes an int object per position (~50 ns each)."""
        total = self._total
        if total < 0:
            total = sum(self.sizes)
            object.__setattr__(self, "_total", total)  # a cache on a frozen value, same for every reader
        return total

    def with_total(self, total: int) -> PromptPrint:
        """This print, its ``total_size`` known to be ``total`` (the caller summed the same sizes)."""
        object.__setattr__(self, "_total", total)
        return self

    def hash_at(self, index: int) -> str:
        """The ``HASH_LEN``-character hash of position ``index``; unchecked, so the caller keeps ``0 <= index
        < positions`` (past the end it is ``""``)."""
        return self.hashes[index * HASH_LEN : (index + 1) * HASH_LEN]

    def first_difference(self, other: PromptPrint) -> int:
        """The first position where ``self`` and ``other`` differ (``min(len)`` if one is a prefix)."""
        limit = min(self.positions, other.positions)
        if self.hashes[: limit * HASH_LEN] == other.hashes[: limit * HASH_LEN]:
            return limit
        for index in range(limit):
            if self.hash_at(index) != other.hash_at(index):
                return index
        return limit  # pragma: no cover - unreachable

    def bytes_through(self, index: int) -> int:
        """Canonical bytes of positions ``0..index`` (0 for ``index < 0``)."""
        return sum(self.sizes[: index + 1]) if index >= 0 else 0

    def locate(self, index: int) -> tuple[Segment, int | None, int]:
        """``(segment, message, block)`` of position ``index`` (clamped to the prompt's end)."""
        if index < self.n_tools:
            return "tools", None, index
        index -= self.n_tools
        if index < self.n_system:
            return "system", None, index
        index -= self.n_system
        for message, count in enumerate(self.msg_blocks):
            if index < count:
                return "messages", message, index
            index -= count
        return "messages", len(self.msg_blocks), 0

    def to_json(self) -> dict[str, Any]:
        """The print as a stored state holds it: the integer arrays packed (``pack_ints``), breakpoints as
        ``[position, ttl]`` pairs; ``json_text`` is its encoding, made once."""
        return {
            "engine": self.engine,
            "model": self.model,
            "params": self.params,
            "n_tools": self.n_tools,
            "n_system": self.n_system,
            "msg_blocks": pack_ints(self.msg_blocks),
            "hashes": self.hashes,
            "sizes": pack_ints(self.sizes),
            "cached_upto": self.cached_upto,
            "breakpoints": [list(bp) for bp in self.breakpoints],
            "at": self.at,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PromptPrint:
        """The print of a stored ``to_json`` object, packed arrays or schema 1's plain lists
        (``unpack_ints``); a malformed one raises (a missing key, a value of the wrong type), and a session
        that reads it starts again from a fresh state (docs/sessions.md, "When a store entry is
        malformed")."""
        return cls(
            engine=str(data["engine"]),
            model=str(data["model"]),
            params=str(data["params"]),
            n_tools=int(data["n_tools"]),
            n_system=int(data["n_system"]),
            msg_blocks=unpack_ints(data["msg_blocks"]),
            hashes=str(data["hashes"]),
            sizes=unpack_ints(data["sizes"]),
            cached_upto=int(data["cached_upto"]),
            breakpoints=tuple((int(p), int(t)) for p, t in data["breakpoints"]),
            at=float(data["at"]),
        )

    def json_text(self) -> str:
        """``canonical_json(self.to_json())``, encoded once per print."""
        return _cached_text(self)


#: Messages of one request whose envelopes ``AppPrint.dropped`` remembers.
MAX_DROPPED = 8


def _dropped(data: Any) -> tuple[str, ...]:
    """``AppPrint.dropped`` of a stored state (anything malformed reads as none)."""
    if not isinstance(data, list):
        return ()
    return tuple(str(entry) for entry in data[:MAX_DROPPED])


@dataclass(frozen=True, slots=True)
class AppPrint:
    """The application's side of the last request: what it sent, before telos changed anything.

    Attributes:
        messages: one hash per lifted message, concatenated (range folds are checked against it).
        kinds: one character per message: ``u`` user text, ``t`` user with tool results, ``a``
            assistant, ``A`` assistant with tool use, ``o`` anything else.
        system: the fingerprint of the lifted system segment (``volatility.fingerprint``: per PIN
            block, per line a hash, plus skeleton and value hashes for lines with digits) — what
            volatility learning compares; ``None`` when read from a schema-1/2 state.
        slugs: the ref-pool slugs the request had.
        dropped: ``"<message>:<kept hash>"`` for each message new in this request that held DROP-band
            blocks (``prints.kept_hash``: its hash without them), so that the next request, which
            sends that message without its envelope, is still seen to extend this one.
    """

    messages: str
    kinds: str
    system: tuple[str, ...] | None
    slugs: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    _text: str | None = field(default=None, init=False, repr=False, compare=False)

    def message_hashes(self) -> list[str]:
        """The hashes of ``messages`` as a list: one ``HASH_LEN``-character hash per lifted message, in
        order."""
        return hash_list(self.messages)

    def to_json(self) -> dict[str, Any]:
        """The print as a stored state holds it (hashes and kinds, no text); ``dropped`` is written only when
        not empty."""
        return {
            "messages": self.messages,
            "kinds": self.kinds,
            "system": None if self.system is None else list(self.system),
            "slugs": list(self.slugs),
            # Only when there is any: a state without envelopes is stored as before.
            **({"dropped": list(self.dropped)} if self.dropped else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AppPrint:
        """The print of a stored ``to_json`` object: a schema 1-2 state (no ``system``) reads as
        ``system=None``, a malformed ``dropped`` as none; otherwise a malformed one raises (a missing key, a
        value of the wrong type), and a session that reads it starts again from a fresh state
        (docs/sessions.md, "When a store entry is malformed")."""
        return cls(
            messages=str(data["messages"]),
            kinds=str(data["kinds"]),
            # Schemas 1-2 kept ``system_lines`` (line hashes only): not comparable, learning restarts.
            system=None if data.get("system") is None else tuple(str(s) for s in data["system"]),
            slugs=tuple(str(s) for s in data.get("slugs", ())),
            dropped=_dropped(data.get("dropped")),
        )

    def json_text(self) -> str:
        """``canonical_json(self.to_json())``, encoded once per print."""
        return _cached_text(self)


def _cached_text(print_: PromptPrint | AppPrint) -> str:
    text = print_._text
    if text is None:
        text = canonical_json(print_.to_json())
        object.__setattr__(print_, "_text", text)  # a cache on a frozen value, same for every reader
    return text


@dataclass(frozen=True, slots=True)
class EngineUsage:
    """Exact token counters of one engine's responses (disjoint input kinds, see ``UsageReport``).

    Attributes:
        responses: responses whose usage was reported.
        raw / read / write: uncached, cache-read and cache-write input tokens.
        write_1h: the part of ``write`` written with a long TTL (Anthropic ``1h``, OpenAI ``12h``).
        output: output tokens.
    """

    responses: int = 0
    raw: int = 0
    read: int = 0
    write: int = 0
    write_1h: int = 0
    output: int = 0

    def plus(self, raw: int, read: int, write: int, write_1h: int, output: int) -> EngineUsage:
        """New counters: these with one more response and its token counts added. ``write_1h`` is the long-TTL
        part of ``write``, not added to it (``plans.apply_usage`` derives it from the report's
        ``cache_write_by_ttl``)."""
        return EngineUsage(
            self.responses + 1,
            self.raw + raw,
            self.read + read,
            self.write + write,
            self.write_1h + write_1h,
            self.output + output,
        )

    def to_json(self) -> dict[str, int]:
        """Every counter, zeros included, as a stored state holds them."""
        return {
            "responses": self.responses,
            "raw": self.raw,
            "read": self.read,
            "write": self.write,
            "write_1h": self.write_1h,
            "output": self.output,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EngineUsage:
        """The counters of a stored object: a missing counter reads as 0, unknown keys are ignored;
        ``ValueError`` / ``TypeError`` for one that is not a number."""
        return cls(**{key: int(data.get(key, 0)) for key in cls.__dataclass_fields__})


#: The keys written between ``"app"`` and ``"last"`` in ``SessionState.dumps`` (sorted key order).
_BEFORE_LAST = ("applied", "breaks", "by_engine", "clear_folds", "fallbacks", "filtered", "id")


def _empty_str_int() -> dict[str, int]:
    return {}


def _empty_str_str() -> dict[str, str]:
    return {}


@dataclass(frozen=True, slots=True)
class SessionState:
    """Everything a session remembers between requests, in any process (see module docstring)."""

    session_id: str
    requests: int = 0
    refreshes: int = 0
    refreshes_since_request: int = 0
    unreported: int = 0
    breaks: int = 0
    telos_rewrites: int = 0
    #: Requests sent as built because a telos stage failed (fail open); written only when not 0.
    fallbacks: int = 0
    by_engine: Mapping[str, int] = field(default_factory=_empty_str_int)
    usage: Mapping[str, EngineUsage] = field(default_factory=dict)
    last: PromptPrint | None = None
    app: AppPrint | None = None
    last_response_id: str | None = None
    last_response_index: int = -1
    pins: Mapping[str, str] = field(default_factory=dict)
    slug_folds: tuple[SlugFold, ...] = ()
    range_folds: tuple[RangeFold, ...] = ()
    #: Tool results the context policy cleared (``sessions/turns/pressure.py``); stored only when any.
    clear_folds: tuple[ClearFold, ...] = ()
    volatile: tuple[VolatileSpan, ...] = ()
    suspects: tuple[VolatileSpan, ...] = ()
    recent_breaks: tuple[CacheBreak, ...] = ()
    #: Schema name orders first seen (``sessions/learning/orders.py``): ``"key:order"`` strings.
    orders: tuple[str, ...] = ()
    #: Per writer, the sequence number of its latest write (``sessions/durable/merge.py``): how a worker
    #: whose write's answer was lost learns whether it landed. Stored only when not empty.
    applied: Mapping[str, int] = field(default_factory=_empty_str_int)
    #: The tool results the output filter changed (docs/output-filter.md): result digest (call id and
    #: original text, ``bridge.output_filter.result_key``) → ``"filter_id|chars before|chars after"``.
    #: Stored only when not empty.
    filtered: Mapping[str, str] = field(default_factory=_empty_str_str)

    def approx_bytes(self) -> int:
        """About how many bytes this state object holds in memory (a ``MemoryStore``'s byte bound).

        Prints count their hashes and arrays; texts this process shares with other conversations
        (``ir.shared``: a system prompt's print) count once, in the shared table, not here; every
        record (folds, learned spans, breaks) a flat 400 bytes plus its texts, every writer's
        ``applied`` mark 80 bytes plus its name.
        """
        size = 1200 + len(self.session_id)
        last = self.last
        if last is not None:
            size += 300 + len(last.hashes) + 4 * (len(last.sizes) + len(last.msg_blocks))
        app = self.app
        if app is not None:
            size += 200 + len(app.messages) + len(app.kinds) + 60 * len(app.slugs)
            for text in app.system or ():
                size += 0 if shared_texts.holds(text) else 50 + len(text)
        # Every store write counts this: the records are most often none, so no generator is made then.
        if self.slug_folds:
            size += sum(400 + len(fold.summary) for fold in self.slug_folds)
        if self.range_folds:
            size += sum(400 + len(fold.summary) for fold in self.range_folds)
        if self.clear_folds:
            size += sum(200 + len(fold.summary) for fold in self.clear_folds)
        if self.volatile or self.suspects:
            size += 400 * (len(self.volatile) + len(self.suspects))
        if self.recent_breaks:
            size += sum(400 + len(brk.detail) for brk in self.recent_breaks)
        if self.applied:
            size += sum(80 + len(writer) for writer in self.applied)
        if self.filtered:
            size += 100 * len(self.filtered)
        return size + 100 * (len(self.pins) + len(self.orders) + len(self.usage))

    def with_break(self, brk: CacheBreak) -> SessionState:
        """This state with ``brk`` counted and kept among the recent ones."""
        return replace(
            self, breaks=self.breaks + 1, recent_breaks=(*self.recent_breaks, brk)[-RECENT_BREAKS:]
        )

    def to_json(self) -> dict[str, Any]:
        """The state as one JSON object (the shape of the module docstring); ``fallbacks``, ``applied``,
        ``filtered`` and ``clear_folds`` are written only when set, so a state without them is stored byte for
        byte as before. ``dumps`` encodes the same object from the prints' cached texts."""
        data = self._json_without_prints()
        data["last"] = None if self.last is None else self.last.to_json()
        data["app"] = None if self.app is None else self.app.to_json()
        return data

    def _json_without_prints(self) -> dict[str, Any]:
        data = {
            "schema": SCHEMA,
            "id": self.session_id,
            "requests": self.requests,
            "refreshes": self.refreshes,
            "refreshes_since_request": self.refreshes_since_request,
            "unreported": self.unreported,
            "breaks": self.breaks,
            "by_engine": dict(self.by_engine),
            "usage": {engine: usage.to_json() for engine, usage in self.usage.items()},
            "last_response": [self.last_response_id, self.last_response_index],
            "pins": dict(self.pins),
            "slug_folds": [fold.to_json() for fold in self.slug_folds],
            "range_folds": [fold.to_json() for fold in self.range_folds],
            "volatile": [span.to_json() for span in self.volatile],
            "suspects": [span.to_json() for span in self.suspects],
            "recent_breaks": [brk.to_json() for brk in self.recent_breaks],
            "telos_rewrites": self.telos_rewrites,
            "orders": list(self.orders),
        }
        if self.fallbacks:
            data["fallbacks"] = self.fallbacks
        if self.applied:
            data["applied"] = dict(self.applied)
        if self.filtered:
            data["filtered"] = dict(self.filtered)
        if self.clear_folds:  # written only when set: every other session's stored bytes stay as they were
            data["clear_folds"] = [fold.to_json() for fold in self.clear_folds]
        return data

    def dumps(self) -> str:
        """The canonical JSON text stored for this state (``canonical_json(self.to_json())``).

        Written as three encoded parts and the two prints' cached texts, in sorted key order:
        ``{"app": .., <applied .. id>, "last": .., <last_response .. volatile>}``.
        """
        data = self._json_without_prints()
        before = {key: data.pop(key) for key in _BEFORE_LAST if key in data}
        return (
            '{"app":'
            + ("null" if self.app is None else self.app.json_text())
            + ","
            + canonical_json(before)[1:-1]
            + ',"last":'
            + ("null" if self.last is None else self.last.json_text())
            + ","
            + canonical_json(data)[1:-1]
            + "}"
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionState:
        """The state of a stored object of a readable schema (``READABLE_SCHEMAS``; another raises
        ``ValueError`` naming it: a newer telos_wrap wrote it); a malformed one raises (a missing key, a value
        of the wrong type), and a session that reads it starts again from a fresh state (docs/sessions.md,
        "When a store entry is malformed")."""
        if data.get("schema") not in READABLE_SCHEMAS:
            raise ValueError(
                f"unsupported session state schema {data.get('schema')!r} (this telos_wrap reads "
                f"{', '.join(map(str, READABLE_SCHEMAS))}): upgrade telos_wrap, or start a new session id"
            )
        last_response = data.get("last_response") or [None, -1]
        return cls(
            session_id=str(data["id"]),
            requests=int(data["requests"]),
            refreshes=int(data["refreshes"]),
            refreshes_since_request=int(data["refreshes_since_request"]),
            unreported=int(data["unreported"]),
            breaks=int(data["breaks"]),
            by_engine={str(k): int(v) for k, v in data["by_engine"].items()},
            usage={str(k): EngineUsage.from_json(v) for k, v in data["usage"].items()},
            last=None if data.get("last") is None else PromptPrint.from_json(data["last"]),
            app=None if data.get("app") is None else AppPrint.from_json(data["app"]),
            last_response_id=None if last_response[0] is None else str(last_response[0]),
            last_response_index=int(last_response[1]),
            pins={str(k): str(v) for k, v in data["pins"].items()},
            slug_folds=tuple(SlugFold.from_json(f) for f in data["slug_folds"]),
            range_folds=tuple(RangeFold.from_json(f) for f in data["range_folds"]),
            clear_folds=tuple(ClearFold.from_json(f) for f in data.get("clear_folds", ())),
            volatile=tuple(VolatileSpan.from_json(v) for v in data["volatile"]),
            suspects=tuple(VolatileSpan.from_json(v) for v in data.get("suspects", ())),
            recent_breaks=tuple(CacheBreak.from_json(b) for b in data["recent_breaks"]),
            telos_rewrites=int(data.get("telos_rewrites", 0)),
            fallbacks=int(data.get("fallbacks", 0)),
            orders=tuple(str(entry) for entry in data.get("orders", ())),
            applied={str(k): int(v) for k, v in (data.get("applied") or {}).items()},
            filtered={str(k): str(v) for k, v in (data.get("filtered") or {}).items()},
        )

    @classmethod
    def loads(cls, text: str) -> SessionState:
        """Parse the stored JSON text of a state."""
        return cls.from_json(json.loads(text))
