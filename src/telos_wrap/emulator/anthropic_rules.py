"""Anthropic Messages prompt-cache rules: breakpoint validation and placement.

Sources: docs/vendor-facts.md (*Anthropic Messages*) and the installed
``anthropic`` SDK types.  The cache itself (lookback, TTL, usage) is in ``anthropic_cache``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import anthropic_error
from .render import Position

MAX_BREAKPOINTS = 4
"""§1.2: "Limit: 4 breakpoints per request (explicit + automatic)"."""

TTL_SECONDS: Mapping[str, float] = {"5m": 300.0, "1h": 3600.0}
"""``CacheControlEphemeralParam.ttl``: "5m" (default) or "1h" (SDK cache_control_ephemeral_param.py)."""

DEFAULT_MIN_CACHEABLE_TOKENS = 1024
"""Minimum for models missing from :data:`MIN_CACHEABLE_TOKENS` (emulator choice)."""

MIN_CACHEABLE_TOKENS: Mapping[str, int] = {
    # §1.3 table ("Cache limitations", quoted via a secondary source; advisory).
    "claude-opus-5": 512,
    "claude-fable-5": 512,
    "claude-mythos-5": 512,
    "claude-fable-5-1": 512,
    "claude-mythos-5-1": 512,
    "claude-opus-4-8": 1024,
    "claude-sonnet-5": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4-0": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-4-0": 1024,
    "claude-sonnet-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-opus-4-7": 2048,  # §1.3 DISAGREE: 2048 in the quoted list, 4096 elsewhere; list wins here
    "claude-mythos-preview": 2048,
    "claude-3-5-haiku": 2048,
    # §1.3 DISAGREE: 1024 in one fetch, 2048 in three sources (incl. a measurement); 2048 here.
    "claude-sonnet-4-6": 2048,
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
}

_DATE_SUFFIX = re.compile(r"-(\d{8}|latest)$")


def normalize_model(model: str) -> str:
    """Model id without a dated / ``-latest`` suffix (aliases share one cache, §1.1 caches are per model)."""
    return _DATE_SUFFIX.sub("", model)


def min_cacheable_tokens(model: str, overrides: Mapping[str, int] | None = None) -> int:
    """Minimum prefix length that a breakpoint must reach to be cached (§1.3)."""
    name = normalize_model(model)
    if overrides and name in overrides:
        return overrides[name]
    return MIN_CACHEABLE_TOKENS.get(name, DEFAULT_MIN_CACHEABLE_TOKENS)


@dataclass(frozen=True)
class Breakpoint:
    """A position where this request may write a cache entry."""

    position: Position
    ttl: str  # "5m" | "1h"
    automatic: bool


_UNCACHEABLE_KINDS = frozenset({"thinking", "redacted_thinking"})
"""§1.2: no ``cache_control`` on thinking_block_param / redacted_thinking_block_param."""


def _text_of(pos: Position) -> str | None:
    text = pos.block.get("text") if pos.kind == "text" else None
    return text if isinstance(text, str) else None


def _check_blocks(positions: Sequence[Position]) -> None:
    """400 for markers on uncacheable blocks and for empty / whitespace-only text blocks."""
    last_message = max((p.message_index for p in positions), default=-1)
    for pos in positions:
        if pos.kind in _UNCACHEABLE_KINDS and pos.markers:
            raise anthropic_error(f"{pos.path}.{pos.kind}.cache_control: Extra inputs are not permitted")
        text = _text_of(pos)
        if text is None:
            continue
        # A trailing assistant prefill is exempt (the API handles it under its own rules).
        if pos.role == "assistant" and pos.message_index == last_message:
            continue
        if text == "" and pos.markers:
            # §1.2: "docs add that empty text blocks can't be cached".
            raise anthropic_error(f"{pos.path}: cache_control cannot be set for empty text blocks")
        if text == "":
            raise anthropic_error(f"{pos.section}: text content blocks must be non-empty")
        if not text.strip():
            raise anthropic_error(f"{pos.section}: text content blocks must contain non-whitespace text")


def _ttl_of(marker: Mapping[str, Any], where: str) -> str:
    if marker.get("type") != "ephemeral":
        raise anthropic_error(f"{where}.cache_control.type: Input should be 'ephemeral'")
    ttl = marker.get("ttl", "5m")
    if ttl not in TTL_SECONDS:
        raise anthropic_error(f"{where}.cache_control.ttl: Input should be '5m' or '1h'")
    return str(ttl)


def _last_cacheable(positions: Sequence[Position]) -> Position | None:
    """Target of top-level automatic caching: "the last cacheable block in the request" (SDK docstring)."""
    for pos in reversed(positions):
        if pos.kind in _UNCACHEABLE_KINDS or _text_of(pos) == "":
            continue
        return pos
    return None


def place_breakpoints(body: Mapping[str, Any], positions: Sequence[Position]) -> list[Breakpoint]:
    """Validate cache markers and return the request's breakpoints in render order.

    Raises :class:`EmulatorHTTPError` (400, Anthropic shape) for: a marker on a thinking block
    or an empty text block, an empty / whitespace-only text block, more than 4 breakpoints
    counting the automatic one, and a longer TTL after a shorter one (§1.2 "TTL ordering").
    """
    _check_blocks(positions)
    breakpoints: list[Breakpoint] = []
    count = 0
    for pos in positions:
        for marker in pos.markers:
            count += 1
            breakpoints.append(Breakpoint(pos, _ttl_of(marker, pos.path), automatic=False))
    top = body.get("cache_control")
    if isinstance(top, Mapping):
        count += 1  # §1.2: automatic caching "uses one of the 4 slots"
        target = _last_cacheable(positions)
        if target is not None:
            breakpoints.append(Breakpoint(target, _ttl_of(top, "body"), automatic=True))
    if count > MAX_BREAKPOINTS:
        raise anthropic_error(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {count}."
        )
    breakpoints.sort(key=lambda bp: (bp.position.index, bp.automatic))
    shortest = float("inf")
    for bp in breakpoints:
        seconds = TTL_SECONDS[bp.ttl]
        if seconds > shortest:
            raise anthropic_error(
                f"{bp.position.path}: a cache_control with ttl='{bp.ttl}' cannot come after a "
                "cache_control with a shorter ttl; longer TTLs must appear earlier in the prompt "
                "(tools, system, then messages)"
            )
        shortest = min(shortest, seconds)
    return breakpoints
