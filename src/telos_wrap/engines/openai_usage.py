"""OpenAI-wire usage → ``UsageReport`` per vendor (OpenAI, DeepSeek, vLLM, SGLang, generic), and for streams.

Two wire shapes: Chat Completions (``prompt_tokens``/``completion_tokens``) and Responses
(``input_tokens``/``output_tokens``); ``parse_openai_usage`` tells them apart by their fields.

Vendor facts (openai 3.54 ``types/completion_usage.py``; docs/vendor-facts.md
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
  ``usage.cached_tokens`` some servers (Moonshot) use;
* OpenRouter: ``cached_tokens`` and ``cache_write_tokens`` (the OpenAI names); LiteLLM (its SDK's
  ``ModelResponse`` and its proxy) on a route to Claude: ``cached_tokens`` plus its own
  ``prompt_tokens_details.cache_creation_tokens`` and the top-level ``cache_read_input_tokens`` /
  ``cache_creation_input_tokens``, all inside the inclusive ``prompt_tokens``.

Streams (§2.5 "Streaming", §4.3): a chat stream carries usage only with
``stream_options.include_usage``, on a last chunk whose ``choices`` is empty; vLLM/SGLang's
``continuous_usage_stats`` put a cumulative usage on every chunk, with ``prompt_tokens_details`` on the
last one only. Each usage is therefore a cumulative snapshot: later non-null fields replace earlier ones.

Responses (openai 3.54 ``types/responses/response_usage.py``; §2.5, §8.1, §4.3): ``input_tokens``
*includes* cached and written tokens; ``input_tokens_details.cached_tokens`` (read),
``.cache_write_tokens`` (write) and ``.cache_write_tokens_details.ttl_30m_tokens`` / ``ttl_12h_tokens``
(writes per TTL); ``output_tokens_details.reasoning_tokens`` (included in ``output_tokens``). vLLM's
Responses endpoint always reports both cache counters. A field that is absent is ``None``, never 0.
A Responses stream carries usage once, on its terminal ``response.completed`` event (also
``response.incomplete`` / ``response.failed``), as ``response.usage``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from telos_wrap.ir.model import UsageReport

__all__ = [
    "OpenAIChatStreamUsage",
    "is_responses_usage",
    "parse_openai_chat_usage",
    "parse_openai_responses_usage",
    "parse_openai_usage",
]


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
        read = _int(usage.get("cached_tokens"))  # flat field (Moonshot/Kimi, §7: write not reported)
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
            if write is None:
                write = _int(details.get("cache_creation_tokens"))  # LiteLLM's name (below)
    if write is None and engine not in ("vllm", "sglang"):
        # LiteLLM (SDK and proxy) on a route to Claude: the Anthropic counters beside the inclusive
        # ``prompt_tokens`` (LiteLLM ``AnthropicConfig.calculate_usage``; docs/engines.md, *Routes*).
        write = _int(usage.get("cache_creation_input_tokens"))
    if read is None and engine not in ("vllm", "sglang"):
        read = _int(usage.get("cache_read_input_tokens"))
    if read is not None and write is None and engine != "vllm":
        # OpenAI before gpt-5.6, DeepSeek, SGLang and most servers have no write counter: a reported
        # read with no write field means nothing was billed as a write.
        write = 0
    return _report(engine, usage, prompt, read, write)


def is_responses_usage(usage: Mapping[str, Any]) -> bool:
    """True for the Responses usage shape (``input_tokens`` + ``output_tokens``, no ``prompt_tokens``)."""
    return "prompt_tokens" not in usage and (
        "input_tokens_details" in usage or ("input_tokens" in usage and "output_tokens" in usage)
    )


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def parse_openai_responses_usage(usage: Mapping[str, Any] | None, *, engine: str) -> UsageReport | None:
    """Normalize a Responses ``usage`` mapping (see module docstring); ``None`` if absent."""
    if not isinstance(usage, Mapping):
        return None
    total = _int(usage.get("input_tokens"))
    details = _mapping(usage.get("input_tokens_details"))
    read = _int(details.get("cached_tokens")) if details is not None else None
    write = _int(details.get("cache_write_tokens")) if details is not None else None
    by_ttl: dict[str, int] | None = None
    ttl_details = _mapping(details.get("cache_write_tokens_details")) if details is not None else None
    if ttl_details is not None:
        by_ttl = {
            name: count
            for name, key in (("30m", "ttl_30m_tokens"), ("12h", "ttl_12h_tokens"))
            if (count := _int(ttl_details.get(key))) is not None
        }
    output_details = _mapping(usage.get("output_tokens_details"))
    return UsageReport(
        engine=engine,
        raw_input=None if total is None else total - (read or 0) - (write or 0),
        cache_read=read,
        cache_write=write,
        output=_int(usage.get("output_tokens")),
        cache_write_by_ttl=by_ttl,
        raw=dict(usage),
        reasoning=_int(output_details.get("reasoning_tokens")) if output_details is not None else None,
    )


def parse_openai_usage(usage: Mapping[str, Any] | None, *, engine: str) -> UsageReport | None:
    """Chat Completions or Responses usage, whichever shape ``usage`` has."""
    if isinstance(usage, Mapping) and is_responses_usage(usage):
        return parse_openai_responses_usage(usage, engine=engine)
    return parse_openai_chat_usage(usage, engine=engine)


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> None:
    for key, value in update.items():
        if value is not None:
            base[key] = dict(value) if isinstance(value, Mapping) else value


class OpenAIChatStreamUsage:
    """Accumulates the usage of a chat stream.

    The patch layer feeds ``{"usage": {...}, "choices": n}`` for every chunk that carries usage; each
    usage is a cumulative snapshot, so non-null fields replace earlier values (never add). A Responses
    stream's terminal event is fed as ``{"type": "response.completed", "response": {"usage": ...}}``.
    """

    __slots__ = ("_engine", "_usage")

    def __init__(self, engine: str) -> None:
        self._engine = engine
        self._usage: dict[str, Any] | None = None

    def feed(self, event: Mapping[str, Any]) -> None:
        """Take the ``usage`` of one chunk (chunks without usage are ignored)."""
        usage = event.get("usage")
        response = event.get("response")
        if usage is None and isinstance(response, Mapping):
            usage = response.get("usage")
        if not isinstance(usage, Mapping):
            return
        if self._usage is None:
            self._usage = {}
        _merge(self._usage, usage)

    def report(self) -> UsageReport | None:
        """The usage seen so far, or ``None`` when the stream carried none."""
        return parse_openai_usage(self._usage, engine=self._engine)
