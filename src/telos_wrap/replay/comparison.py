"""Side-by-side comparisons of strategies on the same sessions (what ``demo`` and ``replay`` print)."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from telos_wrap.engines.registry import get_engine
from telos_wrap.replay.results import Prices, ReplayedTurn, RunResult, prices_for
from telos_wrap.replay.runner import (
    AS_SENT,
    AUTO_CACHING,
    JITTER_SEED,
    SERVED_APIS,
    TELOS,
    Progress,
    Strategy,
    demo_path,
    load_sessions,
    patched,
    replay,
)
from telos_wrap.replay.traces import TraceRequest

# -- demo / replay ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Comparison:
    """Runs of several strategies over the same sessions, per variant (recorded / jittered)."""

    title: str
    engine: str
    sessions: list[list[TraceRequest]]
    variants: dict[str, dict[str, RunResult]] = field(default_factory=dict)
    elapsed: float = 0.0

    def to_json(self, *, turns: bool) -> dict[str, Any]:
        """The comparison as plain JSON: per variant and strategy, the run's totals and its saving
        against the request as sent; ``turns``: each request's usage too."""
        variants: dict[str, Any] = {}
        for variant, runs in self.variants.items():
            out: dict[str, Any] = {}
            baseline = runs.get(AS_SENT.name)
            for name, run in runs.items():
                data = run.totals()
                if baseline is not None and baseline.cost:
                    data["saving_vs_as_sent"] = round(1 - run.cost / baseline.cost, 6)
                if turns:
                    data["turns"] = [_turn_json(t, run.prices) for t in run.turns]
                out[name] = data
            variants[variant] = out
        return {
            "title": self.title,
            "engine": self.engine,
            "sessions": len(self.sessions),
            "requests": sum(len(s) for s in self.sessions),
            "prices": _prices_json(self.engine),
            "variants": variants,
            "elapsed_seconds": round(self.elapsed, 3),
        }


def _prices_json(engine: str) -> dict[str, float]:
    prices = prices_for(engine)
    if engine == "anthropic":
        return {"read": prices.read, "write_5m": prices.write, "write_1h": prices.write_1h}
    return {"read": prices.read, "write": prices.write}


def _turn_json(turn: ReplayedTurn, prices: Prices) -> dict[str, Any]:
    data: dict[str, Any] = {
        "session": turn.session,
        "turn": turn.turn,
        "input_tokens": turn.input,
        "cache_read": turn.read,
        "cache_write": turn.write,
        "hit_ratio": round(turn.read / turn.input, 6) if turn.input else 0.0,
        "cost_vs_uncached": round(turn.cost(prices) / turn.input, 6) if turn.input else None,
    }
    if turn.error is not None:
        data["error"] = turn.error
    return data


VARIANTS = {"recorded": None, "jittered": JITTER_SEED}


def compare(
    title: str,
    sessions: list[list[TraceRequest]],
    *,
    engine: str,
    variants: Sequence[str],
    strategies: Sequence[Strategy],
    show_progress: bool | None = None,
) -> Comparison:
    """Replay ``sessions`` with each strategy and variant, each run on a fresh emulator."""
    started = time.monotonic()
    comparison = Comparison(title, engine, sessions)
    total = sum(len(s) for s in sessions) * len(variants) * len(strategies)
    progress = Progress(total, enabled=show_progress)
    with patched():
        for variant in variants:
            runs: dict[str, RunResult] = {}
            for strategy in strategies:
                runs[strategy.name] = replay(
                    sessions,
                    strategy,
                    engine=engine,
                    jitter_seed=VARIANTS[variant],
                    progress=progress,
                    label=f"{variant}, {strategy.name}",
                )
            comparison.variants[variant] = runs
    progress.close()
    comparison.elapsed = time.monotonic() - started
    return comparison


def run_demo(*, jittered: bool = True, show_progress: bool | None = None) -> Comparison:
    """Replay the bundled session: as sent, with automatic caching, and through telos_wrap."""
    sessions = load_sessions(demo_path())
    variants = ["recorded", "jittered"] if jittered else ["recorded"]
    return compare(
        "LangGraph customer-support agent (Claude, 18 tools), 43 requests "
        "— see telos_wrap/data/DEMO_SOURCE.md",
        sessions,
        engine="anthropic",
        variants=variants,
        strategies=[AS_SENT, AUTO_CACHING, TELOS],
        show_progress=show_progress,
    )


def check_engine(engine: str, sessions: list[list[TraceRequest]]) -> list[list[TraceRequest]]:
    """Keep the requests the engine can serve; raise ``SystemExit`` with a clear message otherwise."""
    try:
        get_engine(engine)
    except (ImportError, KeyError) as exc:
        raise SystemExit(
            f"telos-wrap: the telos engine {engine!r} is not available in this version ({exc}); "
            "use --engine anthropic"
        ) from None
    wanted = SERVED_APIS.get(engine, ("openai", "responses"))
    kept = [[r for r in s if r.api in wanted] for s in sessions]
    kept = [s for s in kept if s]
    skipped = sum(len(s) for s in sessions) - sum(len(s) for s in kept)
    served = " / ".join(f"{api}-API" for api in wanted)
    if not kept:
        apis = sorted({r.api for s in sessions for r in s})
        hint = (
            "--engine anthropic"
            if "anthropic" in apis
            else "--engine openai|vllm|sglang"
            if "responses" in apis
            else "--engine openai|deepseek|vllm|sglang"
        )
        raise SystemExit(
            f"telos-wrap: no {served} requests to replay with --engine {engine} "
            f"(the file has {', '.join(apis) or 'no'} requests); use {hint}"
        )
    if skipped:
        print(
            f"telos-wrap: skipped {skipped} requests that --engine {engine} does not serve ({served} only)",
            file=sys.stderr,
        )
    return kept
