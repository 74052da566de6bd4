"""Cache-efficiency benchmark: every trace source x harness style x vendor rules x emulator mode.

    python benchmarks/cache_efficiency.py [--traces DIR] [--styles all|clean,NAME,...]
        [--modes rendered,byte-exact] [--vendors anthropic,openai,openrouter] [--sources NAME,...]
        [--sessions-per-source N] [--max-turns N] [--quick] [--jobs N] [--telos-sdk]
        [--json FILE] [--write-md BENCHMARKS.md]

Every request goes through the real SDK to the built-in engine emulator (a fresh emulator per
session and strategy, its clock moving 3-9 s per request), with:

1. **as sent** — the request as the harness built it (telos disabled for the call);
2. **auto-caching** — Anthropic's native automatic caching: a top-level
   ``cache_control: {"type": "ephemeral"}`` on the request as sent (Anthropic rules only; on
   OpenAI, automatic caching *is* "as sent");
3. **telos_wrap** — through ``telos_wrap.patch()``, one ``telos_wrap.session`` per trace session;
4. **telos-sdk** (only with ``--telos-sdk``) — the body the reference implementation's gateway
   would send (``benchmarks/_bench_reference.py``);
5. **oracle bound** — per request, the tokens of content already sent earlier in the session,
   with the spans the harness style declares volatile cut out (``benchmarks/_bench_bound.py``);
   and the **causal bound**: the same, each volatile span cut only from the request where it first
   changed — the best a learner without foresight can do (a value that has not changed yet cannot be
   known to be volatile; learning a clock on sight can beat it).

*Styles* (``telos_wrap.testing.harnesses``): ``clean`` is the trace as recorded; every other style
rebuilds each request the way one careless harness habit does (seeded, deterministic). *Modes*
(docs/emulator.md, "Render modes"): ``rendered`` compares prompts as the vendor renders them,
``byte-exact`` as a cache keyed on the request bytes would (cache markers aside).

Reported: efficiency = cache reads / oracle bound (and telos_wrap's against the causal bound, in
the summary and on every failing acceptance line), per style, source, vendor rules and mode, with
refusals (HTTP 400: counted at the as-sent size, uncached) and telos fall-backs; the acceptance
lines of issue 15 (telos_wrap >= 97% of the bound everywhere; on clean traces never below native
automatic caching (Anthropic) or as sent (OpenAI)); and every place where the two modes disagree.

Anthropic rules run on every Anthropic-shaped source (the ``*.as-anthropic`` conversions and the
Anthropic sessions of the cassette sources); OpenAI rules on the OpenAI-API sessions, with the
provider-specific fields the OpenAI API rejects (e.g. OpenRouter's ``usage``) dropped first.
``--quick`` (2 sessions per source, 6 turns each) is a smoke version; ``--jobs N`` replays
sessions in N worker processes (results are summed per cell, so they do not depend on N).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import inspect
import json
import multiprocessing
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _bench_reference as reference
from _bench_bound import SessionBound

import telos_wrap
from telos_wrap.emulator import RENDER_MODES
from telos_wrap.emulator.flavour_router import chat_to_messages
from telos_wrap.replay.results import ReplayedTurn, RunResult
from telos_wrap.replay.runner import AS_SENT, AUTO_CACHING, TELOS, Progress, Strategy, patched, replay
from telos_wrap.replay.traces import TraceRequest, group_sessions, load_trace
from telos_wrap.sessions.turns.wire_i2 import telos_rewrites_seen
from telos_wrap.testing.harnesses import rewrite_session, style_names

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = ROOT.parent / "shared" / "traces"
CLEAN = "clean"
STYLE_SEED = 0
TARGET = 0.97  # issue 15: telos_wrap >= 0.97 of the oracle bound
QUICK_SESSIONS, QUICK_TURNS = 2, 6
#: Cost differences below 0.05 percentage points are token-level noise.
COST_TOLERANCE = 0.0005
#: Efficiencies that differ by less than this between the two modes are not called a disagreement.
MODE_TOLERANCE = 0.005
#: ``--vendors all``: the vendors BENCHMARKS.md reports (``openrouter`` is asked for by name).
DEFAULT_VENDORS = ("anthropic", "openai")
#: The model the OpenRouter rules run the OpenAI-API sessions for (a Claude model behind the router).
ROUTER_CLAUDE = "anthropic/claude-sonnet-4.5"
VENDORS = {
    "anthropic": "Anthropic rules (claude-* minimum lengths per model; 1024 for other model names)",
    "openai": "OpenAI rules (automatic caching: 1024-token minimum, 128-token steps before gpt-5.6)",
    "openrouter": (
        "OpenRouter to Claude: the OpenAI-API sessions sent to openrouter.ai for "
        f"{ROUTER_CLAUDE}; Anthropic rules on the router's translation (docs/engines.md, Routes)"
    ),
}


@dataclass
class Cell:
    """One strategy on one source, style and mode: summed usage, bound, refusals, fall-backs."""

    input: int = 0
    read: int = 0
    cost: float = 0.0
    bound: int = 0
    causal_bound: int = 0
    as_sent_input: int = 0
    requests: int = 0
    refused: int = 0
    fallbacks: int = 0
    #: ``telos_rewrote`` breaks: a settled message telos did not re-send byte for byte (I2 on the wire).
    telos_rewrites: int = 0

    def add(
        self,
        run: RunResult,
        as_sent: RunResult,
        bounds: Sequence[int],
        causal_bounds: Sequence[int],
        rewrites: int = 0,
    ) -> None:
        for turn, base, bound, causal in zip(run.turns, as_sent.turns, bounds, causal_bounds, strict=True):
            if turn.error is not None:  # refused: the caller pays it uncached at its as-sent size
                self.refused += 1
                turn = ReplayedTurn(turn.session, turn.turn, raw=base.input)
            self.input += turn.input
            self.read += turn.read
            self.cost += turn.cost(run.prices)
            self.bound += bound
            self.causal_bound += causal
            self.as_sent_input += base.input
            self.requests += 1
        self.fallbacks += run.fallbacks
        self.telos_rewrites += rewrites

    def merge(self, other: Cell) -> None:
        for name in (
            "input",
            "read",
            "cost",
            "bound",
            "causal_bound",
            "as_sent_input",
            "requests",
            "refused",
            "fallbacks",
            "telos_rewrites",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def hit(self) -> float:
        return self.read / self.input if self.input else 0.0

    @property
    def cost_ratio(self) -> float:
        return self.cost / self.input if self.input else 1.0

    @property
    def efficiency(self) -> float | None:
        """Cache reads / oracle bound (``None`` when nothing could have been read)."""
        return self.read / self.bound if self.bound else None

    @property
    def causal_efficiency(self) -> float | None:
        """Cache reads / causal bound (``_bench_bound.SessionBound(causal=True)``)."""
        return self.read / self.causal_bound if self.causal_bound else None

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "input_tokens": self.input,
            "as_sent_input_tokens": self.as_sent_input,
            "cache_read": self.read,
            "bound": self.bound,
            "hit_ratio": round(self.hit, 6),
            "cost_vs_uncached": round(self.cost_ratio, 6),
            "efficiency": None if self.efficiency is None else round(self.efficiency, 6),
            "causal_bound": self.causal_bound,
            "causal_efficiency": None if self.causal_efficiency is None else round(self.causal_efficiency, 6),
            "refused": self.refused,
            "fallbacks": self.fallbacks,
            "telos_rewrites": self.telos_rewrites,
        }


Key = tuple[str, str, str, str]  # source, style, mode, strategy


@dataclass
class Section:
    """One set of vendor rules: cells per source, style, mode and strategy."""

    vendor: str
    title: str
    strategies: list[str]
    styles: list[str]
    modes: list[str]
    cells: dict[Key, Cell] = field(default_factory=dict)
    sessions: dict[str, int] = field(default_factory=dict)
    sampled: dict[str, tuple[int, int]] = field(default_factory=dict)

    def cell(self, source: str, style: str, mode: str, strategy: str) -> Cell:
        if source == "TOTAL":
            total = Cell()
            for name in self.sources():
                total.merge(self.cells.get((name, style, mode, strategy), Cell()))
            return total
        return self.cells.setdefault((source, style, mode, strategy), Cell())

    def sources(self) -> list[str]:
        return list(dict.fromkeys(source for source, _, _, _ in self.cells))


# -- loading ----------------------------------------------------------------------------------------


def _openai_accepted() -> frozenset[str]:
    from openai.resources.chat.completions import Completions

    own = {"self", "extra_headers", "extra_query", "extra_body", "timeout"}
    return frozenset(inspect.signature(Completions.create).parameters) - own


def sessions_of(
    path: Path, api: str, limit: int | None, max_turns: int | None
) -> tuple[list[list[TraceRequest]], int]:
    """The ``api`` sessions of a trace file (the first ``limit``, each cut to ``max_turns``) and how many."""
    router = api == "openrouter"
    if router:
        api = "openai"
    sessions = [s for s in group_sessions(load_trace(path)) if s[0].api == api]
    total = len(sessions)
    if limit is not None:
        sessions = sessions[:limit]
    if max_turns is not None:
        sessions = [s[:max_turns] for s in sessions]
    if api == "openai":  # what api.openai.com accepts: provider extensions dropped
        accepted = _openai_accepted()
        sessions = [[replace(r, kwargs=_only(r.kwargs, accepted)) for r in s] for s in sessions]
    if router:
        sessions = [[replace(r, kwargs={**r.kwargs, "model": ROUTER_CLAUDE}) for r in s] for s in sessions]
    return sessions, total


def _only(kwargs: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k in keys}


def source_name(path: Path) -> str:
    return path.name.removesuffix(".xz").removesuffix(".jsonl")


def styled(session: Sequence[TraceRequest], style: str) -> tuple[list[TraceRequest], list[tuple[str, ...]]]:
    """The session as ``style`` sends it, and each request's volatile strings."""
    if style == CLEAN:
        return list(session), [() for _ in session]
    return rewrite_session(session, style, seed=STYLE_SEED)


# -- running ----------------------------------------------------------------------------------------


Cells = dict[Key, Cell]


def _strategies(vendor: str, ref: reference.ReferenceStrategy | None) -> list[Strategy]:
    found = [AS_SENT, AUTO_CACHING, TELOS] if vendor == "anthropic" else [AS_SENT, TELOS]
    return found + ([ref.strategy()] if ref is not None else [])


def _as_the_model_reads(vendor: str, request: TraceRequest) -> tuple[str, dict[str, Any]]:
    """``(api, body)`` of what the model's cache sees: a router to Claude sends its translation."""
    if vendor == "openrouter":
        return "anthropic", chat_to_messages(request.kwargs, "openrouter")
    return request.api, request.kwargs


def run_session(
    vendor: str,
    source: str,
    session: Sequence[TraceRequest],
    styles: Sequence[str],
    modes: Sequence[str],
    ref: reference.ReferenceStrategy | None = None,
    progress: Progress | None = None,
) -> Cells:
    """One session, every style, mode and strategy: the cells it adds to (needs ``patched()``)."""
    cells: Cells = {}
    for style in styles:
        requests, volatile = styled(session, style)
        oracle, causal = SessionBound(), SessionBound(causal=True)
        seen = [_as_the_model_reads(vendor, r) for r in requests]  # the router's translation
        bounds = [oracle.add(api, kwargs, v) for (api, kwargs), v in zip(seen, volatile, strict=True)]
        causal_bounds = [causal.add(api, kwargs, v) for (api, kwargs), v in zip(seen, volatile, strict=True)]
        for mode in modes:
            runs: dict[str, RunResult] = {}
            rewrites: dict[str, int] = {}
            for strategy in _strategies(vendor, ref):
                before = sum(ref.fallbacks.values()) if ref is not None else 0
                telos_rewrites_seen(clear=True)
                run = replay(
                    [requests],
                    strategy,
                    engine=vendor,
                    emulator_mode=mode,
                    progress=progress,
                    label=f"{vendor} {source} {style} {mode} {strategy.name}",
                )
                if ref is not None and strategy.name == reference.NAME:
                    run.fallbacks += sum(ref.fallbacks.values()) - before
                runs[strategy.name] = run
                rewrites[strategy.name] = len(telos_rewrites_seen(clear=True))
            as_sent = runs[AS_SENT.name]
            for name, run in runs.items():
                cell = cells.setdefault((source, style, mode, name), Cell())
                cell.add(run, as_sent, bounds, causal_bounds, rewrites[name])
    return cells


#: ``patch(only_what_pays=...)`` for every replay (``--gate off``: the former default, to compare).
ONLY_WHAT_PAYS = True


@contextlib.contextmanager
def single_conversations() -> Iterator[None]:
    """``patched()`` with fleet learning off: every session is measured as one conversation alone,
    whatever was replayed before it in the process (and so whatever ``--jobs`` is). What later
    conversations of one application gain: ``benchmarks/fleet_learning.py``."""
    with patched(only_what_pays=ONLY_WHAT_PAYS):
        telos_wrap.patch(fleet_learning=False)
        yield


def _worker(
    vendor: str, source: str, session: Sequence[TraceRequest], styles: Sequence[str], modes: Sequence[str]
) -> Cells:
    with single_conversations():
        return run_session(vendor, source, session, styles, modes)


def run_section(
    section: Section,
    files: Sequence[Path],
    limit: int | None,
    max_turns: int | None,
    ref: reference.ReferenceStrategy | None,
    show_progress: bool | None = None,
    jobs: int = 1,
) -> None:
    """Replay every session of ``files`` for the section's vendor, per style, mode and strategy."""
    work: list[tuple[str, list[TraceRequest]]] = []
    for path in files:
        sessions, total = sessions_of(path, section.vendor, limit, max_turns)
        if sessions:
            name = source_name(path)
            work += [(name, session) for session in sessions]
            section.sessions[name] = len(sessions)
            if len(sessions) < total or max_turns is not None:
                section.sampled[name] = (len(sessions), total)
    for source in section.sessions:  # every cell exists, in source order, even if a run adds nothing
        for key in _keys(section, source):
            section.cells.setdefault(key, Cell())
    if jobs > 1 and ref is None:
        # Longest sessions first, so the last worker to finish is not the one with the longest.
        work.sort(key=lambda item: -sum(len(str(r.kwargs)) for r in item[1][-1:]))
        # The SDKs import their types lazily on the first call: once, before forking.
        with single_conversations():
            replay([work[0][1][:1]], AS_SENT, engine=section.vendor)
        context = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
            futures = [
                pool.submit(_worker, section.vendor, source, session, section.styles, section.modes)
                for source, session in work
            ]
            for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
                _merge(section, future.result())
                if show_progress:
                    print(f"  {section.vendor}: {done}/{len(work)} sessions", file=sys.stderr)
        return
    per_run = sum(len(session) for _, session in work)
    progress = Progress(
        per_run * len(section.styles) * len(section.modes) * len(section.strategies), enabled=show_progress
    )
    with single_conversations():
        for source, session in work:
            _merge(
                section,
                run_session(section.vendor, source, session, section.styles, section.modes, ref, progress),
            )
    progress.close()


def _keys(section: Section, source: str) -> list[Key]:
    return [
        (source, style, mode, name)
        for style in section.styles
        for mode in section.modes
        for name in section.strategies
    ]


def _merge(section: Section, cells: Cells) -> None:
    for key, cell in cells.items():
        section.cells.setdefault(key, Cell()).merge(cell)


# -- output -----------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _notes(cell: Cell, label: str) -> list[str]:
    notes = []
    if cell.refused:
        notes.append(f"{label}: {cell.refused} refused")
    if cell.fallbacks:
        notes.append(f"{label}: {cell.fallbacks} fall-backs")
    if cell.telos_rewrites:
        notes.append(f"{label}: {cell.telos_rewrites} telos_rewrote breaks")
    return notes


def _worst(section: Section, style: str, mode: str) -> tuple[float | None, str]:
    """Lowest telos_wrap efficiency over the sources (with a non-zero bound) and where."""
    worst: tuple[float | None, str] = (None, "")
    for source in section.sources():
        eff = section.cell(source, style, mode, TELOS.name).efficiency
        if eff is not None and (worst[0] is None or eff < worst[0]):
            worst = (eff, source)
    return worst


def summary_rows(section: Section) -> tuple[list[str], list[list[str]]]:
    """Per style (all sources): bound, and per mode each strategy's efficiency and the worst source."""
    header = ["style", "bound"]
    for mode in section.modes:
        header += [f"{mode}: {name}" for name in section.strategies]
        header.append(f"{mode}: worst source (telos_wrap)")
        header.append(f"{mode}: telos_wrap / causal bound")
    header.append("notes")
    rows = []
    for style in section.styles:
        base = section.cell("TOTAL", style, section.modes[0], AS_SENT.name)
        row = [style, _pct(base.bound / base.as_sent_input if base.as_sent_input else None)]
        notes: list[str] = []
        for mode in section.modes:
            for name in section.strategies:
                cell = section.cell("TOTAL", style, mode, name)
                row.append(_pct(cell.efficiency))
                if name == TELOS.name:
                    notes += _notes(cell, mode)
            eff, where = _worst(section, style, mode)
            row.append(f"{_pct(eff)} {where}".strip())
            row.append(_pct(section.cell("TOTAL", style, mode, TELOS.name).causal_efficiency))
        row.append("; ".join(notes))
        rows.append(row)
    return header, rows


def detail_rows(section: Section) -> tuple[list[str], list[list[str]]]:
    """Per style and source: bound, then per mode each strategy's efficiency and telos' cost."""
    header = ["style", "source", "bound"]
    for mode in section.modes:
        header += [f"{mode}: {name}" for name in section.strategies]
        header.append(f"{mode}: telos cost")
    header.append("notes")
    rows = []
    for style in section.styles:
        for source in [*section.sources(), "TOTAL"]:
            base = section.cell(source, style, section.modes[0], AS_SENT.name)
            row = [style, source, _pct(base.bound / base.as_sent_input if base.as_sent_input else None)]
            notes: list[str] = []
            for mode in section.modes:
                for name in section.strategies:
                    cell = section.cell(source, style, mode, name)
                    row.append(_pct(cell.efficiency))
                    notes += _notes(cell, f"{mode} {name}")
                row.append(_pct(section.cell(source, style, mode, TELOS.name).cost_ratio))
            if style == CLEAN and source == "TOTAL":
                sessions = sum(section.sessions.values())
                notes.append(f"{sessions} sessions, {base.requests} requests, {base.as_sent_input:,} tokens")
            elif style == CLEAN:
                notes.append(f"{section.sessions[source]} sessions, {base.requests} requests")
                if source in section.sampled:
                    notes.append("sampled: {} of {} sessions".format(*section.sampled[source]))
            row.append("; ".join(notes))
            rows.append(row)
    return header, rows


def checks(section: Section) -> list[str]:
    """Issue 15's acceptance lines for this section, one per style/source/mode, with the numbers."""
    lines = []
    sources = [*section.sources(), "TOTAL"]
    for mode in section.modes:
        for style in section.styles:
            for source in sources:
                cell = section.cell(source, style, mode, TELOS.name)
                where = f"{section.vendor:9} {mode:10} {style:18} {source}"
                if cell.efficiency is None:
                    lines.append(f"n/a   {where}: the bound is 0")
                    continue
                verdict = "PASS " if cell.efficiency >= TARGET else "FAIL "
                causal = (
                    ""
                    if cell.efficiency >= TARGET
                    else f"; {_pct(cell.causal_efficiency)} of the causal bound"
                )
                lines.append(
                    f"{verdict} {where}: telos_wrap {_pct(cell.efficiency)} of the bound (>= 97%){causal}"
                )
        rewrites = sum(
            section.cell(source, style, mode, TELOS.name).telos_rewrites
            for style in section.styles
            for source in section.sources()
        )
        lines.append(
            f"{'PASS ' if rewrites == 0 else 'FAIL '} {section.vendor:9} {mode:10} I2 on the wire: "
            f"{rewrites} telos_rewrote breaks over every style and source (0 wanted)"
        )
        other = AUTO_CACHING.name if AUTO_CACHING.name in section.strategies else AS_SENT.name
        for source in sources:
            telos = section.cell(source, CLEAN, mode, TELOS.name)
            base = section.cell(source, CLEAN, mode, other)
            ok = telos.read >= base.read and telos.cost_ratio <= base.cost_ratio + COST_TOLERANCE
            lines.append(
                f"{'PASS ' if ok else 'FAIL '} {section.vendor:9} {mode:10} {CLEAN:18} {source}: "
                f"telos_wrap >= {other} (reads {telos.read:,} vs {base.read:,}; "
                f"cost {_pct(telos.cost_ratio)} vs {_pct(base.cost_ratio)})"
            )
    return lines


def disagreements(section: Section) -> list[str]:
    """Where telos_wrap's or the as-sent efficiency differs between the two modes."""
    if len(section.modes) < 2:
        return []
    first, second = section.modes[0], section.modes[1]
    lines = []
    for style in section.styles:
        for source in section.sources():
            for name in section.strategies:
                a = section.cell(source, style, first, name).efficiency
                b = section.cell(source, style, second, name).efficiency
                if a is not None and b is not None and abs(a - b) > MODE_TOLERANCE:
                    lines.append(
                        f"{section.vendor:9} {style:18} {source:28} {name:12} "
                        f"{first} {_pct(a)} vs {second} {_pct(b)}"
                    )
    return lines


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    out = []
    for row in [header, *rows]:
        cells = [
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row[:-1], widths, strict=True))
        ]
        out.append("  ".join(cells) + "  " + row[-1])
    return "\n".join(out)


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
    return out


def write_markdown(path: Path, sections: Sequence[Section], meta: dict[str, Any]) -> None:
    """Replace (or append) the ``## Cache efficiency`` section of ``path`` (up to the next ``## ``)."""
    body = [
        "## Cache efficiency",
        "",
        "Measured with:",
        "",
        f"    {meta['command']}",
        "",
        f"on {meta['traces']} ({meta['elapsed']:.0f} s; telos_wrap {meta['telos_wrap']}, anthropic "
        f"{meta['anthropic']}, openai {meta['openai']}{meta['sampled']}). Every request goes through the "
        "real SDK to the built-in engine emulator (docs/emulator.md), a fresh emulator per session, "
        "each session measured alone (fleet learning off; what later conversations of one application "
        "gain: the *Fleet learning* section). "
        "*efficiency* = cache reads / oracle bound (the tokens of content already sent earlier in the "
        "session, the spans the harness changes every turn cut out, below the vendor's minimum "
        "cacheable length counted as 0; `benchmarks/_bench_bound.py`); *bound* = oracle bound / input "
        "tokens. *Styles* are the careless harnesses of `telos_wrap.testing.harnesses` "
        "(`clean` = the traces as "
        'recorded); *modes* are the emulator\'s render modes (docs/emulator.md, "Render modes": '
        "`rendered` = as the vendor renders the prompt, `byte-exact` = as a cache keyed on the request "
        "bytes). See the docstring of `benchmarks/cache_efficiency.py`.",
        "",
    ]
    for section in sections:
        header, rows = summary_rows(section)
        body += [f"### {section.title}: per style, all sources", "", *_md_table(header, rows), ""]
    for section in sections:
        header, rows = detail_rows(section)
        body += [f"### {section.title}: per style and source", "", *_md_table(header, rows), ""]
    lines = [line for section in sections for line in checks(section)]
    failed = [line for line in lines if line.startswith("FAIL")]
    body += [
        "### Acceptance (issue 15)",
        "",
        f"{len(lines) - len(failed)} of {len(lines)} lines pass"
        + (f"; the {len(failed)} that fail:" if failed else "."),
        "",
    ]
    if failed:
        body += ["```", *failed, "```", ""]
    disagree = [line for section in sections for line in disagreements(section)]
    body += ["### Where the two modes disagree", ""]
    body += ["```", *disagree, "```", ""] if disagree else ["Nowhere (within 0.5 percentage points).", ""]
    text = "\n".join(body)
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    start = old.find("## Cache efficiency\n")
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + 1)
        new = old[:start] + text + ("" if end < 0 else old[end + 1 :])
    path.write_text(new, encoding="utf-8")


# -- main -------------------------------------------------------------------------------------------


def _names(value: str, known: Sequence[str], what: str) -> list[str]:
    if value == "all":
        return list(known)
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--traces", type=Path, default=DEFAULT_TRACES, help="trace directory (default: ../shared/traces)")
    add("--styles", default="all", help="'all' (default) or a comma list of clean and harness style names")
    add("--modes", default="all", help="emulator render modes: 'all' (default) or rendered,byte-exact")
    add(
        "--vendors",
        default="all",
        help="vendor rules: 'all' (default: anthropic,openai) or a comma list of anthropic,openai,openrouter",
    )
    add("--sources", default="all", help="trace sources: 'all' (default) or a comma list of file stems")
    add("--sessions-per-source", type=int, metavar="N", help="only the first N sessions of each source")
    add("--max-turns", type=int, metavar="N", help="only the first N requests of each session")
    add(
        "--quick", action="store_true", help=f"{QUICK_SESSIONS} sessions per source, {QUICK_TURNS} turns each"
    )
    add(
        "--gate",
        choices=["on", "off"],
        default="on",
        help="patch()'s only-what-pays gate (default on, as patch(); off: every request rewritten)",
    )
    add("--jobs", type=int, default=1, metavar="N", help="worker processes (default 1; not with --telos-sdk)")
    add("--telos-sdk", action="store_true", help="also run the reference telos-sdk (if installed)")
    add("--progress", action="store_true", default=None, help="show progress (default: when on a terminal)")
    add("--json", type=Path, metavar="FILE", help="write every number as JSON")
    add("--write-md", type=Path, metavar="FILE", help="replace the 'Cache efficiency' section of FILE")
    args = parser.parse_args(argv)
    global ONLY_WHAT_PAYS
    ONLY_WHAT_PAYS = args.gate == "on"
    if args.quick:
        args.sessions_per_source = args.sessions_per_source or QUICK_SESSIONS
        args.max_turns = args.max_turns or QUICK_TURNS
    files = sorted(args.traces.glob("*.jsonl.xz"))
    if not files:
        parser.error(f"no *.jsonl.xz traces in {args.traces}")
    known_sources = [source_name(f) for f in files]
    chosen = _names(args.sources, known_sources, "sources")
    files = [f for f in files if source_name(f) in chosen]
    styles = _names(args.styles, [CLEAN, *style_names()], "styles")
    modes = _names(args.modes, list(RENDER_MODES), "modes")
    vendors = (
        list(DEFAULT_VENDORS) if args.vendors == "all" else _names(args.vendors, list(VENDORS), "vendors")
    )
    ref_version = reference.version() if args.telos_sdk else None
    if args.telos_sdk and ref_version is None:
        print("telos-sdk is not installed (pip install telos-sdk): its column is left out", file=sys.stderr)
    started = time.monotonic()
    sections: list[Section] = []
    refs: dict[str, reference.ReferenceStrategy] = {}
    for vendor in vendors:
        ref = reference.ReferenceStrategy() if ref_version else None
        if ref is not None:
            refs[vendor] = ref

        section = Section(vendor, VENDORS[vendor], [s.name for s in _strategies(vendor, ref)], styles, modes)
        vendor_files = files if vendor == "anthropic" else [f for f in files if ".as-anthropic" not in f.name]
        limit, turns = args.sessions_per_source, args.max_turns
        run_section(section, vendor_files, limit, turns, ref, args.progress, args.jobs)
        sections.append(section)
    elapsed = time.monotonic() - started

    for section in sections:
        print(f"\n{section.title}: per style, all sources")
        print(_text_table(*summary_rows(section)))
    all_checks = [line for section in sections for line in checks(section)]
    failed = [line for line in all_checks if line.startswith("FAIL")]
    print(f"\nAcceptance (issue 15): {len(all_checks) - len(failed)} of {len(all_checks)} lines pass")
    print("\n".join(failed))
    disagree = [line for section in sections for line in disagreements(section)]
    if disagree:
        print("\nWhere the two modes disagree:")
        print("\n".join(disagree))
    print(f"\n({elapsed:.0f} s)")

    meta = _meta(args, elapsed)
    if args.json:
        data = {
            "meta": meta,
            "sections": [
                {
                    "vendor": s.vendor,
                    "title": s.title,
                    "cells": [
                        {"source": src, "style": sty, "mode": mode, "strategy": strat, **cell.to_json()}
                        for (src, sty, mode, strat), cell in s.cells.items()
                    ],
                }
                for s in sections
            ],
            "checks": all_checks,
            "disagreements": disagree,
            "telos_sdk_fallbacks": {vendor: dict(ref.fallbacks) for vendor, ref in refs.items()},
        }
        args.json.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    if args.write_md:
        write_markdown(args.write_md, sections, meta)
    return 0


def _meta(args: argparse.Namespace, elapsed: float) -> dict[str, Any]:
    from importlib import metadata

    command = "python benchmarks/cache_efficiency.py"
    for flag in ("styles", "modes", "vendors", "sources"):
        if getattr(args, flag) != "all":
            command += f" --{flag} {getattr(args, flag)}"
    if args.quick:
        command += " --quick"
    else:
        if args.sessions_per_source:
            command += f" --sessions-per-source {args.sessions_per_source}"
        if args.max_turns:
            command += f" --max-turns {args.max_turns}"
    if args.telos_sdk:
        command += " --telos-sdk"
    if args.write_md:
        command += f" --write-md {args.write_md}"
    try:
        traces = "../" + str(args.traces.absolute().relative_to(ROOT.parent))
    except ValueError:
        traces = str(args.traces)
    sampled = ""
    if args.sessions_per_source or args.max_turns:
        sampled = "; sampled:"
        if args.sessions_per_source:
            sampled += f" the first {args.sessions_per_source} sessions of each source"
        if args.max_turns:
            sampled += f", the first {args.max_turns} requests of each"
    return {
        "command": command,
        "traces": traces,
        "elapsed": elapsed,
        "sampled": sampled,
        "telos_wrap": metadata.version("telos-wrap"),
        "anthropic": metadata.version("anthropic"),
        "openai": metadata.version("openai"),
    }


if __name__ == "__main__":
    raise SystemExit(main())
