"""Anthropic usage → ``UsageReport``, for a whole message and for a stream.

Vendor facts (anthropic 2.12 ``types/usage.py``, ``message_delta_usage.py``, ``raw_message_*_event.py``):

* ``input_tokens`` excludes cache reads and writes (disjoint counters, our convention as is);
* ``cache_read_input_tokens`` / ``cache_creation_input_tokens`` are Optional; the SDK docs say an
  absent value means nothing was read/written, so with ``input_tokens`` present they read as 0;
* ``cache_creation`` breaks writes down by TTL (``ephemeral_5m_input_tokens``, ``ephemeral_1h_input_tokens``);
* in a stream, ``message_start.message.usage`` carries input and cache counts with the TTL breakdown;
  each ``message_delta.usage`` is cumulative: its non-null fields *replace* earlier values (never add),
  and it has no TTL breakdown, so the one from ``message_start`` is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from telos_wrap.ir.model import UsageReport

__all__ = ["AnthropicStreamUsage", "parse_anthropic_usage"]

_COUNTERS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_anthropic_usage(
    usage: Mapping[str, Any] | None, *, diagnostics: Mapping[str, Any] | None = None
) -> UsageReport | None:
    """Normalize an Anthropic ``usage`` object (as a plain mapping). ``None`` if there is none."""
    if not isinstance(usage, Mapping):
        return None
    raw_input = _int(usage.get("input_tokens"))
    reported = raw_input is not None

    def cache(name: str) -> int | None:
        value = _int(usage.get(name))
        return value if value is not None else (0 if reported else None)

    by_ttl: dict[str, int] | None = None
    creation = usage.get("cache_creation")
    if isinstance(creation, Mapping):
        by_ttl = {
            ttl: count
            for ttl, key in (("5m", "ephemeral_5m_input_tokens"), ("1h", "ephemeral_1h_input_tokens"))
            if (count := _int(creation.get(key))) is not None
        }
    miss = diagnostics.get("cache_miss_reason") if isinstance(diagnostics, Mapping) else None
    return UsageReport(
        engine="anthropic",
        raw_input=raw_input,
        cache_read=cache("cache_read_input_tokens"),
        cache_write=cache("cache_creation_input_tokens"),
        output=_int(usage.get("output_tokens")),
        cache_write_by_ttl=by_ttl,
        cache_miss_reason=miss if isinstance(miss, Mapping) else None,
        raw=dict(usage),
    )


class AnthropicStreamUsage:
    """Feeds on stream events (plain mappings) and keeps the usage seen so far."""

    __slots__ = ("_diagnostics", "_report", "_usage")

    def __init__(self) -> None:
        self._usage: dict[str, Any] | None = None
        self._diagnostics: Mapping[str, Any] | None = None
        self._report: UsageReport | None = None  # of the usage seen so far (None: not made yet)

    def feed(self, event: Mapping[str, Any]) -> None:
        self._report = None
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            if isinstance(message, Mapping) and isinstance(message.get("usage"), Mapping):
                self._usage = dict(message["usage"])
                diagnostics = message.get("diagnostics")
                self._diagnostics = diagnostics if isinstance(diagnostics, Mapping) else None
        elif kind == "message_delta" and isinstance(event.get("usage"), Mapping):
            base = self._usage if self._usage is not None else {}
            for key in _COUNTERS:
                value = event["usage"].get(key)
                if value is not None:
                    base[key] = value
            self._usage = base

    def report(self) -> UsageReport | None:
        # Made once per usage event: a stream's end asks again for the report its last event made.
        if self._report is None:
            self._report = parse_anthropic_usage(self._usage, diagnostics=self._diagnostics)
        return self._report
