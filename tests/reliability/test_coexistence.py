"""Coexistence with another wrapt-based instrumentor on the same methods: OpenLLMetry.

``opentelemetry-instrumentation-anthropic`` / ``-openai`` (traceloop/openllmetry) wrap
``Messages.create`` / ``Messages.stream`` / ``Completions.create`` with wrapt, the same methods telos
wraps (their ``instrumentation`` packages name the wrapped methods). In both install orders, and
removing either one first:

* both work together: spans are recorded (in-memory exporter) with the response's token usage, and
  telos attaches its ``UsageReport`` (through OpenLLMetry's stream proxies too);
* telos' rewrite is what goes on the wire (byte-equal to telos alone);
* removing either leaves the other working: telos unpatched → the caller's request goes out and
  spans are still recorded; OpenLLMetry uninstrumented → telos still rewrites and reports, no spans.

Needs ``opentelemetry-sdk``, ``opentelemetry-instrumentation-anthropic`` and
``opentelemetry-instrumentation-openai`` (skipped with that reason when they are not installed).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

import telos_wrap
from tests.sdk_methods import sdk_methods_restored

from .harness import Entry, Wire, client_for, entry, kwargs_for

_NEEDED = (
    "opentelemetry.sdk",
    "opentelemetry.instrumentation.anthropic",
    "opentelemetry.instrumentation.openai",
)


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


pytestmark = [
    pytest.mark.skipif(
        not all(_installed(name) for name in _NEEDED),
        reason="coexistence tests need opentelemetry-sdk, opentelemetry-instrumentation-anthropic and "
        "opentelemetry-instrumentation-openai (pip install them, or the test extra)",
    ),
    # OpenLLMetry's own models still use pydantic's class-based config (not ours to fix).
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20"),
]

# Entry points OpenLLMetry instruments (it does not wrap messages.parse or count_tokens; it records no
# span for `with messages.create(stream=True) as s`, its instrumentor's list of methods — that holds
# without telos too).
TRACED = [
    "anthropic-sync-create",
    "anthropic-sync-create_stream",
    "anthropic-sync-stream_helper",
    "anthropic-async-create",
    "openai-sync-create",
    "openai-sync-create_stream",
    "openai-async-create",
]


class Tracing:
    """OpenLLMetry's two instrumentors on an SDK tracer provider with an in-memory exporter."""

    def __init__(self) -> None:
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.instrumentors: list[Any] = [AnthropicInstrumentor(), OpenAIInstrumentor()]
        self.active = False

    def instrument(self) -> None:
        for instrumentor in self.instrumentors:
            instrumentor.instrument(tracer_provider=self.provider)
        self.active = True

    def uninstrument(self) -> None:
        for instrumentor in self.instrumentors:
            instrumentor.uninstrument()
        self.active = False

    def spans(self) -> list[Any]:
        spans = list(self.exporter.get_finished_spans())
        self.exporter.clear()
        return spans


@pytest.fixture
def tracing() -> Iterator[Tracing]:
    """The instrumentors; afterwards every SDK method is put back as it was, whatever they left.

    OpenLLMetry's ``OpenAIInstrumentor.uninstrument()`` leaves ``Completions.create`` wrapped (its
    wrapper keeps recording spans); the rest of the suite must not run under it.
    """
    with sdk_methods_restored():
        tracing = Tracing()
        try:
            yield tracing
        finally:
            if tracing.active:
                tracing.uninstrument()
            telos_wrap.unpatch()


def _bodies(tracing: Tracing | None = None) -> dict[str, Any]:
    bodies = {}
    for entry_id in TRACED:
        e = entry(entry_id)
        wire = Wire()
        e.run(client_for(e.sdk, wire, is_async=e.is_async), kwargs_for(e.sdk))
        bodies[entry_id] = wire.bodies[-1]
        if tracing is not None:
            spans = tracing.spans()
            bodies[entry_id] = (bool(spans), any(_usage_in(span) for span in spans))
    return bodies


def _reference(tracing: Tracing) -> dict[str, dict[str, Any]]:
    """What the bare SDK sends, what telos alone sends, and what OpenLLMetry alone records."""
    plain = _bodies()
    telos_wrap.patch(strict=True)
    try:
        rewritten = _bodies()
    finally:
        telos_wrap.unpatch()
    tracing.instrument()
    try:
        traced = _bodies(tracing)
    finally:
        tracing.uninstrument()
    # OpenLLMetry alone must trace most of these, or this test would prove nothing about spans.
    assert sum(has_span for has_span, _ in traced.values()) >= len(TRACED) - 1
    # What its own uninstrument() leaves behind (it leaks the OpenAI wrappers: they keep tracing).
    left = _bodies(tracing)
    return {"plain": plain, "telos": rewritten, "spans": traced, "spans-after-uninstrument": left}


def _usage_in(span: Any) -> bool:
    return any("usage" in key and "input_tokens" in key for key in (span.attributes or {}))


def _check(tracing: Tracing, *, telos: bool, otel: bool, reference: dict[str, dict[str, Any]]) -> None:
    for entry_id in TRACED:
        e: Entry = entry(entry_id)
        wire = Wire()
        outcome = e.run(client_for(e.sdk, wire, is_async=e.is_async), kwargs_for(e.sdk))
        expected = reference["telos" if telos else "plain"][entry_id]
        assert wire.bodies[-1] == expected, (
            f"{entry_id}: telos' rewrite (or, unpatched, the caller's body) on the wire"
        )
        report = telos_wrap.usage_of(outcome.holder)
        if telos:
            assert report is not None and report.engine == e.sdk, f"{entry_id}: telos' usage report"
        spans = tracing.spans()
        recorded = (bool(spans), any(_usage_in(span) for span in spans))
        # Exactly what OpenLLMetry records without telos, installed (it misses `with create(stream=True)`)
        # or uninstalled (its OpenAI wrappers outlive uninstrument()).
        expected_spans = reference["spans" if otel else "spans-after-uninstrument"][entry_id]
        assert recorded == expected_spans, f"{entry_id}: the instrumentor's spans and usage"
    # telos_hint works exactly while telos is patched (an unpatched SDK rejects the keyword).
    client = client_for("anthropic", Wire())
    if telos:
        client.messages.create(**kwargs_for("anthropic"), telos_hint={"ttl": "1h"})
    else:
        with pytest.raises(TypeError, match="telos_hint"):
            client.messages.create(**kwargs_for("anthropic"), telos_hint={"ttl": "1h"})
    tracing.spans()


@pytest.mark.parametrize(
    ("first", "removed_first"),
    [
        ("telos", "telos"),
        ("telos", "otel"),
        ("otel", "telos"),
        ("otel", "otel"),
    ],
)
def test_telos_and_openllmetry_on_the_same_methods(tracing: Tracing, first: str, removed_first: str) -> None:
    reference = _reference(tracing)
    if first == "telos":
        telos_wrap.patch(strict=True)
        tracing.instrument()
    else:
        tracing.instrument()
        telos_wrap.patch(strict=True)
    _check(tracing, telos=True, otel=True, reference=reference)

    if removed_first == "telos":
        telos_wrap.unpatch()
        _check(tracing, telos=False, otel=True, reference=reference)
        tracing.uninstrument()
    else:
        tracing.uninstrument()
        _check(tracing, telos=True, otel=False, reference=reference)
        telos_wrap.unpatch()
    _check(tracing, telos=False, otel=False, reference=reference)
