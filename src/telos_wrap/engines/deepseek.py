"""The DeepSeek engine: no control plane; canonical bytes and band order are the whole strategy.

Vendor facts (docs/vendor-facts.md, *DeepSeek*): context caching on disk is automatic and
always on; there is no breakpoint, key or TTL parameter; a hit needs a persisted "cache prefix unit"
that the request fully matches (units are persisted at the end of each request's input and output, so
a conversation that resends its history byte for byte is the ideal case). Usage is the partition
``prompt_cache_hit_tokens`` + ``prompt_cache_miss_tokens`` = ``prompt_tokens``; its
``prompt_tokens_details.cached_tokens`` repeats the hit count and is never added to it. Streams report
usage with ``stream_options.include_usage`` (OpenAI convention, accepted by the API).

Sent: nothing beyond the caller's body, except ``stream_options.include_usage`` on streams.
"""

from __future__ import annotations

from telos_wrap.engines._openai_compat import OpenAICompatEngine
from telos_wrap.engines.base import EngineProfile

__all__ = ["DeepSeekEngine"]


class DeepSeekEngine(OpenAICompatEngine):
    """Engine adapter for ``api.deepseek.com``: ordering and canonical bytes only."""

    profile = EngineProfile(
        name="deepseek",
        caching="automatic",
        read_multiplier=0.1,  # hit price is about 1/10 of the miss price (2026-04 cut, §3); it changes often
        write_multiplier=1.0,  # no write fee
    )
    stream_options_accepted = True
