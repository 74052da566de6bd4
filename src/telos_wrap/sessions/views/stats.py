"""``SessionStats``: a session's exact counters and what its caching saved, per engine price multipliers.

Costs are in units of *one uncached input token* of the engine, so they need no price list:
``cost = raw + read * read_mult + write_short * write_mult + write_long * write_long_mult`` and the
baseline is every input token sent uncached (``raw + read + write``). Default multipliers
(docs/vendor-facts.md, the *Prices* line of each vendor):

==========  =====  ===========  ==========  ================================================
engine      read   write (5m)   write (1h)  source
==========  =====  ===========  ==========  ================================================
anthropic   0.1    1.25         2.0         §1.4 (0.025 read on Fable 5.1 / Mythos 5.1)
openai      0.1    1.0          1.0         §2.4 (writes free before GPT-5.6; 5.6+: 1.25)
deepseek    0.1    1.0          1.0         §3 (separate hit price, no write premium)
vllm        0.0    1.0          1.0         self-hosted: a hit costs no compute
sglang      0.0    1.0          1.0         self-hosted
generic     0.1    1.0          1.0         assumption
==========  =====  ===========  ==========  ================================================

Override per session with ``session(prices={"anthropic": PriceMultipliers(read=0.025)})`` or
globally by editing ``DEFAULT_PRICES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from telos_wrap.sessions.durable.state import EngineUsage, SessionState

__all__ = ["DEFAULT_PRICES", "PriceMultipliers", "SessionStats"]


@dataclass(frozen=True, slots=True)
class PriceMultipliers:
    """Prices of cached input relative to uncached input (1.0) for one engine.

    Attributes:
        read: a cache-read token.
        write: a cache-write token at the short TTL (Anthropic 5m, OpenAI 30m).
        write_long: a cache-write token at the long TTL (Anthropic 1h, OpenAI 12h).
    """

    read: float = 0.1
    write: float = 1.0
    write_long: float = 1.0


#: Default multipliers per engine name (module-level so an application can adjust them).
DEFAULT_PRICES: dict[str, PriceMultipliers] = {
    "anthropic": PriceMultipliers(read=0.1, write=1.25, write_long=2.0),
    "openai": PriceMultipliers(read=0.1, write=1.0, write_long=1.0),
    "deepseek": PriceMultipliers(read=0.1, write=1.0, write_long=1.0),
    "vllm": PriceMultipliers(read=0.0, write=1.0, write_long=1.0),
    "sglang": PriceMultipliers(read=0.0, write=1.0, write_long=1.0),
    "generic": PriceMultipliers(read=0.1, write=1.0, write_long=1.0),
}


def _empty_usage() -> dict[str, EngineUsage]:
    return {}


@dataclass(frozen=True, slots=True)
class SessionStats:
    """A snapshot of one session's counters (exact: every update is a compare-and-set).

    Attributes:
        requests: requests sent in the session (refreshes included), by every worker.
        refreshes: of which keep-alive pre-warms (``max_tokens=0``).
        responses_with_usage / unreported: responses whose usage was / was not reported.
        raw_input / cache_read / cache_write / output: token totals (input kinds are disjoint).
        cache_breaks: requests that broke the cache (see ``CacheBreak``).
        fallbacks: requests telos sent as the SDK built them because one of its stages failed (fail
            open: no saving on them; ``telos_wrap.failure_counts()`` says which stage).
        telos_rewrites: of which telos' own doing (``telos_rewrote``: a settled message not re-sent
            byte for byte — a telos bug; 0 in every test and benchmark).
        by_engine: requests per engine.
        usage: the totals per engine.
        prices: the multipliers used for ``cost`` / ``savings``.
        known: ``False`` when the store could not be read (a back-off window of its circuit
            breaker) and this process knew nothing of the session: the counters are then unknown
            (zeros here), not the session's.
    """

    requests: int = 0
    refreshes: int = 0
    responses_with_usage: int = 0
    unreported: int = 0
    raw_input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    cache_breaks: int = 0
    telos_rewrites: int = 0
    fallbacks: int = 0
    by_engine: Mapping[str, int] = field(default_factory=dict)
    usage: Mapping[str, EngineUsage] = field(default_factory=_empty_usage)
    prices: Mapping[str, PriceMultipliers] = field(default_factory=dict)
    known: bool = True

    @classmethod
    def of(cls, state: SessionState, prices: Mapping[str, PriceMultipliers] | None = None) -> SessionStats:
        """The stats of ``state`` with ``prices`` over ``DEFAULT_PRICES``."""
        usage = dict(state.usage)
        return cls(
            requests=state.requests,
            refreshes=state.refreshes,
            responses_with_usage=sum(u.responses for u in usage.values()),
            unreported=state.unreported,
            raw_input=sum(u.raw for u in usage.values()),
            cache_read=sum(u.read for u in usage.values()),
            cache_write=sum(u.write for u in usage.values()),
            output=sum(u.output for u in usage.values()),
            cache_breaks=state.breaks,
            telos_rewrites=state.telos_rewrites,
            fallbacks=state.fallbacks,
            by_engine=dict(state.by_engine),
            usage=usage,
            prices={**DEFAULT_PRICES, **(prices or {})},
        )

    @property
    def total_input(self) -> int:
        """Every input token (``raw_input + cache_read + cache_write``)."""
        return self.raw_input + self.cache_read + self.cache_write

    @property
    def hit_ratio(self) -> float | None:
        """``cache_read / total_input``; ``None`` before any reported input."""
        total = self.total_input
        return self.cache_read / total if total else None

    @property
    def cost(self) -> float:
        """Estimated input cost in uncached-token units, per engine multipliers."""
        total = 0.0
        for engine, u in self.usage.items():
            p = self.prices.get(engine, PriceMultipliers())
            total += u.raw + u.read * p.read + (u.write - u.write_1h) * p.write + u.write_1h * p.write_long
        return total

    @property
    def uncached_cost(self) -> int:
        """What the same input would cost with no caching at all (every token uncached)."""
        return self.total_input

    @property
    def relative_cost(self) -> float | None:
        """``cost / uncached_cost`` (below 1.0: caching saved money); ``None`` before any input."""
        return self.cost / self.uncached_cost if self.uncached_cost else None

    @property
    def savings(self) -> float:
        """``uncached_cost - cost`` in uncached-token units (negative: caching cost more)."""
        return self.uncached_cost - self.cost
