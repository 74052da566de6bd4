"""The OpenTelemetry side: finding the call's span, telos' own span, the metric instruments.

Imported only once a provider is configured (``telemetry.enabled``): a process that never
configures OpenTelemetry never imports this module.

**Which span.** A call gets telos' attributes on exactly one span, found in this order:

1. an instrumentation's span started for the call *outside* telos' request layer (OpenLLMetry's
   ``anthropic.chat`` / ``openai.chat``, Logfire's): a ``CLIENT`` span with GenAI attributes. Such
   instrumentations start their span without making it current, so a span processor on the tracer
   provider (``SpanWatch``, added to the global provider and to one given to ``configure``)
   remembers the latest one started in the caller's context; one made current is found as the
   current span;
2. the anthropic SDK's own span (``anthropic.messages.create``, anthropic >= 2 with tracing on),
   started *inside* the request layer: claimed as it starts (``SpanWatch``), else found as the
   current span while the response is parsed;
3. none: telos starts its own ``CLIENT`` span (``chat {model}``) once the call returned, with the
   call's start time and parent, and ends it when the usage is known. Never a second call span.

A client that switched its own tracing off (anthropic >= 2: ``open_telemetry=False``,
``{"traces": False}``, or ``ANTHROPIC_OPEN_TELEMETRY=false`` when it was made) gets no span of
telos' either: only step 1's span, remembered by ``SpanWatch``, is still claimed, and nothing of
``opentelemetry.trace`` is called for the call. Its metrics are counted as any call's.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import weakref
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from telos_wrap.telemetry.facts import latest_conventions

__all__ = [
    "SpanWatch",
    "claimable",
    "current_context",
    "current_genai_span",
    "instruments",
    "start_own_span",
    "watch",
]

logger = logging.getLogger("telos_wrap")

#: Attributes that mark a GenAI call span (conventions v1.36 and later).
_GENAI_MARKERS = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.system", "gen_ai.request.model")

#: The anthropic SDK's own tracer scope (its ``_tracing.INSTRUMENTATION_SCOPE``).
SDK_SCOPE = "com.anthropic.sdk.python"

#: The latest GenAI call span started in this context that no telos call has claimed.
_started: contextvars.ContextVar[Any] = contextvars.ContextVar("telos_wrap_genai_span", default=None)
#: The call whose request is being sent in this context (it claims a span started inside it).
in_flight: contextvars.ContextVar[Any] = contextvars.ContextVar("telos_wrap_otel_call", default=None)


def _attributes(span: Any) -> Mapping[str, Any]:
    attributes = getattr(span, "attributes", None)
    return attributes if isinstance(attributes, Mapping) else {}


def is_genai_call(span: Any) -> bool:
    """A recording ``CLIENT`` span carrying GenAI attributes (an LLM call's span)."""
    if span is None or getattr(span, "kind", None) is not SpanKind.CLIENT:
        return False
    attributes = _attributes(span)
    return any(key in attributes for key in _GENAI_MARKERS)


def claimable(span: Any) -> bool:
    """A GenAI call span still open and not claimed by another telos call yet."""
    return (
        span is not None
        and span.is_recording()
        and is_genai_call(span)
        and "telos.engine" not in _attributes(span)
    )


def scope_of(span: Any) -> str:
    scope = getattr(span, "instrumentation_scope", None)
    name = getattr(scope, "name", None)
    return name if isinstance(name, str) else ""


def current_genai_span(*, current: bool = True) -> Any:
    """The call span this call may claim: the latest one started in this context (``SpanWatch``),
    else (``current``) the current span, if either is an open, unclaimed GenAI call span.

    ``current=False`` for a call whose client switched its own tracing off: only a span an
    instrumentation started around the call is looked at, and nothing of ``opentelemetry.trace``
    is called."""
    started = _started.get()
    if started is not None:
        _started.set(None)
        if claimable(started):
            return started
    if not current:
        return None
    span = trace.get_current_span()
    return span if claimable(span) else None


class SpanWatch:
    """A span processor that only remembers GenAI call spans as they start (no export, no copy).

    A span started while a telos call is being sent is that call's (the SDK's own); any other is
    remembered for the next call of this context (an instrumentation's, started around telos).
    """

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        try:
            if not is_genai_call(span):
                return
            call = in_flight.get()
            if call is not None and call.claim(span):
                return
            _started.set(span)
        except Exception:  # never break the application's tracing
            logger.debug("telos_wrap: span watch failed", exc_info=True)

    def on_end(self, span: Any) -> None:
        pass

    def _on_ending(self, span: Any) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_watched: weakref.WeakSet[Any] = weakref.WeakSet()
_watched_ids: set[int] = set()
_lock = threading.Lock()


def watch(provider: Any) -> None:
    """Add one ``SpanWatch`` to ``provider`` if it takes span processors (the SDK's does)."""
    add = getattr(provider, "add_span_processor", None)
    if add is None:
        return
    with _lock:
        try:
            if provider in _watched:
                return
            _watched.add(provider)
        except TypeError:  # not weak-referenceable
            if id(provider) in _watched_ids:
                return
            _watched_ids.add(id(provider))
        add(SpanWatch())


def current_context() -> otel_context.Context:
    """The current OpenTelemetry context (the parent of telos' own span, when it starts one)."""
    return otel_context.get_current()


def start_own_span(
    tracer_provider: Any,
    model: str | None,
    provider_name: str,
    start_time: int,
    parent: otel_context.Context | None,
) -> Any:
    """telos' own call span, for a call no instrumentation traces (the conventions' ``chat`` span)."""
    tracer = trace.get_tracer("telos_wrap", tracer_provider=tracer_provider)
    key = "gen_ai.provider.name" if latest_conventions() else "gen_ai.system"
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", key: provider_name}
    if model:
        attributes["gen_ai.request.model"] = model
    return tracer.start_span(
        f"chat {model}" if model else "chat",
        context=parent,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        start_time=start_time,
    )


def end_span(span: Any, error: BaseException | None = None) -> None:
    if error is not None:
        span.set_status(Status(StatusCode.ERROR))
        span.set_attribute("error.type", type(error).__name__)
    span.end()


class Instruments:
    """telos' metric instruments on one meter provider (docs/observability.md lists them)."""

    def __init__(self, meter_provider: Any) -> None:
        meter = metrics.get_meter("telos_wrap", meter_provider=meter_provider)
        self.tokens = meter.create_counter(
            "telos.token.usage",
            unit="{token}",
            description="Tokens per response, input split into uncached / cache_read / cache_write",
        )
        self.genai_tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Measures number of input and output tokens used",
            explicit_bucket_boundaries_advisory=[
                1,
                4,
                16,
                64,
                256,
                1024,
                4096,
                16384,
                65536,
                262144,
                1048576,
                4194304,
                16777216,
                67108864,
            ],
        )
        self.requests = meter.create_counter(
            "telos.requests", unit="{request}", description="Requests telos handled, by outcome"
        )
        self.breaks = meter.create_counter(
            "telos.cache.breaks", unit="{break}", description="Cache breaks telos detected, by reason"
        )
        self.fallbacks = meter.create_counter(
            "telos.fallbacks", unit="{failure}", description="telos stages that failed open, by stage"
        )
        self.saving = meter.create_up_down_counter(
            "telos.saving",
            unit="{token}",
            description="Estimated input saving in uncached-token units against a baseline (may be negative)",
        )
        self.filtered = meter.create_counter(
            "telos.output_filter.removed",
            unit="{token}",
            description="Tokens the output filter took out of tool results, counted once per result, on the "
            "request that first filtered it (characters / 4; each later request re-sends it as filtered)",
        )
        self.cost = meter.create_counter(
            "telos.input.cost",
            unit="{token}",
            description="Input cost in uncached-token units: as sent (sent), and under a baseline",
        )


_instruments: dict[int, Instruments] = {}


def instruments(meter_provider: Any) -> Instruments:
    """The instruments on ``meter_provider`` (made once per provider)."""
    key = id(meter_provider)
    found = _instruments.get(key)
    if found is None:
        with _lock:
            found = _instruments.get(key)
            if found is None:
                found = _instruments[key] = Instruments(meter_provider)
    return found


def forget() -> None:
    """Drop the per-provider instruments (``telemetry.reset``)."""
    with _lock:
        _instruments.clear()
