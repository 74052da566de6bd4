"""What the OpenTelemetry hooks cost per call: off (no provider) and on, against no hooks at all.

The same patched calls as ``overhead.py`` (real SDKs, a transport that answers instantly, real
conversations from ../shared/traces), alternating in batches in one run:

* **no hooks** — ``telemetry.begin`` replaced by a function that returns ``None`` at once (the
  request layer as it was before the hooks, but for three ``is not None`` checks);
* **off** — the hooks as shipped, no tracer or meter provider configured (the default);
* **on** — a tracer and a meter provider given to ``telemetry.configure`` (the OpenTelemetry SDK's,
  in-memory exporters): telos' own span and its metrics on every call.

Prints medians per call and the ratios off / no hooks (the figure that must stay at 1.00) and
on / no hooks.

    python benchmarks/telemetry_overhead.py [--traces ../shared/traces] [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import overhead

import telos_wrap
from telos_wrap import telemetry
from telos_wrap.patch import wrappers


def _no_hooks(ctx: Any, options: Any) -> None:
    return None


def _providers() -> tuple[Any, Any]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider, MeterProvider(metric_readers=[InMemoryMetricReader()])


def _timed(call: Any, batch: int) -> list[float]:
    times = []
    for _ in range(batch):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=overhead.ROOT.parent / "shared" / "traces")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    base_anthropic, base_openai = overhead.load_messages(args.traces)
    tracer_provider, meter_provider = _providers()
    shipped = wrappers.telemetry_begin
    telos_wrap.patch()
    print(f"{'case':32} {'no hooks':>9} {'off':>9} {'on':>9} {'off/none':>9} {'on/none':>8}")
    for api, base in (("anthropic", base_anthropic), ("openai", base_openai)):
        for n in (10, 100):
            kwargs = overhead.conversation(base, n, api)
            calls = overhead.make_calls(kwargs, api)
            for kind in ("sync", "stream"):
                call = calls[kind]
                samples: dict[str, list[float]] = {"none": [], "off": [], "on": []}
                for _ in range(1 + args.rounds):
                    for side in ("none", "off", "on"):
                        wrappers.telemetry_begin = _no_hooks if side == "none" else shipped  # type: ignore[assignment]
                        if side == "on":
                            telemetry.configure(
                                tracer_provider=tracer_provider, meter_provider=meter_provider
                            )
                        else:
                            telemetry.configure()  # no provider: off
                        samples[side].extend(_timed(call, 4))
                wrappers.telemetry_begin = shipped
                telemetry.reset()
                none, off, on = (statistics.median(samples[side][4:]) for side in ("none", "off", "on"))
                times = f"{none * 1e3:8.2f}ms {off * 1e3:8.2f}ms {on * 1e3:8.2f}ms"
                print(f"{api} {kind} {n} msgs".ljust(32) + f" {times} {off / none:9.2f} {on / none:8.2f}")
    telos_wrap.unpatch()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
