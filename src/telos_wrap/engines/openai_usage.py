"""Chat-wire usage → ``UsageReport`` per vendor (OpenAI, DeepSeek, vLLM, SGLang, generic), and for streams.

Vendor facts (openai 3.54 ``types/completion_usage.py``; ../shared/reference/vendor-cache-rules.md
§2.5, §3, §4.3, §5.3, §8.1):

* ``prompt_tokens`` *includes* cached and written tokens: ``raw_input = prompt - read - write``;
* OpenAI: ``prompt_tokens_details.cached_tokens`` (read) and ``.cache_write_tokens`` (write, reported
  by gpt-5.6+; older models write for free and do not report it, so it reads as 0);
* DeepSeek: ``prompt_cache_hit_tokens`` + ``prompt_cache_miss_tokens`` partition ``prompt_tokens``;
  its ``prompt_tokens_details.cached_tokens`` repeats the hit count and is never added to it; there is
  no write counter and no write fee (write = 0);
* vLLM: ``cached_tokens`` plus its own ``created_cache_tokens`` (write); the whole
  ``prompt_tokens_details`` is ``null`` unless the server runs ``--enable-prompt-tokens-details``,
  which means *not reported* (``None``), never 0;
* SGLang: ``cached_tokens`` only with ``--enable-cache-report`` (else ``null`` → ``None``); no write
  counter, so a reported read comes with write 0;
* generic (any other OpenAI-compatible server): whichever of the above shapes it sends, plus the flat
  ``usage.cached_tokens`` some servers (Moonshot) use.

Streams (§2.5 "Streaming", §4.3): a chat stream carries usage only with
``stream_options.include_usage``, on a last chunk whose ``choices`` is empty; vLLM/SGLang's
``continuous_usage_stats`` put a cumulative usage on every chunk, with ``prompt_tokens_details`` on the
last one only. Each usage is therefore a cumulative snapshot: later non-null fields replace earlier ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from telos_wrap.ir.model import UsageReport

__all__ = ["OpenAIChatStreamUsage", "parse_openai_chat_usage"]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _report(
    engine: str, usage: Mapping[str, Any], prompt: int | None, read: int | None, write: int | None
) -> UsageReport:
    raw_input = None if prompt is None else prompt - (read or 0) - (write or 0)
    return UsageReport(
        engine=engine,
        raw_input=raw_input,
        cache_read=read,
        cache_write=write,
        output=_int(usage.get("completion_tokens")),
        raw=dict(usage),
    )


def _deepseek(engine: str, usage: Mapping[str, Any], prompt: int | None) -> UsageReport | None:
    """The hit/miss partition, or ``None`` when the usage does not carry it."""
    hit = _int(usage.get("prompt_cache_hit_tokens"))
    miss = _int(usage.get("prompt_cache_miss_tokens"))
    if hit is None and miss is None:
        return None
    if hit is None and prompt is not None and miss is not None:
        hit = prompt - miss
    if miss is None and prompt is not None and hit is not None:
        miss = prompt - hit
    return UsageReport(
        engine=engine,
        raw_input=miss,
        cache_read=hit,
        cache_write=0 if hit is not None else None,  # no write counter, no write fee
        output=_int(usage.get("completion_tokens")),
        raw=dict(usage),
    )


def _details(usage: Mapping[str, Any]) -> Mapping[str, Any] | None:
    details = usage.get("prompt_tokens_details")
    return details if isinstance(details, Mapping) else None


def parse_openai_chat_usage(usage: Mapping[str, Any] | None, *, engine: str) -> UsageReport | None:
    """Normalize a Chat Completions ``usage`` mapping the way ``engine`` reports it; ``None`` if absent."""
    if not isinstance(usage, Mapping):
        return None
    prompt = _int(usage.get("prompt_tokens"))
    # Only DeepSeek sends the partition; when it is there it is the authority, whatever the engine
    # (usage_of() normalizes responses telos did not route with engine "openai").
    partition = _deepseek(engine, usage, prompt)
    if partition is not None:
        return partition
    details = _details(usage)
    read = _int(details.get("cached_tokens")) if details is not None else None
    if engine == "generic" and read is None:
        read = _int(usage.get("cached_tokens"))  # flat field (Moonshot/Kimi, §7)
    write: int | None = None
    if details is not None:
        if engine == "vllm":
            write = _int(details.get("created_cache_tokens"))
        elif engine == "sglang":
            write = None
        else:
            write = _int(details.get("cache_write_tokens"))
            if write is None and engine == "generic":
                write = _int(details.get("created_cache_tokens"))
    if read is not None and write is None and engine != "vllm":
        # OpenAI before gpt-5.6, DeepSeek, SGLang and most servers have no write counter: a reported
        # read with no write field means nothing was billed as a write.
        write = 0
    return _report(engine, usage, prompt, read, write)


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> None:
    for key, value in update.items():
        if value is not None:
            base[key] = dict(value) if isinstance(value, Mapping) else value


class OpenAIChatStreamUsage:
    """Accumulates the usage of a chat stream.

    The patch layer feeds ``{"usage": {...}, "choices": n}`` for every chunk that carries usage; each
    usage is a cumulative snapshot, so non-null fields replace earlier values (never add).
    """

    __slots__ = ("_engine", "_usage")

    def __init__(self, engine: str) -> None:
        self._engine = engine
        self._usage: dict[str, Any] | None = None

    def feed(self, event: Mapping[str, Any]) -> None:
        """Take the ``usage`` of one chunk (chunks without usage are ignored)."""
        usage = event.get("usage")
        if not isinstance(usage, Mapping):
            return
        if self._usage is None:
            self._usage = {}
        _merge(self._usage, usage)

    def report(self) -> UsageReport | None:
        """The usage seen so far, or ``None`` when the stream carried none."""
        return parse_openai_chat_usage(self._usage, engine=self._engine)
