"""How long an application's conversations run, and when a cache write would not be read.

A cache write costs more than sending the same tokens uncached (Anthropic: 1.25x, a read 0.1x;
docs/vendor-facts.md §1.4), so it pays only if a later request reads it. What the tools and the shared
system text write is read by every later conversation of the application; what a conversation
writes of its own messages (its *tail*) is read only by its own next request. On the request that
ends a conversation that write is lost: in a two-request conversation it is most of what telos
adds to the bill (issue 34).

Two things tell telos that a request is a conversation's last:

* the caller: ``telos_hint={"expected_turns": N}`` (on the call or the session) — request ``N`` and
  any after it are expected to be the last;
* the fleet (fleet learning on, ``sessions/learning/fleet.py``): per application, in the tenant's
  namespace, ``reached[k]`` counts the conversations seen to make at least ``k + 1`` requests
  (``Lengths``; counts, no content). Of the ``reached[k - 1]`` conversations that made ``k``
  requests, ``reached[k]`` went on: that share is the chance this one goes on after request ``k``.
  Counted only once ``MIN_SEEN`` conversations made ``k`` requests, and up to ``MAX_TRACKED``
  requests (a longer conversation is not short: it always writes).

A write of ``T`` tokens costs ``(w - 1) T`` more than sending them uncached and saves ``(1 - r) T``
on each read: with a chance ``p`` of being read it pays when ``p (1 - r) >= w - 1`` (``write_pays``;
Anthropic: ``p >= 0.28``). Below that, the request is planned as the last one
(``final_reason``): the engine writes nothing past what an earlier request of the conversation
wrote (``engines/anthropic.py``, *No write nobody reads*). If the conversation does go on, its next
request reads that earlier entry (the lookback finds it) and writes the rest: one request's tail
paid uncached, never a break. Pure; the counts' store I/O is ``fleet_io.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_TRACKED", "MIN_SEEN", "NO_LENGTHS", "Lengths", "count_reached", "final_reason", "write_pays"]

#: Requests per conversation counted (a conversation longer than this is simply long).
MAX_TRACKED = 16
#: Conversations that must have made ``k`` requests before their share that went on is used.
MIN_SEEN = 5
#: The largest count kept (a stored entry with more is malformed).
_MAX_COUNT = 1 << 40


@dataclass(frozen=True, slots=True)
class Lengths:
    """``reached[k]``: conversations of an application seen to make at least ``k + 1`` requests."""

    reached: tuple[int, ...] = ()

    @classmethod
    def one(cls, requests: int) -> Lengths:
        """What one conversation adds when it makes its request number ``requests`` (1-based)."""
        if not 1 <= requests <= MAX_TRACKED:
            return cls()
        return cls((0,) * (requests - 1) + (1,))

    def plus(self, other: Lengths) -> Lengths:
        """The counts of both (element-wise sum)."""
        size = max(len(self.reached), len(other.reached))
        mine = self.reached + (0,) * (size - len(self.reached))
        theirs = other.reached + (0,) * (size - len(other.reached))
        return Lengths(tuple(min(_MAX_COUNT, a + b) for a, b in zip(mine, theirs, strict=True)))

    def goes_on(self, requests: int) -> float | None:
        """The share of conversations that made ``requests`` requests and made another, or ``None``
        when fewer than ``MIN_SEEN`` made ``requests`` (or ``requests`` is past ``MAX_TRACKED``)."""
        if not 1 <= requests < MAX_TRACKED or requests > len(self.reached):
            return None
        seen = self.reached[requests - 1]
        if seen < MIN_SEEN:
            return None
        went_on = self.reached[requests] if requests < len(self.reached) else 0
        return min(1.0, went_on / seen)

    def to_json(self) -> list[int]:
        """The counts as stored in the application's fleet entry: the list ``reached`` (``from_json`` reads it
        back)."""
        return list(self.reached)

    @classmethod
    def from_json(cls, data: Any) -> Lengths:
        """The counts of a stored list; anything malformed reads as none (never raises)."""
        if not isinstance(data, list) or len(data) > MAX_TRACKED:
            return cls()
        if not all(type(n) is int and 0 <= n <= _MAX_COUNT for n in data):
            return cls()
        return cls(tuple(data))

    def __bool__(self) -> bool:
        return any(self.reached)


def count_reached(reached: tuple[int, ...], requests: int) -> tuple[int, ...]:
    """``Lengths(reached).plus(Lengths.one(requests)).reached``, without the objects (counted on
    every request of a conversation): ``reached`` with one more conversation at request ``requests``."""
    if not 1 <= requests <= MAX_TRACKED:
        return reached
    if len(reached) < requests:
        reached += (0,) * (requests - len(reached))
    return (*reached[: requests - 1], min(_MAX_COUNT, reached[requests - 1] + 1), *reached[requests:])


#: No counts (a shared default: ``Lengths`` is frozen).
NO_LENGTHS = Lengths()


def write_pays(goes_on: float, write: float, read: float) -> bool:
    """Whether a write read with chance ``goes_on`` pays (module docstring): ``p (1 - r) >= w - 1``."""
    return goes_on * (1.0 - read) >= write - 1.0


def final_reason(
    requests: int,
    expected_turns: int | None,
    lengths: Lengths | None,
    prices: Sequence[float],
) -> str | None:
    """Why request number ``requests`` (1-based) is planned as its conversation's last, or ``None``.

    ``prices``: the engine's ``(read, write)`` multipliers; an engine whose writes cost no more
    than uncached input (``write <= 1``) never skips a write.
    """
    read, write = prices
    if write <= 1.0:
        return None
    if expected_turns is not None:
        if requests >= expected_turns:
            return f"telos_hint expected_turns={expected_turns}: this is request {requests}"
        return None
    if lengths is None:
        return None
    share = lengths.goes_on(requests)
    if share is None or write_pays(share, write, read):
        return None
    seen = lengths.reached[requests - 1]
    return (
        f"of the {seen} conversations of this application seen to make {requests} request(s), "
        f"{share:.0%} made another (fleet learning); a write pays only if at least "
        f"{(write - 1.0) / (1.0 - read):.0%} do"
    )
