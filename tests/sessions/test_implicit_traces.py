"""One-line ``patch()``, no ``session()``, on the shared traces: a careless harness's conversation is
one implicit session, learns its live values, and reaches >= 0.97 of the causal bound (the best a
learner without foresight can do) and >= 0.95 of the oracle bound. A value that merely looks live (the
zoo's clocks are not bare statements of the present) stays where the caller wrote it until it changes,
so it costs one cache break at its first change: the gap between the two bounds (docs/sessions.md,
"What telos moves").

Each request of a recorded session (``../shared/traces``) is rebuilt the way a harness style of
``telos_wrap.testing.harnesses`` sends it, and sent through the real SDK over real HTTP to the emulator. The
bound is ``benchmarks/_bench_bound.py``'s, with the spans the style declares volatile cut out.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import telos_wrap
from telos_wrap.replay.runner import create_kwargs
from telos_wrap.replay.traces import TraceRequest, group_sessions, load_trace
from telos_wrap.sessions import registry as session_registry
from telos_wrap.testing.harnesses import rewrite_session
from tests.over_http import emulator_over_http

from .conftest import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))
from _bench_bound import SessionBound

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
TURNS = 20


def a_session(name: str, api: str) -> list[TraceRequest]:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{path} not found (the sample traces live in ../shared/traces)")
    for group in group_sessions(load_trace(path)):
        if group[0].api == api and len(group) >= 12:
            return group[:TURNS]
    raise AssertionError(f"no {api} session of 12+ requests in {name}")


@pytest.mark.parametrize(
    ("source", "api", "style"),
    [
        ("tau-bench.jsonl.xz", "openai", "volatile-block"),
        ("tau-bench.jsonl.xz", "openai", "clock-midline"),
        ("swe-agent.as-anthropic.jsonl.xz", "anthropic", "clock-first"),
    ],
)
def test_one_line_patch_on_a_trace(patched: None, source: str, api: str, style: str) -> None:
    session_registry._implicit.clear()
    requests, volatile = rewrite_session(a_session(source, api), style)
    bound, causal_bound = SessionBound(), SessionBound(causal=True)
    reads: list[int] = []
    bounds: list[int] = []
    causal: list[int] = []
    with emulator_over_http() as wire:
        client: Any = wire.openai() if api == "openai" else wire.anthropic()
        create = client.chat.completions.create if api == "openai" else client.messages.create
        for request, spans in zip(requests, volatile, strict=True):
            wire.clock.advance(5)
            response = create(**create_kwargs(request.api, request.kwargs))
            report = telos_wrap.usage_of(response)
            assert report is not None and report.cache_read is not None
            reads.append(report.cache_read)
            bounds.append(bound.add(request.api, request.kwargs, spans))
            causal.append(causal_bound.add(request.api, request.kwargs, spans))
        client.close()
    assert len(session_registry._implicit) == 1  # every turn in one implicit session
    [implicit] = session_registry._implicit.values()
    assert implicit.volatile_spans  # the harness's live values were learned
    efficiency, of_causal = sum(reads) / sum(bounds), sum(reads) / sum(causal)
    print(
        f"{source} {style}: {efficiency:.3f} of the oracle bound, {of_causal:.3f} of the causal bound, "
        f"{implicit.stats.cache_breaks} break(s)"
    )
    assert of_causal >= 0.97, (of_causal, reads, causal)
    assert efficiency >= 0.95, (efficiency, reads, bounds)
