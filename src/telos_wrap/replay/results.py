"""What a replay measured: per-turn usage, per-run totals, and the price multipliers used."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from telos_wrap.engines.prices import DEFAULT_PRICES
from telos_wrap.engines.prices import prices_for as table_prices
from telos_wrap.engines.registry import get_engine

# -- results ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prices:
    """Price of a cache read / write relative to one uncached input token."""

    read: float
    write: float
    write_1h: float = 2.0


def prices_for(engine: str, model: object = None) -> Prices:
    """The multipliers of ``engine`` (or ``model``'s family): the package's one price table,
    ``telos_wrap.engines.prices``, the same one session stats use. An engine the table has no row
    for is priced by its adapter's profile."""
    if engine not in DEFAULT_PRICES:
        profile = get_engine(engine).profile
        return Prices(
            read=profile.read_multiplier, write=profile.write_multiplier, write_1h=profile.write_multiplier
        )
    found = table_prices(engine, model)
    return Prices(read=found.read, write=found.write, write_1h=found.write_long)


@dataclass(frozen=True, slots=True)
class ReplayedTurn:
    """Usage of one replayed request (all zero, with ``error`` set, when the server refused it)."""

    session: str
    turn: int
    raw: int = 0
    read: int = 0
    write: int = 0
    write_1h: int = 0
    output: int = 0
    reported: bool = True
    error: str | None = None

    @property
    def input(self) -> int:
        """Every input token of the request (uncached + read + written)."""
        return self.raw + self.read + self.write

    def cost(self, prices: Prices) -> float:
        """Input cost in uncached-token units."""
        five_minute = self.write - self.write_1h
        return (
            self.raw + self.read * prices.read + five_minute * prices.write + self.write_1h * prices.write_1h
        )


@dataclass(slots=True)
class RunResult:
    """One strategy replayed over some sessions."""

    strategy: str
    engine: str
    prices: Prices
    turns: list[ReplayedTurn] = field(default_factory=list)
    fallbacks: int = 0

    @property
    def input(self) -> int:
        """Every input token of the run's requests."""
        return sum(t.input for t in self.turns)

    @property
    def read(self) -> int:
        """Input tokens read from the cache, over the run."""
        return sum(t.read for t in self.turns)

    @property
    def write(self) -> int:
        """Input tokens written to the cache (5-minute and 1-hour), over the run."""
        return sum(t.write for t in self.turns)

    @property
    def cost(self) -> float:
        """Input cost of the run in uncached-token units (``ReplayedTurn.cost`` summed)."""
        return sum(t.cost(self.prices) for t in self.turns)

    @property
    def errors(self) -> int:
        """Requests the server refused."""
        return sum(1 for t in self.turns if t.error is not None)

    @property
    def hit_ratio(self) -> float:
        """Cache reads / all input tokens."""
        return self.read / self.input if self.input else 0.0

    @property
    def cost_ratio(self) -> float:
        """Input cost relative to sending the same tokens uncached."""
        return self.cost / self.input if self.input else 1.0

    def totals(self) -> dict[str, Any]:
        """The run's totals as plain JSON."""
        return {
            "strategy": self.strategy,
            "requests": len(self.turns),
            "input_tokens": self.input,
            "cache_read": self.read,
            "cache_write": self.write,
            "hit_ratio": round(self.hit_ratio, 6),
            "cost_vs_uncached": round(self.cost_ratio, 6),
            "errors": self.errors,
            "telos_fallbacks": self.fallbacks,
        }
