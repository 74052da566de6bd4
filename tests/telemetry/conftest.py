"""Real OpenTelemetry components for the telemetry tests: the SDK's tracer and meter providers with
in-memory exporters, given to ``telos_wrap.telemetry.configure`` (never the global providers: those
can be set once per process, and the rest of the suite must run without them)."""

from __future__ import annotations

import contextlib
import socket
import sys
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import telos_wrap
from telos_wrap import telemetry
from telos_wrap.emulator import Emulator, serve

pytest.importorskip("opentelemetry.sdk")

#: Text that appears only in prompts: no span attribute or event telos writes may contain it.
CANARY = "CANARY-7f3a9-prompt-text"
SYSTEM = (
    f"You are a bookshop's support agent {CANARY}.\n" + "Quote the order record; never guess a date.\n" * 300
)


class Otel:
    """A tracer provider with an in-memory span exporter and a meter provider with an in-memory reader."""

    def __init__(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())

    def points(self, name: str) -> list[tuple[dict[str, Any], float]]:
        """``(attributes, value)`` of every data point of metric ``name``."""
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            value = getattr(point, "value", None)
                            found.append((dict(point.attributes), value if value is not None else point.sum))
        return found

    def total(self, name: str, where: dict[str, str] | None = None) -> float:
        """The sum of metric ``name``'s points whose attributes include ``where``."""
        return sum(
            value
            for attributes, value in self.points(name)
            if all(attributes.get(key) == want for key, want in (where or {}).items())
        )


@pytest.fixture
def otel() -> Iterator[Otel]:
    recorder = Otel()
    telemetry.configure(tracer_provider=recorder.tracer_provider, meter_provider=recorder.meter_provider)
    telos_wrap.patch()
    try:
        yield recorder
    finally:
        telos_wrap.unpatch()
        telemetry.reset()
        recorder.tracer_provider.shutdown()
        recorder.meter_provider.shutdown()


@pytest.fixture
def track() -> Iterator[Any]:
    """``track(client)`` returns the client and closes it after the test (no socket left open)."""
    clients: list[Any] = []

    def keep(client: Any) -> Any:
        clients.append(client)
        return client

    yield keep
    for client in clients:
        client.close()


@pytest.fixture
def emulator() -> Iterator[str]:
    with serve(Emulator()) as url:
        yield url


def run_session(client: Any, name: str, *, stream_last: bool = True) -> Any:
    """Three turns of one session: a first write, a system edit (a cache break), a streamed turn."""
    history: list[dict[str, Any]] = []
    with telos_wrap.session(name) as s:
        for turn in range(3):
            history.append({"role": "user", "content": f"Where is order {1000 + turn}? {CANARY}"})
            system = SYSTEM + ("Edited.\n" if turn >= 1 else "")
            if turn == 2 and stream_last:
                with client.messages.stream(
                    model="claude-opus-5", max_tokens=16, messages=history, system=system
                ) as stream:
                    text = stream.get_final_text()
            else:
                message = client.messages.create(
                    model="claude-opus-5", max_tokens=16, messages=history, system=system
                )
                text = message.content[0].text
            history.append({"role": "assistant", "content": text})
    return s


def telos_view(span: Any) -> dict[str, Any]:
    return {key: value for key, value in (span.attributes or {}).items() if key.startswith("telos.")}


def assert_no_canary(values: Any) -> None:
    text = repr(values)
    assert CANARY not in text, "prompt text in telemetry"
    assert "bookshop" not in text and "order 100" not in text


def modules() -> set[str]:
    return set(sys.modules)


@contextlib.contextmanager
def prometheus_exporter() -> Iterator[Callable[[], str]]:
    """telos patched, its metrics read by OpenTelemetry's Prometheus reader and served by
    ``prometheus_client`` on a free loopback port; yields a function that scrapes that port over
    HTTP. On exit telos is unpatched and the reader's collector leaves ``prometheus_client``'s
    registry (the provider's shutdown), so the next test starts from nothing."""
    pytest.importorskip("opentelemetry.exporter.prometheus")
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import start_http_server

    reader = PrometheusMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server, thread = start_http_server(port, addr="127.0.0.1")

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            return str(response.read().decode())

    telemetry.configure(meter_provider=provider)
    telos_wrap.patch()
    try:
        yield scrape
    finally:
        telos_wrap.unpatch()
        telemetry.reset()
        server.shutdown()
        server.server_close()
        thread.join(5)
        provider.shutdown()
