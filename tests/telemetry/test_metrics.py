"""Metrics: they add up to ``s.stats`` for the same calls, reach Prometheus, and cost nothing when off."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import anthropic
import pytest

from .conftest import Otel, assert_no_canary, prometheus_exporter, run_session


def test_metrics_add_up_to_session_stats(otel: Otel, emulator: str, track: Any) -> None:
    client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
    s = run_session(client, "metrics-1")
    stats = s.stats
    assert stats.requests == 3 and stats.cache_read > 0 and stats.cache_write > 0
    assert otel.total("telos.token.usage", {"telos.token.type": "uncached"}) == stats.raw_input
    assert otel.total("telos.token.usage", {"telos.token.type": "cache_read"}) == stats.cache_read
    assert otel.total("telos.token.usage", {"telos.token.type": "cache_write"}) == stats.cache_write
    assert otel.total("telos.token.usage", {"telos.token.type": "output"}) == stats.output
    assert otel.total("telos.requests") == stats.requests
    assert otel.total("telos.requests", {"telos.outcome": "rewritten"}) == 3
    assert otel.total("telos.cache.breaks") == stats.cache_breaks == 1
    assert otel.total("telos.cache.breaks", {"telos.break.reason": "system_changed"}) == 1
    assert otel.total("telos.saving", {"telos.baseline": "uncached"}) == pytest.approx(stats.savings)
    # The caller marked nothing: on Anthropic its native caching is none, the same baseline.
    assert otel.total("telos.saving", {"telos.baseline": "native"}) == pytest.approx(stats.savings)
    assert otel.total("telos.input.cost", {"telos.baseline": "sent"}) == pytest.approx(stats.cost)
    assert otel.total("telos.input.cost", {"telos.baseline": "uncached"}) == stats.uncached_cost
    # The conventions' histogram: input is every input token (cached ones included).
    assert otel.total("gen_ai.client.token.usage", {"gen_ai.token.type": "input"}) == stats.total_input
    # Low cardinality: no session, request index or id among any metric's attributes.
    for name in ("telos.token.usage", "telos.requests", "telos.cache.breaks", "telos.saving"):
        for attributes, _ in otel.points(name):
            assert set(attributes) <= {
                "telos.engine",
                "telos.token.type",
                "telos.outcome",
                "telos.untouched.reason",
                "telos.break.reason",
                "telos.baseline",
                "gen_ai.system",
                "gen_ai.provider.name",
                "gen_ai.request.model",
            }, attributes
            assert_no_canary(attributes)


def test_latest_conventions_opt_in(
    otel: Otel, emulator: str, track: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http,gen_ai_latest_experimental")
    client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
    client.messages.create(model="claude-opus-5", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    (span,) = otel.spans()
    assert span.attributes["gen_ai.provider.name"] == "anthropic" and "gen_ai.system" not in span.attributes
    assert {a.get("gen_ai.provider.name") for a, _ in otel.points("telos.token.usage")} == {"anthropic"}


def test_prometheus_scrape_shows_the_saving(emulator: str, track: Any) -> None:
    """The OpenTelemetry Prometheus exporter, scraped over HTTP, has telos' saving and tokens."""
    with prometheus_exporter() as scrape_metrics:
        client = track(anthropic.Anthropic(api_key="k", base_url=emulator))
        s = run_session(client, "prometheus-1")
        scrape = scrape_metrics()
    saving = [
        line
        for line in scrape.splitlines()
        if line.startswith("telos_saving") and 'telos_baseline="uncached"' in line
    ]
    assert len(saving) == 1, scrape
    assert float(saving[0].rsplit(" ", 1)[1]) == pytest.approx(s.stats.savings)
    reads = [
        line
        for line in scrape.splitlines()
        if line.startswith("telos_token_usage") and 'telos_token_type="cache_read"' in line
    ]
    assert float(reads[0].rsplit(" ", 1)[1]) == s.stats.cache_read
    assert "telos_cache_breaks" in scrape


def test_without_a_provider_nothing_is_recorded_or_imported(emulator: str) -> None:
    """A fresh process with no provider: telemetry stays off and its OpenTelemetry module unloaded;
    an OpenAI-only process does not import OpenTelemetry at all."""
    script = textwrap.dedent(
        f"""
        import sys, openai, telos_wrap
        from telos_wrap import telemetry
        telos_wrap.patch()
        client = openai.OpenAI(api_key="k", base_url="{emulator}/v1")
        hi = [{{"role": "user", "content": "hi"}}]
        reply = client.chat.completions.create(model="gpt-5.5", messages=hi)
        assert telos_wrap.usage_of(reply) is not None
        assert not telemetry.enabled()
        print(sorted(m for m in sys.modules if m.startswith(("opentelemetry", "telos_wrap.telemetry."))))
        import anthropic
        client = anthropic.Anthropic(api_key="k", base_url="{emulator}")
        client.messages.create(model="claude-opus-5", max_tokens=8, messages=hi)
        assert not telemetry.enabled()
        print("telos_wrap.telemetry.otel" in sys.modules)
        """
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    imported, otel_module = result.stdout.splitlines()
    assert imported == "[]"
    assert otel_module == "False"


def test_global_providers_need_no_configure(emulator: str) -> None:
    """The usual set-up: global providers (set once per process, so in a fresh one), nothing given to
    telos; the SDK's own span (global provider) carries telos' attributes, the metrics are recorded."""
    script = textwrap.dedent(
        f"""
        import anthropic, telos_wrap
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from telos_wrap import telemetry

        telos_wrap.patch()
        client = anthropic.Anthropic(api_key="k", base_url="{emulator}")
        hi = [{{"role": "user", "content": "hi"}}]
        client.messages.create(model="claude-opus-5", max_tokens=8, messages=hi)
        assert not telemetry.enabled()
        exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        client.messages.create(model="claude-opus-5", max_tokens=8, messages=hi)
        assert telemetry.enabled()
        (span,) = exporter.get_finished_spans()
        print(span.name, span.attributes["telos.outcome"])
        data = reader.get_metrics_data()
        names = [m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics]
        print(sorted(set(names)))
        """
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    span, names = result.stdout.splitlines()
    assert span == "anthropic.messages.create untouched"
    assert "telos.requests" in names and "telos.token.usage" in names
