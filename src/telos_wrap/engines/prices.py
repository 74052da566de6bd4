"""The package's one price table: cache read / write prices relative to one uncached input token.

Session stats (``SessionStats.cost``), ``telos-wrap replay`` and the benchmarks all price from here
(docs/vendor-facts.md, the *Prices* line of each vendor):

==========  =====  ===========  ==========  ====================================================
engine      read   write (5m)   write (1h)  source
==========  =====  ===========  ==========  ====================================================
anthropic   0.1    1.25         2.0         §1.4 (read 0.025 on Fable 5.1 / Mythos 5.1)
openai      0.1    1.25         1.25        §2.4, GPT-5.6 and later (short and long TTL alike);
                                            before GPT-5.6 a write costs 1.0 (no write fee)
deepseek    0.1    1.0          1.0         §3 (separate hit price, no write premium)
vllm        0.0    1.0          1.0         self-hosted: a hit costs no compute
sglang      0.0    1.0          1.0         self-hosted
generic     0.1    1.0          1.0         assumption (an OpenAI-compatible server)
==========  =====  ===========  ==========  ====================================================

Per model family: ``prices_for(engine, model)``. The per-engine rows (``DEFAULT_PRICES``) are what a
session's stats use, which aggregate by engine: the OpenAI row is the GPT-5.6 family's, and it prices
older models exactly too, because they report no cache writes (written tokens read as 0, §2.5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DEFAULT_PRICES", "PriceMultipliers", "prices_for"]


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
    "openai": PriceMultipliers(read=0.1, write=1.25, write_long=1.25),
    "deepseek": PriceMultipliers(read=0.1, write=1.0, write_long=1.0),
    "vllm": PriceMultipliers(read=0.0, write=1.0, write_long=1.0),
    "sglang": PriceMultipliers(read=0.0, write=1.0, write_long=1.0),
    "generic": PriceMultipliers(read=0.1, write=1.0, write_long=1.0),
}

#: Model families priced apart from their engine's row (docs/vendor-facts.md §1.4, §2.4).
_OPENAI_BEFORE_5_6 = PriceMultipliers(read=0.1, write=1.0, write_long=1.0)
_ANTHROPIC_CHEAP_READ = PriceMultipliers(read=0.025, write=1.25, write_long=2.0)
_CHEAP_READ_MODELS = re.compile(r"claude-(fable|mythos)-5-1")


def prices_for(engine: str, model: object = None) -> PriceMultipliers:
    """The multipliers of ``engine`` (its ``DEFAULT_PRICES`` row, read at call time), or of
    ``model``'s family when it is priced apart; an engine without a row prices a read at 0.1 and a
    write at 1.0."""
    if isinstance(model, str):
        if engine == "openai":
            from telos_wrap.engines.openai import supports_breakpoints

            if not supports_breakpoints(model):
                return _OPENAI_BEFORE_5_6
        elif engine == "anthropic" and _CHEAP_READ_MODELS.match(model):
            return _ANTHROPIC_CHEAP_READ
    return DEFAULT_PRICES.get(engine) or PriceMultipliers()
