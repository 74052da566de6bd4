"""Anthropic prompt cache: write at breakpoints, read by 20-position lookback, TTL, usage.

Rules (docs/vendor-facts.md §1.1/§1.2/§1.5):

1. a cache write happens only at a breakpoint (one entry = the prefix ending at that block);
2. a read looks backward from each breakpoint for an entry an earlier request wrote;
3. the lookback covers 20 positions counting the breakpoint itself; a run of consecutive
   ``tool_use`` blocks is one position, likewise a run of ``tool_result`` blocks; the first
   entry found ends the search for that breakpoint;
4. entries are per model, live 5 minutes (default) or 1 hour, measured from the start of the
   request that wrote or last read them ("Each hit refreshes the TTL");
5. below the model's minimum cacheable length nothing is cached (no error, counters 0);
6. usage is disjoint: ``input_tokens`` + ``cache_creation_input_tokens`` +
   ``cache_read_input_tokens`` = total input (SDK ``Message.usage`` docstring).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .anthropic_rules import TTL_SECONDS, Breakpoint, min_cacheable_tokens, normalize_model
from .entry_store import Entry, EntryStore
from .render import Position, RenderedPrompt

LOOKBACK_POSITIONS = 20
"""§1.1: "the lookback window is 20 positions per breakpoint, counting the breakpoint itself"."""

_RUN_KINDS = frozenset({"tool_use", "tool_result"})


def lookback_units(positions: Sequence[Position]) -> list[int]:
    """Lookback position number of each block; a run of tool_use (or tool_result) blocks shares one."""
    units: list[int] = []
    unit = -1
    prev_kind = ""
    for pos in positions:
        if not (pos.kind in _RUN_KINDS and pos.kind == prev_kind and pos.section == "messages"):
            unit += 1
        units.append(unit)
        prev_kind = pos.kind
    return units


@dataclass(frozen=True)
class AnthropicUsage:
    """Input-side usage of one request, exactly as the API reports it."""

    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    ephemeral_5m_input_tokens: int
    ephemeral_1h_input_tokens: int

    def to_json(self, output_tokens: int) -> dict[str, Any]:
        """``usage`` object of a ``Message`` (SDK types/usage.py, cache_creation.py)."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": self.ephemeral_1h_input_tokens,
            },
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }


class AnthropicCache:
    """Prefix cache of the Anthropic flavour (thread-safe)."""

    def __init__(self, min_tokens_overrides: Mapping[str, int] | None = None) -> None:
        self._store = EntryStore()
        self._lock = threading.Lock()
        self._min_overrides = dict(min_tokens_overrides or {})

    def reset(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._store.clear()

    def _lookback(
        self, ns: str, positions: Sequence[Position], units: Sequence[int], start: int, now: float
    ) -> tuple[int, Entry] | None:
        """Closest written entry at or before ``start`` within the lookback window."""
        j = start
        while j >= 0 and units[start] - units[j] < LOOKBACK_POSITIONS:
            entry = self._store.get(ns, positions[j].hash, now)
            if entry is not None:
                return j, entry
            j -= 1
        return None

    def process(
        self, model: str, prompt: RenderedPrompt, breakpoints: Sequence[Breakpoint], now: float
    ) -> AnthropicUsage:
        """Read and write the cache for one request that starts at ``now``; return its usage."""
        positions = prompt.positions
        ns = normalize_model(model)
        minimum = min_cacheable_tokens(model, self._min_overrides)
        with self._lock:
            units = lookback_units(positions)
            read_index = -1
            read_entry: Entry | None = None
            for bp in breakpoints:
                found = self._lookback(ns, positions, units, bp.position.index, now)
                if found is not None and found[0] > read_index:
                    read_index, read_entry = found
            read = positions[read_index].cum_tokens if read_index >= 0 else 0
            if read_entry is not None:
                self._store.touch(read_entry, now)
            written = [bp for bp in breakpoints if bp.position.cum_tokens >= minimum]
            for bp in written:
                self._store.put(ns, bp.position.hash, bp.position.cum_tokens, TTL_SECONDS[bp.ttl], now)
        by_ttl = {"5m": 0, "1h": 0}
        boundary = read
        for bp in written:  # render order; longer TTLs come first (validated)
            if bp.position.cum_tokens > boundary:
                by_ttl[bp.ttl] += bp.position.cum_tokens - boundary
                boundary = bp.position.cum_tokens
        creation = by_ttl["5m"] + by_ttl["1h"]
        return AnthropicUsage(
            input_tokens=prompt.total_tokens - read - creation,
            cache_read_input_tokens=read,
            cache_creation_input_tokens=creation,
            ephemeral_5m_input_tokens=by_ttl["5m"],
            ephemeral_1h_input_tokens=by_ttl["1h"],
        )
