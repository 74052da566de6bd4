"""The generic OpenAI-compatible engine: for any endpoint telos does not recognise.

It only orders (tools sorted, DROP after everything cacheable) and canonicalizes (sorted keys), which
helps every prefix cache and can upset none. It sends **no vendor field at all** — not even
``stream_options``, which several OpenAI-compatible servers reject (docs/vendor-facts.md §7: wandb/weave
PR #4563 on Mistral, litellm PR #35290, earendil-works/pi PR #596) — so a stream reports usage only when
the caller asked for it. Name the server in ``patch(engines={base_url: "vllm"})`` (or a hint) to get
more.

Usage is parsed liberally: OpenAI's ``prompt_tokens_details``, DeepSeek's hit/miss partition, vLLM's
``created_cache_tokens`` and the flat ``cached_tokens`` some servers send (docs/vendor-facts.md §7).
"""

from __future__ import annotations

from telos_wrap.engines._openai_compat import OpenAICompatEngine
from telos_wrap.engines.base import EngineProfile

__all__ = ["GenericOpenAIEngine"]


class GenericOpenAIEngine(OpenAICompatEngine):
    """Engine adapter for unknown OpenAI-compatible servers: order and canonical bytes, nothing else."""

    profile = EngineProfile(
        name="generic",
        caching="automatic",
        read_multiplier=1.0,  # unknown server: no discount assumed
        write_multiplier=1.0,
    )
    stream_options_accepted = False
