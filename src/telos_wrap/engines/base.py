"""Layer 3 contracts: what an engine adapter is and what it returns.

An engine adapter turns a bridged ``TelosIR`` into the wire body its vendor expects (``plan`` decides
cache anchors, ``emit`` writes the body) and turns the vendor's usage fields back into a
``UsageReport``. Adapters are pure: no I/O, no clock, no global state.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, count
from operator import is_not
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable

from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import TelosIR, TelosMessage, UsageReport

__all__ = [
    "Breakpoint",
    "EmitPlan",
    "EngineAdapter",
    "EngineProfile",
    "PrefixTables",
    "ProbeResult",
    "StreamUsage",
    "emit_messages",
]


class PrefixTables:
    """Per-message tables an engine keeps across the turns of one session (a cache, never state).

    ``rows(name, messages)[i]`` is what the engine derived from ``messages[i]`` (and the messages
    before it). Each table remembers the message tuple its rows were derived from, and ``rows``
    cuts it to the longest prefix whose messages are *the very same objects* as the request's: a
    row can never describe a message other than the one it is read for, whatever order requests
    arrive in (retry, rewind, sibling branches, an edit in place, another session's turn). Identity,
    not equality: ``1 == 1.0 == True`` in Python, not on the wire. A session's settled history is
    the same objects turn after turn (the history memo hands them out), so in an append-only
    conversation every settled row is reused; any other message is simply derived again.

    The same rule holds for *folds* (``fold`` / ``keep_fold``): a value folded over the first
    ``count`` messages of a tuple, reused only while those ``count`` messages are the same objects.

    Not thread-safe: a session prepares one request at a time (its lock); the engine appends to the
    list ``rows`` returns (rows for ``messages[len(rows):]``, in order) before the next call.
    """

    __slots__ = ("_checked", "_folds", "_rows")

    def __init__(self) -> None:
        self._rows: dict[str, tuple[Sequence[TelosMessage], list[Any]]] = {}
        self._folds: dict[str, tuple[Sequence[TelosMessage], int, Any]] = {}
        self._checked: tuple[Sequence[TelosMessage], Sequence[TelosMessage], int] | None = None

    def rows(self, name: str, messages: Sequence[TelosMessage]) -> list[Any]:
        """Table ``name``'s rows that hold for ``messages`` (a prefix, maybe empty), now bound to them."""
        found = self._rows.get(name)
        rows: list[Any] = []
        if found is not None:
            source, rows = found
            keep = self._identical(source, messages)
            if keep < len(rows):
                rows = rows[:keep]  # a new list: a body that shares rows never sees them change
        self._rows[name] = (messages, rows)
        return rows

    def fold(self, name: str, messages: Sequence[TelosMessage]) -> tuple[int, Any] | None:
        """``(count, value)`` kept under ``name`` if its first ``count`` messages are ``messages``' own."""
        found = self._folds.get(name)
        if found is None:
            return None
        source, count, value = found
        return (count, value) if self._identical(source, messages) >= count else None

    def keep_fold(self, name: str, messages: Sequence[TelosMessage], count: int, value: Any) -> None:
        """Keep ``value``, folded over ``messages[:count]``, for later requests that share them."""
        if 0 <= count <= len(messages):
            self._folds[name] = (messages, count, value)

    def clear(self) -> None:
        """Forget every table and fold."""
        self._rows.clear()
        self._folds.clear()
        self._checked = None

    def _identical(self, source: Sequence[TelosMessage], messages: Sequence[TelosMessage]) -> int:
        """How many leading messages of ``source`` and ``messages`` are the same objects."""
        if source is messages:
            return len(messages)
        checked = self._checked
        if checked is not None and checked[0] is source and checked[1] is messages:
            return checked[2]  # every table of one request was bound to the same tuple last turn
        # C-level: the index of the first position that is not the same object, else the length.
        same = next(compress(count(), map(is_not, source, messages)), min(len(source), len(messages)))
        self._checked = (source, messages, same)
        return same


def emit_messages(
    ir: TelosIR,
    emit: Callable[[TelosMessage, int, bool], Any],
    marked: Collection[int],
    reuse: PrefixTables | None,
    table_name: str,
) -> list[Any]:
    """The wire form of every message of ``ir``: ``emit(message, index, with_markers)``.

    With ``reuse``, table ``table_name`` keeps each message's form without this turn's markers;
    messages it still holds (``PrefixTables.rows``) and that are not in ``marked`` are taken from
    it (shared, read-only), the rest are written.
    """
    if reuse is None:
        return [emit(message, index, True) for index, message in enumerate(ir.messages)]
    table = reuse.rows(table_name, ir.messages)
    known = len(table)
    messages = table[:]
    for index in marked:
        if index < known:
            messages[index] = emit(ir.messages[index], index, True)
    for index in range(known, len(ir.messages)):
        wire = emit(ir.messages[index], index, True)
        messages.append(wire)
        table.append(emit(ir.messages[index], index, False) if index in marked else wire)
    return messages


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """One cache anchor: which rule placed it, where, and with which TTL.

    Attributes:
        name: ``"BP-T"``, ``"BP-S"``, ``"BP-R"``, ``"BP-mid"``, ``"BP-X"`` or ``"caller"``.
        segment: ``"tools"``, ``"system"`` or ``"messages"``.
        message: message index (``segment == "messages"``), else ``None``.
        block: block index within the tools / system list or the message.
        ttl: ``"5m"``/``"1h"`` (Anthropic) or ``"30m"``/``"12h"`` (OpenAI); ``None`` = vendor default.
        origin: for a caller's marker placed on another block than its own, ``(segment, message,
            block)`` of the block that carries it in the request (see ``engines/anthropic.py``).
    """

    name: str
    segment: Literal["tools", "system", "messages"]
    message: int | None
    block: int
    ttl: str | None = None
    origin: tuple[Literal["tools", "system", "messages"], int | None, int] | None = None


@dataclass(frozen=True, slots=True)
class EmitPlan:
    """What an engine decided for one request (``session.mark()`` returns it as a dry run).

    Attributes:
        breakpoints: cache anchors to write, caller's own first.
        extras: vendor fields to add to the body (``prompt_cache_key``, ``extra_body`` fields...).
        notes: human-readable decisions (markers trimmed, fields withheld and why).
        final_request: the plan treated the request as its conversation's last (the session expected
            it): no cache write past what an earlier request wrote (Anthropic, ``engines/anthropic``).
    """

    breakpoints: tuple[Breakpoint, ...] = ()
    extras: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    notes: tuple[str, ...] = ()
    final_request: bool = False


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """Capabilities as data, so the bridge and session never branch on adapter classes.

    Attributes:
        name: registry name.
        caching: ``"explicit"`` (client breakpoints), ``"automatic"`` (server-side prefix caching).
        max_breakpoints: client breakpoint budget per request (0 when the vendor has none).
        bidirectional: supports probe / cooperative fold (vLLM, SGLang).
        read_multiplier / write_multiplier: price of a cache read / write relative to uncached input.
    """

    name: str
    caching: Literal["explicit", "automatic"]
    max_breakpoints: int = 0
    bidirectional: bool = False
    read_multiplier: float = 0.1
    write_multiplier: float = 1.0


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Answer of ``probe_cache()``: closed-source engines always say ``hit=False``."""

    hit: bool
    cached_tokens: int | None = None
    detail: str = ""


class StreamUsage(Protocol):
    """Accumulates usage from a stream's events (plain mappings), one event at a time."""

    def feed(self, event: Mapping[str, Any]) -> None: ...

    def report(self) -> UsageReport | None: ...


@runtime_checkable
class EngineAdapter(Protocol):
    """An engine adapter (see module docstring)."""

    profile: EngineProfile

    def plan(
        self,
        ir: TelosIR,
        hints: TelosHints,
        *,
        reuse: PrefixTables | None = None,
        fork: int | None = None,
        final: int | None = None,
    ) -> EmitPlan:
        """Decide cache anchors and vendor fields. ``reuse``: the session's ``PrefixTables``.

        ``fork``: when the request diverges from the session's previous one (a rewind or a sibling
        branch), the index of its first message that differs; engines with explicit breakpoints may
        anchor the shared prefix before it (``engines/anthropic.py``, BP-fork). ``None`` otherwise.
        ``final``: when the session expects no later request to read what this one would write past
        its history (the conversation's expected last request: ``sessions/learning/lengths.py``),
        the number of leading messages an earlier request of the session already wrote to the cache;
        engines that pay for cache writes then write nothing past them and still read them
        (``engines/anthropic.py``, *No write nobody reads*). ``None`` otherwise.
        """
        ...

    def emit(self, ir: TelosIR, plan: EmitPlan, *, reuse: PrefixTables | None = None) -> dict[str, Any]:
        """The wire body. ``reuse``: the session's ``PrefixTables`` (e.g. wire forms of settled messages)."""
        ...

    def parse_usage(
        self, usage: Mapping[str, Any] | None, *, diagnostics: Mapping[str, Any] | None = None
    ) -> UsageReport | None:
        """Normalize the vendor's usage object (and, where the vendor has them, its cache diagnostics)."""
        ...

    def stream_usage(self) -> StreamUsage: ...
