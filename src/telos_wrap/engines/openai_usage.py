"""OpenAI-wire usage → ``UsageReport`` (OpenAI, DeepSeek, vLLM, SGLang, generic).

Vendor facts (openai 3.54 ``types/completion_usage.py``; vendor-cache-rules.md §2 to §5):

* ``prompt_tokens`` *includes* cached and written tokens: ``raw_input = prompt - read - write``;
* OpenAI: ``prompt_tokens_details.cached_tokens`` (read), ``.cache_write_tokens`` (write, gpt-5.6+);
* vLLM: the same ``cached_tokens`` plus its own ``created_cache_tokens`` (write), and the whole
  ``prompt_tokens_details`` is ``null`` unless the server runs ``--enable-prompt-tokens-details``;
* SGLang: ``cached_tokens`` only with ``--enable-cache-report``; no write counter;
* DeepSeek: ``prompt_cache_hit_tokens`` + ``prompt_cache_miss_tokens`` partition ``prompt_tokens``;
  its ``prompt_tokens_details.cached_tokens`` repeats the hit count and must never be added to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from telos_wrap.ir.model import UsageReport

__all__ = ["parse_openai_chat_usage"]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_openai_chat_usage(usage: Mapping[str, Any] | None, *, engine: str) -> UsageReport | None:
    """Normalize a Chat Completions ``usage`` mapping for ``engine``; ``None`` if absent."""
    if not isinstance(usage, Mapping):
        return None
    prompt = _int(usage.get("prompt_tokens"))
    output = _int(usage.get("completion_tokens"))
    hit = _int(usage.get("prompt_cache_hit_tokens"))
    miss = _int(usage.get("prompt_cache_miss_tokens"))
    if hit is not None or miss is not None:  # DeepSeek partition
        hits = hit if hit is not None else (prompt - miss if prompt is not None and miss is not None else None)
        misses = miss if miss is not None else (prompt - hit if prompt is not None and hit is not None else None)
        return UsageReport(
            engine=engine,
            raw_input=misses,
            cache_read=hits,
            cache_write=0 if hits is not None else None,  # DeepSeek has no write counter and no write fee
            output=output,
            raw=dict(usage),
        )
    details = usage.get("prompt_tokens_details")
    read: int | None = None
    write: int | None = None
    if isinstance(details, Mapping):
        read = _int(details.get("cached_tokens"))
        write = _int(details.get("cache_write_tokens"))
        if write is None:
            write = _int(details.get("created_cache_tokens"))
        if read is not None and write is None and engine in ("openai", "deepseek", "sglang", "generic"):
            write = 0
    if prompt is None:
        return UsageReport(
            engine=engine, raw_input=None, cache_read=read, cache_write=write, output=output, raw=dict(usage)
        )
    raw_input = prompt - (read or 0) - (write or 0)
    return UsageReport(
        engine=engine, raw_input=raw_input, cache_read=read, cache_write=write, output=output, raw=dict(usage)
    )
