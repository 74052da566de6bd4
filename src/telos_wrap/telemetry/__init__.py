"""OpenTelemetry spans and metrics of what telos does (docs/observability.md).

Off, and free, until a provider is configured: a global tracer or meter provider
(``opentelemetry.trace.set_tracer_provider`` / ``opentelemetry.metrics.set_meter_provider``, or the
``opentelemetry-instrument`` launcher), or ones given to :func:`configure`. The check is a dict look-up
when OpenTelemetry was never imported and two attribute reads when it was; this package imports
nothing of OpenTelemetry until a provider is seen (``pip install 'telos-wrap[otel]'`` brings the API).

The patch layer feeds it at the points where telos already knows things: :func:`begin` once the
request is prepared (the session's ``RequestRecord``: rewritten or untouched and why, breakpoints,
moved units, the cache break), ``CallTelemetry.usage`` when the response's usage is known, and the
failures ``failopen.report_failure`` counts. Nothing here ever breaks a call: every entry point
catches, logs at DEBUG and goes on.
"""

from __future__ import annotations

import contextvars
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from telos_wrap.errors import TelosStageError
from telos_wrap.failopen import FAILURE_LISTENERS
from telos_wrap.private_api import OTEL_PROVIDER_SLOTS

if TYPE_CHECKING:
    from telos_wrap.telemetry.call import CallTelemetry

__all__ = ["begin", "configure", "enabled", "reset"]

logger = logging.getLogger("telos_wrap")

#: Providers given to ``configure`` (``None``: the global ones).
_given: dict[str, Any] = {"tracer": None, "meter": None}
#: Set once a provider was seen: the API allows no way back to none (``set_*_provider`` is once only).
_seen = False
#: The stages that failed open in this context since the last call's ``begin`` (for its span).
_failures: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("telos_wrap_failures", default=())


def configure(*, tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Use these providers instead of the global ones (``None``: the global one).

    Needed only for providers that are not global: a tracer provider given to an instrumentor or to
    the anthropic client (``open_telemetry={"tracer_provider": tp}``) — telos then watches it for call
    spans to add to (its own span, when there is none, goes there too) — or a meter provider of
    your own. ``reset()`` forgets them.
    """
    global _seen
    _given["tracer"] = tracer_provider
    _given["meter"] = meter_provider
    _seen = False
    if tracer_provider is not None or meter_provider is not None:
        _activate()


def reset() -> None:
    """Forget ``configure``'s providers and the instruments made on them (tests)."""
    global _seen
    _given["tracer"] = None
    _given["meter"] = None
    _seen = False
    if _listener in FAILURE_LISTENERS:
        FAILURE_LISTENERS.remove(_listener)
    if "telos_wrap.telemetry.otel" in sys.modules:
        sys.modules["telos_wrap.telemetry.otel"].forget()


#: Where the OpenTelemetry API keeps the global providers (``private_api``).
_SLOTS = OTEL_PROVIDER_SLOTS
_MISSING = object()
#: Whether the environment names a provider (read once: ``in os.environ`` costs ~6 us here).
_named: dict[str, bool] = {}


def _global(kind: str) -> Any:
    """The global tracer / meter provider if one is configured, without importing OpenTelemetry."""
    name, slot, variable = _SLOTS[kind]
    module = sys.modules.get(name)
    if module is None:
        return None
    provider = getattr(module, slot, _MISSING)
    if provider is None:
        named = _named.get(kind)
        if named is None:
            named = _named[kind] = variable in os.environ
        if not named:
            return None
    # Named by the environment and not loaded yet, or an API without the slot: ask the API.
    api = sys.modules["opentelemetry.trace" if kind == "tracer" else "opentelemetry.metrics"]
    provider = api.get_tracer_provider() if kind == "tracer" else api.get_meter_provider()
    return None if type(provider).__name__ in ("ProxyTracerProvider", "_ProxyMeterProvider") else provider


def _providers() -> tuple[Any, Any]:
    return (_given["tracer"] or _global("tracer"), _given["meter"] or _global("meter"))


def enabled() -> bool:
    """Whether a tracer or meter provider is configured (global, or given to ``configure``).

    The one check every request makes (``begin``): in the common case, nothing set and nothing
    named, it is a few dict look-ups per signal, and OpenTelemetry is never imported."""
    if _seen:
        return True
    if _given["tracer"] is None and _given["meter"] is None and _unset("tracer") and _unset("meter"):
        return False
    tracer, meter = _providers()
    if tracer is None and meter is None:
        return False
    _activate()
    return True


def _unset(kind: str) -> bool:
    """Cheaply: no global provider of ``kind`` is set and the environment names none (``False``
    until ``_global`` has looked at the environment once)."""
    name, slot, _ = _SLOTS[kind]
    module = sys.modules.get(name)
    return module is None or (module.__dict__.get(slot, _MISSING) is None and _named.get(kind) is False)


def _activate() -> None:
    global _seen
    _seen = True
    if _listener not in FAILURE_LISTENERS:
        FAILURE_LISTENERS.append(_listener)
    tracer, _ = _providers()
    if tracer is not None:
        from telos_wrap.telemetry import otel

        otel.watch(tracer)


#: Stages that fail while a response is read: the request went out rewritten all the same.
_RESPONSE_STAGES = frozenset({"usage", "stream-usage", "observer"})


def _listener(error: TelosStageError) -> None:
    """``failopen``'s listener: count the stage, and keep it for the call's span."""
    if error.stage not in _RESPONSE_STAGES:
        _failures.set((*_failures.get(), error.stage)[-8:])
    try:
        from telos_wrap.telemetry import otel

        _, meter = _providers()
        if meter is not None:
            otel.instruments(meter).fallbacks.add(1, {"telos.stage": error.stage})
        call = otel.in_flight.get()
        if call is not None:  # a failure while the call's response is read (usage, stream-usage)
            call.event("telos.fallback", {"telos.fallback.stage": error.stage})
    except Exception:
        logger.debug("telos_wrap: telemetry could not record a failure", exc_info=True)


def begin(ctx: Any, options: Any, client: Any = None) -> CallTelemetry | None:
    """Start the telemetry of the call whose request telos just prepared (``ctx``: its
    ``CallContext``; ``options``: the SDK's request options as the caller built them; ``client``:
    the SDK client sending it). ``None``, at the cost of one check, when no provider is configured."""
    if not enabled():
        return None
    failed = _failures.get()
    if failed:
        _failures.set(())
    if ctx is None:
        return None
    try:
        return _begin(ctx, options, failed, client_tracing_off(client))
    except Exception:
        logger.debug("telos_wrap: telemetry could not start for a call", exc_info=True)
        return None


def client_tracing_off(client: Any) -> bool:
    """Whether ``client`` switched its own OpenTelemetry tracing off: the anthropic SDK (>= 2)
    resolves ``open_telemetry=False``, ``{"traces": False}`` or ``ANTHROPIC_OPEN_TELEMETRY=false``
    into ``traces.enabled = False`` when the client is made (docs/vendor-facts.md §1.7). telos then
    adds no span of its own to the client's calls either (docs/observability.md, "Which span")."""
    option = getattr(client, "__dict__", {}).get("_open_telemetry")
    if not isinstance(option, dict):
        return False
    traces = option.get("traces")
    return isinstance(traces, dict) and traces.get("enabled") is False


def _begin(ctx: Any, options: Any, failed: tuple[str, ...], tracing_off: bool = False) -> CallTelemetry:
    from telos_wrap.sessions.views.stats import DEFAULT_PRICES
    from telos_wrap.telemetry import facts, otel
    from telos_wrap.telemetry.call import CallTelemetry

    tracer, meter = _providers()
    session, index, profile = ctx.session, ctx.index, ctx.engine.profile
    engine = profile.name
    record = session.request_record(index) if index >= 0 else None
    body = getattr(options, "json_data", None)
    body = body if isinstance(body, dict) else {}
    model = body.get("model")
    # Sent as built after a stage failed (a pass-through); a failure that did not stop the rewrite
    # (a bad hint dropped) is still the call's event.
    fell_back = bool(failed) and (record is None or record.kind == "passthrough")
    attributes = facts.request_attributes(engine, session.id, index, record, fell_back)
    events = [("telos.fallback", {"telos.fallback.stage": stage}) for stage in failed]
    brk = record.cache_break if record is not None else None
    if brk is not None:
        events.append(("telos.cache_break", facts.break_event(brk)))
    instruments = otel.instruments(meter) if meter is not None else None
    counted = index >= 0
    if instruments is not None and counted:
        kind, reason = facts.outcome(record, fell_back)
        labels = {"telos.engine": engine, "telos.outcome": kind}
        if reason is not None:
            labels["telos.untouched.reason"] = reason
        instruments.requests.add(1, labels)
        if brk is not None:
            instruments.breaks.add(1, {"telos.engine": engine, "telos.break.reason": brk.reason})
        removed = facts.filtered_chars(record)
        if removed > 0:  # ≈ 4 characters a token, as the session's stats count it
            instruments.filtered.add(removed / 4, {"telos.engine": engine})
    call = CallTelemetry(
        tracer_provider=tracer,
        meter=instruments,
        engine=engine,
        model=model if isinstance(model, str) else None,
        attributes=attributes,
        events=events,
        prices={**DEFAULT_PRICES, **session.prices},
        # A route with explicit caching caches nothing the caller did not mark (docs/vendor-facts.md
        # §1.2): its native caching is no caching; on automatic routes it is not estimated.
        native_uncached=profile.caching == "explicit" and not facts.caller_marked(body),
        counted=counted,
        client_tracing_off=tracing_off,
    )
    span = otel.current_genai_span(current=not tracing_off)
    if span is not None:
        call.claim(span)
    ctx.telemetry = call
    return call
