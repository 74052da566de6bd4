"""Printing and plotting comparisons: per-turn and total tables, cumulative hit ratio and cost."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from telos_wrap.replay.comparison import Comparison
from telos_wrap.replay.results import RunResult, prices_for
from telos_wrap.replay.runner import AS_SENT, AUTO_CACHING, TELOS

# -- output -----------------------------------------------------------------------------------------


def _pct(value: float) -> str:
    return f"{100 * value:5.1f}%"


_SESSION_WIDTH = 24


def _session_label(session: str) -> str:
    """A session id in :data:`_SESSION_WIDTH` characters: its end, where ids differ (a recording's
    are ``<run>/<session>``)."""
    if len(session) <= _SESSION_WIDTH:
        return session
    return "…" + session[-(_SESSION_WIDTH - 1) :]


def _turn_table(runs: Mapping[str, RunResult], names: Sequence[str], out: IO[str]) -> None:
    group = 37
    out.write(
        " " * (16 + _SESSION_WIDTH) + "".join(f"   {' ' + name + ' ':-^{group}}" for name in names) + "\n"
    )
    out.write(
        f"{'session':{_SESSION_WIDTH}} {'turn':>4} {'input':>10}"
        + f"   {'read':>8} {'write':>8} {'hit':>8} {'cost':>8}" * len(names)
        + "\n"
    )
    first = runs[names[0]]
    for index, turn in enumerate(first.turns):
        line = f"{_session_label(turn.session):{_SESSION_WIDTH}} {turn.turn:4d} {turn.input:10,d}"
        for name in names:
            t = runs[name].turns[index]
            if t.error is not None:
                line += f"   {'refused: ' + t.error:<{group}.{group}}"
                continue
            hit = t.read / t.input if t.input else 0.0
            cost = t.cost(runs[name].prices) / t.input if t.input else 1.0
            line += f"   {t.read:8,d} {t.write:8,d} {_pct(hit):>8} {_pct(cost):>8}"
        out.write(line + "\n")


def _totals_table(comparison: Comparison, out: IO[str]) -> None:
    out.write(
        f"{'':10} {'':14} {'input':>11} {'read':>11} {'write':>10}  {'hit ratio':>9}  "
        f"{'cost vs uncached':>16}  {'saving vs as sent':>17}\n"
    )
    for variant, runs in comparison.variants.items():
        baseline = runs.get(AS_SENT.name)
        for name, run in runs.items():
            saving = (
                "—"
                if baseline is None or run is baseline or not baseline.cost
                else _pct(1 - run.cost / baseline.cost)
            )
            note = f"  ({run.errors} refused)" if run.errors else ""
            note += f"  ({run.fallbacks} telos fall-backs)" if run.fallbacks else ""
            out.write(
                f"{variant:10} {name:14} {run.input:11,d} {run.read:11,d} {run.write:10,d}  "
                f"{_pct(run.hit_ratio):>9}  {_pct(run.cost_ratio):>16}  {saving:>17}{note}\n"
            )


_VARIANT_TITLES = {
    "recorded": "As recorded",
    "jittered": "Replayed by a careless harness (live clock + <environment_info> rebuilt in the system "
    "prompt, tools and JSON keys reshuffled every turn)",
}


def print_comparison(comparison: Comparison, out: IO[str], *, per_turn: bool) -> None:
    """Per-turn tables (as sent vs telos_wrap, per variant) and the totals."""
    requests = sum(len(s) for s in comparison.sessions)
    out.write(f"{comparison.title}\nengine: {comparison.engine} (emulated, offline)\n\n")
    prices = prices_for(comparison.engine)
    if per_turn:
        for variant, runs in comparison.variants.items():
            out.write(f"{_VARIANT_TITLES[variant]}:\n")
            names = [name for name in (AS_SENT.name, TELOS.name) if name in runs]
            _turn_table(runs, names, out)
            out.write("\n")
    else:
        _session_table(comparison, out)
    one_hour = f", 1-hour write {prices.write_1h:g}x" if comparison.engine == "anthropic" else ""
    out.write(
        f"Totals over {requests} requests (cost: uncached input = 1, cache read {prices.read:g}x, "
        f"write {prices.write:g}x{one_hour})\n"
    )
    _totals_table(comparison, out)
    out.write(f"\n({comparison.elapsed:.1f} s, no network, no API key)\n")


def _session_table(comparison: Comparison, out: IO[str]) -> None:
    for variant, runs in comparison.variants.items():
        base, telos = runs[AS_SENT.name], runs[TELOS.name]
        out.write(f"{_VARIANT_TITLES[variant]}: per session (hit ratio / cost vs uncached)\n")
        out.write(f"{'session':50} {'requests':>8} {'input':>11}  {'as sent':>15}  {'telos_wrap':>15}\n")
        offset = 0
        for requests in comparison.sessions:
            n = len(requests)
            b = RunResult(base.strategy, base.engine, base.prices, base.turns[offset : offset + n])
            t = RunResult(telos.strategy, telos.engine, telos.prices, telos.turns[offset : offset + n])
            offset += n
            out.write(
                f"{requests[0].session[:50]:50} {n:8d} {b.input:11,d}  "
                f"{_pct(b.hit_ratio)} / {_pct(b.cost_ratio)}  {_pct(t.hit_ratio)} / {_pct(t.cost_ratio)}\n"
            )
        out.write("\n")


_COLORS = {AS_SENT.name: "tab:gray", AUTO_CACHING.name: "tab:orange", TELOS.name: "tab:green"}


def plot_comparison(comparison: Comparison, path: str | Path) -> None:
    """Cumulative hit ratio and cumulative cost per turn (needs the ``plot`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("telos-wrap: --plot needs matplotlib: pip install 'telos-wrap[plot]'") from None
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for variant, runs in comparison.variants.items():
        for name, run in runs.items():
            inputs = list(itertools.accumulate(t.input for t in run.turns))
            reads = list(itertools.accumulate(t.read for t in run.turns))
            costs = list(itertools.accumulate(t.cost(run.prices) for t in run.turns))
            x = list(range(1, len(run.turns) + 1))
            style = "-" if variant == "recorded" else "--"
            color = _COLORS.get(name)
            label = f"{name} ({variant})"
            top.plot(
                x,
                [100 * r / i if i else 0 for r, i in zip(reads, inputs, strict=True)],
                style,
                color=color,
                label=label,
            )
            bottom.plot(
                x,
                [100 * c / i if i else 100 for c, i in zip(costs, inputs, strict=True)],
                style,
                color=color,
                label=label,
            )
    top.set_ylabel("cumulative hit ratio (%)")
    bottom.set_ylabel("cumulative cost vs uncached (%)")
    bottom.set_xlabel("request")
    top.set_title(comparison.title.split(" — ")[0], fontsize=9)
    top.legend(fontsize=7)
    top.grid(alpha=0.3)
    bottom.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(str(path), dpi=120)
    plt.close(figure)
