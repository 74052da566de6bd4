"""Clocks that drive cache expiry (TTL) in the emulator."""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Source of monotonic time in seconds; only differences between readings matter."""

    def now(self) -> float:
        """Current time in seconds."""
        ...


class SystemClock:
    """Real time, read from :func:`time.monotonic`."""

    def now(self) -> float:
        """Seconds from an arbitrary fixed point (monotonic)."""
        return time.monotonic()


class ManualClock:
    """A clock that only moves when told to, for TTL tests.

    >>> clock = ManualClock()
    >>> clock.advance(301)   # a 5-minute Anthropic entry written at 0 has now expired
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        """The current manual time in seconds."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (must be >= 0)."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        with self._lock:
            self._now += seconds
