"""``CallTelemetry``: what one call tells OpenTelemetry, from its request to its usage.

Made by ``telemetry.begin`` right after telos prepared the request (the session's ``RequestRecord``
says what telos did), it holds the attributes until the call's span is known (``otel``'s module
docstring: an instrumentation's, the SDK's own, or telos' own) and records the metrics: the request's
outcome and cache break at once, tokens and saving when the response's usage arrives.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from telos_wrap.ir.model import UsageReport
from telos_wrap.telemetry import facts, otel
from telos_wrap.telemetry.facts import CACHE_CREATION, CACHE_READ

__all__ = ["CallTelemetry"]

logger = logging.getLogger("telos_wrap")


class CallTelemetry:
    """One call's span attributes, events and metrics (see the module docstring). Never raises out
    of its methods' callers: ``telemetry`` wraps every call into it."""

    def __init__(
        self,
        *,
        tracer_provider: Any,
        meter: otel.Instruments | None,
        engine: str,
        model: str | None,
        attributes: dict[str, Any],
        events: list[tuple[str, dict[str, Any]]],
        prices: Mapping[str, Any],
        native_uncached: bool,
        counted: bool,
        client_tracing_off: bool = False,
    ) -> None:
        self.tracer_provider = tracer_provider
        self.meter = meter
        self.engine = engine
        self.model = model
        self.attributes = attributes
        self.events = events
        self.prices = prices
        self.native_uncached = native_uncached
        self.counted = counted
        #: The client switched its own tracing off: no span of telos' own, no look at the current span.
        self.client_tracing_off = client_tracing_off
        self.span: Any = None
        self.own = False  # the span is telos' own (ended here)
        self.sdk_span = False  # the span is the anthropic SDK's own (it records no metrics)
        self.report: UsageReport | None = None
        self.usage_done = False
        self.streaming = False  # a stream is being read: telos' own span ends with it
        self.ended = False  # telos' own span has ended
        self.returned_ok = False
        self.start_time = time.time_ns()
        self.parent = otel.current_context()
        self._lock = threading.Lock()

    # -- the request layer's two hooks (never raise) -------------------------------------------------

    def sending(self) -> contextvars.Token[Any]:
        """The request is being sent: a call span started now is the SDK's own, and this call's."""
        return otel.in_flight.set(self)

    def sent(self, token: contextvars.Token[Any] | None) -> None:
        """The request layer returned or raised (called from its ``finally``)."""
        try:
            if token is not None:
                otel.in_flight.reset(token)
        except ValueError:  # reset in another context (never on the SDKs' paths)
            otel.in_flight.set(None)
        try:
            self.returned()
        except Exception:
            logger.debug("telos_wrap: telemetry could not finish a call", exc_info=True)

    def observe(self, report: UsageReport | None, *, final: bool = True) -> None:
        """The response's usage (``usage``), never raising."""
        try:
            self.usage(report, final=final)
        except Exception:
            logger.debug("telos_wrap: telemetry could not record a call's usage", exc_info=True)

    # -- the span ---------------------------------------------------------------------------------

    def claim(self, span: Any) -> bool:
        """Put this call's attributes and events on ``span`` (if it has no telos call yet)."""
        with self._lock:
            if self.span is not None or not otel.claimable(span):
                return False
            self.span = span
        self.sdk_span = otel.scope_of(span).startswith(otel.SDK_SCOPE)
        span.set_attributes(self.attributes)
        for name, attributes in self.events:
            span.add_event(name, attributes)
        if self.report is not None:
            self._usage_on_span(self.report)
        return True

    def event(self, name: str, attributes: dict[str, Any]) -> None:
        """An event on the call's span, or kept for it until it is known."""
        span = self.span
        if span is None:
            self.events.append((name, attributes))
        elif span.is_recording():
            span.add_event(name, attributes)

    def _usage_on_span(self, report: UsageReport) -> None:
        span = self.span
        if span is None or not span.is_recording():
            return
        present = getattr(span, "attributes", None)
        present = present if isinstance(present, Mapping) else {}
        for key, value in facts.usage_attributes(report).items():
            # The instrumentation's own cache attributes win (it may set them later too).
            if key in (CACHE_READ, CACHE_CREATION) and key in present:
                continue
            span.set_attribute(key, value)
        saving = facts.savings(report, self.prices)
        if saving is not None:
            span.set_attribute("telos.saving.vs_uncached", saving)

    def returned(self) -> None:
        """The request layer is done (returned or raised): claim a span or start telos' own."""
        error = sys.exc_info()[1]
        if self.span is None:
            span = otel.current_genai_span(current=not self.client_tracing_off)
            if span is None or not self.claim(span):
                if self.tracer_provider is None or self.client_tracing_off:
                    return
                own = otel.start_own_span(
                    self.tracer_provider,
                    self.model,
                    self.engine,
                    self.start_time,
                    self.parent,
                )
                self.own = True
                self.claim(own)
        # telos' own span ends now unless a stream's usage is still to come (a response without
        # usage, a token count, or a raw response parsed later: it ends without usage attributes).
        if self.own and (error is not None or self.usage_done or not self.streaming):
            with self._lock:
                ended, self.ended = self.ended, True
            if not ended:
                otel.end_span(self.span, error)

    # -- usage ------------------------------------------------------------------------------------

    def usage(self, report: UsageReport | None, *, final: bool = True) -> None:
        """The response's usage (``final=False``: a stream's so far, for a span that may end first)."""
        if report is None:
            return
        if self.span is None and final:
            span = otel.current_genai_span(current=not self.client_tracing_off)
            if span is not None:
                self.claim(span)
        self.report = report
        self._usage_on_span(report)
        if not final:
            return
        with self._lock:
            if self.usage_done:
                return
            self.usage_done = True
        if self.meter is not None and self.counted:
            self._usage_metrics(report)
        if self.own and self.span is not None:
            with self._lock:
                ended, self.ended = self.ended, True
            if not ended:
                otel.end_span(self.span)

    def _usage_metrics(self, report: UsageReport) -> None:
        assert self.meter is not None
        if report.raw_input is None:
            return
        base = {"telos.engine": self.engine, facts.provider_key(): self.engine}
        if self.model:
            base["gen_ai.request.model"] = self.model
        for kind, value in (
            ("uncached", report.raw_input),
            ("cache_read", report.cache_read or 0),
            ("cache_write", report.cache_write or 0),
            ("output", report.output or 0),
        ):
            self.meter.tokens.add(value, {**base, "telos.token.type": kind})
        if not self._instrumented():
            conventions = {"gen_ai.operation.name": "chat", **base}
            del conventions["telos.engine"]
            total = report.total_input or 0
            self.meter.genai_tokens.record(total, {**conventions, "gen_ai.token.type": "input"})
            if report.output is not None:
                self.meter.genai_tokens.record(report.output, {**conventions, "gen_ai.token.type": "output"})
        saving = facts.savings(report, self.prices)
        if saving is not None:
            engine = {"telos.engine": self.engine}
            uncached = report.total_input or 0
            baselines = ["uncached"]
            if self.native_uncached:
                # The route caches nothing unless asked, and the caller did not ask: its native
                # caching would have cost what sending it uncached does.
                baselines.append("native")
            self.meter.cost.add(uncached - saving, {**engine, "telos.baseline": "sent"})
            for baseline in baselines:
                self.meter.saving.add(saving, {**engine, "telos.baseline": baseline})
                self.meter.cost.add(uncached, {**engine, "telos.baseline": baseline})

    def _instrumented(self) -> bool:
        """Whether an instrumentation other than the SDK's own traces the call (it records the
        conventions' ``gen_ai.client.token.usage`` itself; telos does not record it twice)."""
        return self.span is not None and not self.own and not self.sdk_span
