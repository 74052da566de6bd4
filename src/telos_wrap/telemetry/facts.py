"""What telos tells OpenTelemetry about one call, as plain attribute dicts (no OpenTelemetry here).

Everything is read from what telos already knows: the session's ``RequestRecord`` of the request
(rewritten or untouched and why, breakpoints, transformations, cache break), the ``UsageReport`` of
its response and the session's price multipliers. Never prompt content, never a raw id or key: the
session is a hash, a cache break is its reason and location (``messages[3][1]``), an untouched
request its reason code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from telos_wrap.ir.model import UsageReport
from telos_wrap.sessions.durable.records import CacheBreak
from telos_wrap.sessions.hashed import session_hash
from telos_wrap.sessions.views.explain import RequestRecord
from telos_wrap.sessions.views.stats import DEFAULT_PRICES, PriceMultipliers

__all__ = [
    "CACHE_CREATION",
    "CACHE_READ",
    "break_event",
    "caller_marked",
    "latest_conventions",
    "outcome",
    "provider_key",
    "request_attributes",
    "savings",
    "usage_attributes",
]

#: The GenAI conventions' cache attributes (``gen_ai.usage.*``, docs/observability.md).
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"


def latest_conventions() -> bool:
    """Whether ``OTEL_SEMCONV_STABILITY_OPT_IN`` asks for the latest experimental GenAI conventions
    (``gen_ai_latest_experimental``): ``gen_ai.provider.name`` instead of v1.36's ``gen_ai.system``."""
    values = os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "")
    return "gen_ai_latest_experimental" in (value.strip() for value in values.split(","))


def provider_key() -> str:
    """The attribute that names the vendor under the conventions in effect (``latest_conventions``)."""
    return "gen_ai.provider.name" if latest_conventions() else "gen_ai.system"


def filtered_chars(record: RequestRecord | None) -> int:
    """Characters the output filter took out of the tool results it filtered first in this request."""
    if record is None or record.explained is None:
        return 0
    return record.explained.filtered_chars


def outcome(record: RequestRecord | None, fell_back: bool) -> tuple[str, str | None]:
    """``(outcome, reason)``: ``rewritten``, ``untouched`` (with its reason code) or ``fell_back``."""
    if fell_back:
        return "fell_back", None
    if record is None:
        return "untouched", "unknown"
    if record.kind == "refresh":
        return "untouched", "refresh"
    if record.kind != "telos" or record.explained is None:
        return "untouched", "disabled"
    if record.explained.untouched is not None:
        return "untouched", record.explained.untouched.code
    return "rewritten", None


def request_attributes(
    engine: str, session_id: str, index: int, record: RequestRecord | None, fell_back: bool
) -> dict[str, Any]:
    """The ``telos.*`` attributes of a call, known once telos prepared its request."""
    attributes: dict[str, Any] = {"telos.engine": engine, "telos.session": session_hash(session_id)}
    if index < 0:  # a token count or a compaction: not a turn of the session, no record of it
        attributes["telos.turn"] = False
        return attributes
    kind, reason = outcome(record, fell_back)
    attributes["telos.outcome"] = kind
    attributes["telos.rewritten"] = kind == "rewritten"
    attributes["telos.request.index"] = index
    if reason is not None:
        attributes["telos.untouched.reason"] = reason
    explained = record.explained if record is not None else None
    if explained is not None and explained.untouched is None:
        attributes["telos.breakpoints"] = len(explained.breakpoints)
        names = sorted({name for name, *_ in explained.breakpoints})
        if names:
            attributes["telos.breakpoints.kinds"] = names
        kinds = [kind for kind, *_ in explained.records]
        attributes["telos.units.moved"] = kinds.count("drop-moved")
        attributes["telos.units.pruned"] = kinds.count("drop-pruned")
        if kinds:
            attributes["telos.transformations"] = sorted(set(kinds))
    if record is not None and record.cache_break is not None:
        attributes["telos.cache_break"] = record.cache_break.reason
    return attributes


def break_event(brk: CacheBreak) -> dict[str, Any]:
    """The attributes of a ``telos.cache_break`` span event: reason, location, tokens at risk."""
    attributes: dict[str, Any] = {
        "telos.break.reason": brk.reason,
        "telos.break.location": brk.where,
        "telos.break.segment": brk.segment,
        "telos.break.block": brk.block,
        "telos.break.tokens_at_risk": brk.tokens_at_risk,
        "telos.request.index": brk.request,
    }
    if brk.message is not None:
        attributes["telos.break.message"] = brk.message
    return attributes


def _write_long(report: UsageReport) -> int:
    by_ttl = report.cache_write_by_ttl or {}
    return int(by_ttl.get("1h", 0)) + int(by_ttl.get("12h", 0))


def usage_attributes(report: UsageReport) -> dict[str, Any]:
    """The cache attributes of a response (only those it reported) and telos' normalized split."""
    attributes: dict[str, Any] = {}
    if report.cache_read is not None:
        attributes[CACHE_READ] = report.cache_read
    if report.cache_write is not None:
        attributes[CACHE_CREATION] = report.cache_write
    if report.raw_input is not None:
        attributes["telos.usage.uncached_input_tokens"] = report.raw_input
    ratio = report.hit_ratio
    if ratio is not None:
        attributes["telos.usage.hit_ratio"] = ratio
    return attributes


def savings(report: UsageReport, prices: Mapping[str, PriceMultipliers]) -> float | None:
    """Uncached-token units this response saved against sending it uncached (``SessionStats.savings``'
    share of it: the same multipliers, ``DEFAULT_PRICES`` under the session's), ``None`` unreported."""
    if report.raw_input is None:
        return None
    p = prices.get(report.engine) or DEFAULT_PRICES.get(report.engine) or PriceMultipliers()
    read, write = report.cache_read or 0, report.cache_write or 0
    long = _write_long(report)
    cost = report.raw_input + read * p.read + (write - long) * p.write + long * p.write_long
    return report.raw_input + read + write - cost


def caller_marked(body: Mapping[str, Any]) -> bool:
    """Whether the caller's own Anthropic request asks for caching (``cache_control`` at the top, on a
    tool, a system block or a message block): without it the route caches nothing by itself
    (docs/vendor-facts.md §1.2), so its native caching is no caching at all."""
    if isinstance(body.get("cache_control"), Mapping):  # an SDK's omitted field is a sentinel
        return True
    for key in ("tools", "system"):
        items = body.get(key)
        if isinstance(items, list) and any(isinstance(i, Mapping) and "cache_control" in i for i in items):
            return True
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in messages:
            content = message.get("content") if isinstance(message, Mapping) else None
            if isinstance(content, list) and any(
                isinstance(block, Mapping) and "cache_control" in block for block in content
            ):
                return True
    return False
