"""Keep-alive refresh with R8 gating (pure): decide whether re-warming a session's prefix pays.

A cache entry lives for its TTL after its last use. Re-warming it before it expires costs one cache
*read* of the prefix (Anthropic: 0.1x input); letting it expire costs a *write* instead of a read on
the next real request (1.25x instead of 0.1x, i.e. 1.15x more). So consecutive keep-alives without a
real request in between pay only while ``n * 0.1 < 1.15``: at most ``REFRESH_THRESHOLD = 11``
(seeds R8: renewing a low-activity session loses money). A refresh is also pointless when the entry
still has plenty of time left, or already expired (then it would be a write, not a keep-alive).

Anthropic's pre-warm is the same request with ``max_tokens: 0`` ("populates the prompt cache without
generating a response", docs/vendor-facts.md §1.2). This module only builds that body; sending it is
``telos_wrap.sessions.refresh_io``'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from telos_wrap.sessions.durable.state import SessionState

__all__ = ["REFRESH_THRESHOLD", "RefreshDecision", "decide_refresh"]

#: Most consecutive keep-alives (with no real request between them) that still pay (R8).
REFRESH_THRESHOLD = 11
_DROPPED_KEYS = ("stream", "diagnostics")


@dataclass(frozen=True, slots=True)
class RefreshDecision:
    """Whether to send a keep-alive now, why, and the body to send.

    Attributes:
        send: True when a refresh pays now.
        reason: one human sentence.
        body: the pre-warm body (the last request as sent, ``max_tokens: 0``, not streamed) when
            ``send``; send it untouched (``telos_hint={"disable": True}``).
        seconds_left: estimated seconds before the cached prefix expires (negative: expired).
        count: keep-alives already sent since the last real request.
    """

    send: bool
    reason: str
    body: dict[str, Any] | None = None
    seconds_left: float = 0.0
    count: int = 0


def decide_refresh(
    state: SessionState, last_body: Mapping[str, Any] | None, now: float, *, margin: float = 60.0
) -> RefreshDecision:
    """Apply the gating described in the module docstring.

    Args:
        state: the session's durable state.
        last_body: the last body this process sent for the session (``None``: nothing to re-send).
        now: the session clock.
        margin: refresh only within this many seconds of expiry.
    """
    last = state.last
    count = state.refreshes_since_request
    if last is None or last_body is None or not last.breakpoints:
        return RefreshDecision(False, "nothing cached to keep warm in this process yet", None, 0.0, count)
    if last.engine != "anthropic":
        return RefreshDecision(
            False, f"engine {last.engine!r} has no client pre-warm (max_tokens=0 is Anthropic's)", count=count
        )
    ttl = min(seconds for _, seconds in last.breakpoints)
    left = last.at + ttl - now
    if left <= 0:
        return RefreshDecision(
            False, "the cached prefix has likely expired: a refresh would be a full write", None, left, count
        )
    if count >= REFRESH_THRESHOLD:
        return RefreshDecision(
            False,
            f"R8: {count} keep-alives since the last request already cost as much as one re-write; "
            "let the prefix expire",
            None,
            left,
            count,
        )
    if left > margin:
        return RefreshDecision(False, f"not due: about {left:.0f}s left before expiry", None, left, count)
    body = {key: value for key, value in last_body.items() if key not in _DROPPED_KEYS}
    body["max_tokens"] = 0
    return RefreshDecision(True, f"about {left:.0f}s left: a keep-alive read pays", body, left, count)
