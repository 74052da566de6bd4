"""``SessionStats``: a session's exact counters and what its caching saved, per engine price multipliers.

Costs are in units of *one uncached input token* of the engine, so they need no price list:
``cost = raw + read * read_mult + write_short * write_mult + write_long * write_long_mult`` and the
baseline is every input token sent uncached (``raw + read + write``). The multipliers are the
package's one price table, ``telos_wrap.engines.prices`` (``DEFAULT_PRICES``, with its sources; the
same table prices ``telos-wrap replay`` and the benchmarks).

Override per session with ``session(prices={"anthropic": PriceMultipliers(read=0.025)})`` or
globally by editing ``DEFAULT_PRICES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from telos_wrap.engines.prices import DEFAULT_PRICES, PriceMultipliers
from telos_wrap.sessions.durable.state import EngineUsage, SessionState

__all__ = ["DEFAULT_PRICES", "PriceMultipliers", "SessionStats"]


def _empty_usage() -> dict[str, EngineUsage]:
    return {}


def _removed_chars(filtered: Mapping[str, str]) -> int:
    """Characters the recorded results lost (``"filter_id|before|after"`` per result)."""
    total = 0
    for value in filtered.values():
        parts = value.split("|")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            total += int(parts[1]) - int(parts[2])
    return total


@dataclass(frozen=True, slots=True)
class SessionStats:
    """A snapshot of one session's counters (exact: every update is a compare-and-set).

    Attributes:
        requests: requests sent in the session (refreshes included), by every worker.
        refreshes: of which keep-alive pre-warms (``max_tokens=0``).
        responses_with_usage / unreported: responses whose usage was / was not reported.
        unanswered (property): requests with no response read yet: still in flight, or the call
            never got one (a connection error or timeout: it never reached the vendor, or a vendor
            error status). ``requests = responses_with_usage + unreported + unanswered``.
        raw_input / cache_read / cache_write / output: token totals (input kinds are disjoint).
        cache_breaks: requests that broke the cache (see ``CacheBreak``).
        fallbacks: requests telos sent as the SDK built them because one of its stages failed (fail
            open: no saving on them; ``telos_wrap.failure_counts()`` says which stage).
        telos_rewrites: of which telos' own doing (``telos_rewrote``: a settled message not re-sent
            byte for byte — a telos bug; 0 in every test and benchmark).
        context_folds: requests on which the session's context policy folded (``context_folded``:
            a planned rewrite after the fold point, docs/sessions.md "Context under pressure"); the
            breaks they caused are counted in ``cache_breaks`` under that reason.
        filtered_outputs: tool results the output filter changed (docs/output-filter.md), each once.
        filter_tokens_removed: tokens those results lost when first filtered (≈ characters / 4), each
            result counted once; every later request that carries a result saves them again.
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
    # Left out of the repr: a session without the output filter reads as it always did.
    filtered_outputs: int = field(default=0, repr=False)
    filter_tokens_removed: int = field(default=0, repr=False)
    context_folds: int = field(default=0, repr=False)
    by_engine: Mapping[str, int] = field(default_factory=dict)
    usage: Mapping[str, EngineUsage] = field(default_factory=_empty_usage)
    prices: Mapping[str, PriceMultipliers] = field(default_factory=dict)
    known: bool = field(default=True, repr=False)  # read the attribute: the repr is as before

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
            filtered_outputs=len(state.filtered),
            filter_tokens_removed=_removed_chars(state.filtered) // 4,
            context_folds=len({fold.at for fold in state.clear_folds}),
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
    def unanswered(self) -> int:
        """Requests with no response read (in flight, a connection error, a timeout, an error status)."""
        return max(self.requests - self.responses_with_usage - self.unreported, 0)

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
