"""What the dashboard shows, as plain values: conversations, their requests, breaks and learning.

Pure: no SDK, no store, no I/O. ``from_replay`` and ``from_store`` fill these values from a replayed
recording or from a session store; ``page`` renders them. A value that holds text the caller wrote
(a break's ``detail``) is ``None`` unless the source is a recording and the user asked for it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestPoint:
    """One request of a conversation as telos sent it, with the vendor's (emulated) usage.

    ``cost`` is in uncached-token units (one uncached input token costs 1); ``native_cost`` is what
    the same request cost as the caller built it, cached by the vendor's own means (Anthropic's
    automatic caching; OpenAI-style engines cache prefixes by themselves), or ``None`` if unknown.
    """

    index: int
    input: int
    read: int
    write: int
    cost: float
    native_cost: float | None = None
    error: str | None = None

    @property
    def uncached(self) -> int:
        """Input tokens neither read from nor written to the cache."""
        return self.input - self.read - self.write


@dataclass(frozen=True, slots=True)
class BreakView:
    """A cache break: where the prompt diverged from its predecessor's cached prefix, and why.

    ``where`` is a position (``system[0]``, ``messages[3][1]``); ``detail`` is the human sentence,
    which may quote the caller's text, so it is kept only on request (``show_text``).
    """

    request: int
    reason: str
    where: str
    tokens_at_risk: int
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class ConversationView:
    """One conversation (a telos session): totals, its requests when known, breaks, what was learned.

    ``requests`` lists per-request points when the source has them (a replay); a store keeps only a
    session's totals, so there it is empty and ``request_count`` says how many there were.
    """

    name: str
    request_count: int
    input: int
    read: int
    write: int
    cost: float
    native_cost: float | None
    breaks: tuple[BreakView, ...] = ()
    break_count: int = 0
    learned_spans: int = 0
    fleet_spans: int = 0
    folds: int = 0
    fallbacks: int = 0
    requests: tuple[RequestPoint, ...] = ()

    @property
    def hit_ratio(self) -> float:
        """Cache reads over all input tokens (0 without input)."""
        return self.read / self.input if self.input else 0.0

    @property
    def relative_cost(self) -> float:
        """Input cost over the uncached cost (1 without input)."""
        return self.cost / self.input if self.input else 1.0

    @property
    def native_relative_cost(self) -> float | None:
        """The native baseline's cost over the uncached cost, if the source knows it."""
        if self.native_cost is None:
            return None
        return self.native_cost / self.input if self.input else 1.0


@dataclass(frozen=True, slots=True)
class Dashboard:
    """Everything on the page: its title, where the figures come from, and the conversations."""

    title: str
    source: str
    engine: str
    conversations: tuple[ConversationView, ...]
    native_label: str = "native caching"

    @property
    def requests(self) -> int:
        return sum(c.request_count for c in self.conversations)

    @property
    def input(self) -> int:
        return sum(c.input for c in self.conversations)

    @property
    def read(self) -> int:
        return sum(c.read for c in self.conversations)

    @property
    def write(self) -> int:
        return sum(c.write for c in self.conversations)

    @property
    def cost(self) -> float:
        return sum(c.cost for c in self.conversations)

    @property
    def native_cost(self) -> float | None:
        costs = [c.native_cost for c in self.conversations]
        if not costs or any(cost is None for cost in costs):
            return None
        return sum(cost for cost in costs if cost is not None)

    @property
    def hit_ratio(self) -> float:
        return self.read / self.input if self.input else 0.0

    @property
    def relative_cost(self) -> float:
        return self.cost / self.input if self.input else 1.0

    @property
    def native_relative_cost(self) -> float | None:
        native = self.native_cost
        if native is None:
            return None
        return native / self.input if self.input else 1.0

    @property
    def break_reasons(self) -> dict[str, int]:
        """How many breaks of each reason, over every conversation (the counted ones)."""
        counts: Counter[str] = Counter()
        for conversation in self.conversations:
            counts.update(brk.reason for brk in conversation.breaks)
        return dict(counts.most_common())
