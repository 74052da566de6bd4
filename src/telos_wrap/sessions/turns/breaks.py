"""Cache-break detection: compare a request with the previous one of its session.

A *break* is a request whose prompt diverges from its predecessor's **before** the point the
predecessor cached (its last breakpoint; for automatic-caching engines, the end of its non-DROP
prefix), or that comes after that cache's TTL ran out. Appending turns, moving breakpoints and
pruning a past turn's DROP tail are not breaks: they all happen after the cached point.
"""

from __future__ import annotations

from telos_wrap.sessions.durable.records import BreakReason, CacheBreak
from telos_wrap.sessions.durable.state import PromptPrint

__all__ = ["BYTES_PER_TOKEN", "detect_break"]

#: Rough bytes per token used for ``tokens_at_risk`` (canonical JSON bytes, mostly English text).
BYTES_PER_TOKEN = 4

_RANK = {"tools": 0, "system": 1, "messages": 2}
_REASON: dict[str, BreakReason] = {
    "tools": "tools_changed",
    "system": "system_changed",
    "messages": "history_rewritten",
}


def _tokens(size: int) -> int:
    return max(0, size) // BYTES_PER_TOKEN


def detect_break(previous: PromptPrint | None, current: PromptPrint, index: int) -> CacheBreak | None:
    """The ``CacheBreak`` of request ``index`` (printed as ``current``), or ``None``."""
    if previous is None or previous.cached_upto < 0:
        return None
    cached_bytes = previous.bytes_through(previous.cached_upto)
    if previous.model != current.model:
        return CacheBreak(
            request=index,
            reason="model_changed",
            segment="tools" if previous.n_tools else "system" if previous.n_system else "messages",
            message=None if previous.n_tools or previous.n_system else 0,
            block=0,
            tokens_at_risk=_tokens(cached_bytes),
            detail=f"model changed from {previous.model!r} to {current.model!r}: caches are per model",
        )
    first = previous.first_difference(current)
    if first <= previous.cached_upto:
        # A tool added where there was none is a tools change even though the previous request's
        # position ``first`` was a system block: take the earlier segment of the two prompts.
        segment, message, block = min(
            previous.locate(first), current.locate(first), key=lambda where: _RANK[where[0]]
        )
        reason = _REASON[segment]
        at_risk = _tokens(cached_bytes - previous.bytes_through(first - 1))
        if segment == "messages":
            what = f"message {message} (block {block}) differs from what the previous request sent"
            if first >= current.positions:
                what = f"history was cut at message {message}: the previous request had more"
        elif segment == "tools":
            what = f"tool definition {block} changed (added, removed, reordered or edited)"
        else:
            what = f"system block {block} changed"
        return CacheBreak(
            request=index,
            reason=reason,
            segment=segment,
            message=message,
            block=block,
            tokens_at_risk=at_risk,
            detail=f"{what}; the cached prefix after it (~{at_risk} tokens) must be written again",
        )
    if previous.params != current.params:
        start = previous.n_tools + previous.n_system
        at_risk = _tokens(cached_bytes - previous.bytes_through(start - 1))
        if at_risk > 0:
            return CacheBreak(
                request=index,
                reason="params_changed",
                segment="messages",
                message=0,
                block=0,
                tokens_at_risk=at_risk,
                detail="tool_choice / thinking / speed changed: the messages cache is invalidated",
            )
    return _expired(previous, current, index, cached_bytes)


def _expired(previous: PromptPrint, current: PromptPrint, index: int, cached_bytes: int) -> CacheBreak | None:
    elapsed = current.at - previous.at
    if not previous.breakpoints or elapsed <= min(ttl for _, ttl in previous.breakpoints):
        return None
    alive = [position for position, ttl in previous.breakpoints if ttl >= elapsed]
    kept = max(alive) if alive else -1
    at_risk = _tokens(cached_bytes - previous.bytes_through(kept))
    if at_risk <= 0:
        return None
    segment, message, block = previous.locate(kept + 1)
    return CacheBreak(
        request=index,
        reason="ttl_expired",
        segment=segment,
        message=message,
        block=block,
        tokens_at_risk=at_risk,
        detail=f"{elapsed:.0f}s since the previous request: longer than the cache TTL of the prefix "
        f"after {'the start' if kept < 0 else f'position {kept}'}, so it is likely gone",
    )
