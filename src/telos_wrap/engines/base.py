"""Layer 3 contracts: what an engine adapter is and what it returns.

An engine adapter turns a bridged ``TelosIR`` into the wire body its vendor expects (``plan`` decides
cache anchors, ``emit`` writes the body) and turns the vendor's usage fields back into a
``UsageReport``. Adapters are pure: no I/O, no clock, no global state.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, MutableMapping
from dataclasses import dataclass, field
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


#: Per-message tables an engine keeps across the turns of one session (a cache, never state):
#: ``tables[name][i]`` is what the engine derived from message ``i`` (and the messages before it).
#: Their owner, the session's history memo, keeps entry ``i`` only while message ``i`` is settled
#: history, so an engine trusts entries below ``ir.settled``, recomputes the rest, and may append
#: entries for every message of the request (the owner trims them when the turn settles).
PrefixTables = MutableMapping[str, list[Any]]


def emit_messages(
    ir: TelosIR,
    emit: Callable[[TelosMessage, int, bool], Any],
    marked: Collection[int],
    reuse: PrefixTables | None,
    table_name: str,
) -> list[Any]:
    """The wire form of every message of ``ir``: ``emit(message, index, with_markers)``.

    With ``reuse``, table ``table_name`` keeps each message's form without this turn's markers;
    settled messages not in ``marked`` are taken from it (shared, read-only), the rest are written.
    """
    if reuse is None:
        return [emit(message, index, True) for index, message in enumerate(ir.messages)]
    table = reuse.setdefault(table_name, [])
    del table[ir.settled :]
    for index in range(len(table), ir.settled):
        table.append(emit(ir.messages[index], index, False))
    messages = table[: ir.settled]
    for index in marked:
        if index < ir.settled:
            messages[index] = emit(ir.messages[index], index, True)
    for index in range(ir.settled, len(ir.messages)):
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
    """

    name: str
    segment: Literal["tools", "system", "messages"]
    message: int | None
    block: int
    ttl: str | None = None


@dataclass(frozen=True, slots=True)
class EmitPlan:
    """What an engine decided for one request (``session.mark()`` returns it as a dry run).

    Attributes:
        breakpoints: cache anchors to write, caller's own first.
        extras: vendor fields to add to the body (``prompt_cache_key``, ``extra_body`` fields...).
        notes: human-readable decisions (markers trimmed, fields withheld and why).
    """

    breakpoints: tuple[Breakpoint, ...] = ()
    extras: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    notes: tuple[str, ...] = ()


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

    def plan(self, ir: TelosIR, hints: TelosHints, *, reuse: PrefixTables | None = None) -> EmitPlan:
        """Decide cache anchors and vendor fields. ``reuse``: the session's ``PrefixTables``."""
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
