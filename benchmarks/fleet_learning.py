"""Fleet-learning benchmark: conversations of one application after the first, against the oracle bound.

    python benchmarks/fleet_learning.py [--traces DIR] [--styles NAME,...] [--sources NAME,...]
        [--sessions-per-source N] [--max-turns N] [--quick] [--write-md FILE]

An *application* is the Anthropic-shaped sessions of one trace source whose system prompts have one
template (``sessions/learning/fleet.py``: sessions of one source with other tools or another agent are
other applications); each session, rebuilt by one careless-harness style
(``telos_wrap.testing.harnesses``), is one of its conversations, sent in order through the
real SDK to the built-in emulator (a fresh emulator per conversation: one conversation never reads
another's cache) with ``telos_wrap.patch()``, one ``telos_wrap.session`` per conversation:

* **fleet off** — every conversation on its own store, ``fleet_learning=False`` (what
  ``benchmarks/cache_efficiency.py`` measures);
* **fleet on** — every conversation of the source on one shared ``MemoryStore`` with fleet learning
  on: the first one learns alone and publishes, the later ones start with its facts
  (docs/sessions.md, "Fleet learning").

Reported per style: efficiency (cache reads / oracle bound, ``benchmarks/_bench_bound.py``) of the
first conversations and of the later ones, fleet off and on, and the later ones against the causal
bound. The acceptance lines (issue 27): on the styles a single conversation can only learn at their
first change (``FIRST_CHANGE``), later conversations read >= 0.99 of the oracle bound with fleet
learning; the first conversations read exactly what they read without it. ``--per-user`` (issue 34)
puts ``application.user_line`` after the first line of each conversation's system prompt (its own
name and account, ``application.with_user``):
the same lines hold for prompts that name their user.
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_bound import SessionBound
from application import with_user
from cache_efficiency import DEFAULT_TRACES, sessions_of, source_name, styled

import telos_wrap
from telos_wrap.replay.runner import TELOS, patched, replay
from telos_wrap.sessions import MemoryStore
from telos_wrap.sessions.learning.fleet import template_key
from telos_wrap.testing.harnesses import SHAPES

#: Styles whose volatility one conversation learns only at its first change (a value without a "now"
#: label, a list of live lines, counts that change on some turns).
FIRST_CHANGE = (
    "clock-first",
    "clock-last",
    "clock-midline",
    "volatile-block",
    "env-dump",
    "git-status",
    "kitchen-sink",
)
TARGET = 0.99
QUICK_SESSIONS, QUICK_TURNS = 4, 8


@dataclass
class Tally:
    """Cache reads and bounds summed over some conversations."""

    read: int = 0
    bound: int = 0
    causal: int = 0
    conversations: int = 0

    def add(self, reads: list[int], bounds: list[int], causal: list[int]) -> None:
        self.read += sum(reads)
        self.bound += sum(bounds)
        self.causal += sum(causal)
        self.conversations += 1

    def efficiency(self) -> float | None:
        return self.read / self.bound if self.bound else None

    def causal_efficiency(self) -> float | None:
        return self.read / self.causal if self.causal else None


@dataclass
class Row:
    style: str
    off_first: Tally
    on_first: Tally
    off_later: Tally
    on_later: Tally
    #: Per application: later conversations (fleet off, fleet on).
    apps: dict[str, tuple[Tally, Tally]] = field(default_factory=dict)

    def lowest(self) -> tuple[str, Tally, Tally] | None:
        """The application whose later conversations read the least of the bound with fleet on."""
        measured = [(name, off, on) for name, (off, on) in self.apps.items() if on.efficiency() is not None]
        return min(measured, key=lambda item: item[2].efficiency() or 0.0, default=None)


def _reads(requests: list[Any], store: MemoryStore, fleet: bool, mode: str = "rendered") -> list[int]:
    run = replay(
        [requests],
        TELOS,
        engine="anthropic",
        emulator_mode=mode,
        session_factory=lambda sid: telos_wrap.session(sid, store=store, fleet_learning=fleet),
    )
    return [turn.read for turn in run.turns]


def per_user(session: list[Any], number: int) -> list[Any]:
    """``session`` with its system prompt naming its own user early (``application.with_user``)."""
    out = []
    for request in session:
        kwargs = copy.deepcopy(request.kwargs)
        SHAPES[request.api].edit_system_text(kwargs, lambda text: with_user(text, number))
        out.append(replace(request, kwargs=kwargs))
    return out


def run_style(
    style: str, applications: dict[str, list[list[Any]]], mode: str = "rendered", users: bool = False
) -> Row:
    row = Row(style, Tally(), Tally(), Tally(), Tally())
    for name, sessions in applications.items():
        shared = MemoryStore()
        app_off, app_on = row.apps.setdefault(name, (Tally(), Tally()))
        for number, session in enumerate(sessions):
            requests, volatile = styled(per_user(session, number) if users else session, style)
            oracle, causal = SessionBound(), SessionBound(causal=True)
            bounds = [oracle.add(r.api, r.kwargs, v) for r, v in zip(requests, volatile, strict=True)]
            causal_bounds = [causal.add(r.api, r.kwargs, v) for r, v in zip(requests, volatile, strict=True)]
            off = _reads(requests, MemoryStore(), fleet=False, mode=mode)
            on = _reads(requests, shared, fleet=True, mode=mode)
            (row.off_first if number == 0 else row.off_later).add(off, bounds, causal_bounds)
            (row.on_first if number == 0 else row.on_later).add(on, bounds, causal_bounds)
            if number > 0:
                app_off.add(off, bounds, causal_bounds)
                app_on.add(on, bounds, causal_bounds)
    return row


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| style | conversations (first + later) | first, fleet off | first, fleet on | later, fleet off "
        "| later, fleet on | later, fleet on vs causal | lowest application, later: off → on | acceptance |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        later = row.on_later.efficiency()
        same_first = row.on_first.read == row.off_first.read
        checks = []
        if row.style in FIRST_CHANGE and later is not None:
            checks.append("later >= 99%: " + ("ok" if later >= TARGET else "FAIL"))
        checks.append("first unchanged: " + ("ok" if same_first else "FAIL"))
        lowest = row.lowest()
        worst = (
            "—"
            if lowest is None
            else f"{lowest[0]}: {_pct(lowest[1].efficiency())} → {_pct(lowest[2].efficiency())}"
        )
        lines.append(
            f"| {row.style} | {row.off_first.conversations} + {row.off_later.conversations} "
            f"| {_pct(row.off_first.efficiency())} | {_pct(row.on_first.efficiency())} "
            f"| {_pct(row.off_later.efficiency())} | {_pct(later)} "
            f"| {_pct(row.on_later.causal_efficiency())} | {worst} | {'; '.join(checks)} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--styles", default=",".join(FIRST_CHANGE))
    parser.add_argument("--sources", default="")
    parser.add_argument("--sessions-per-source", type=int, default=None)
    parser.add_argument("--max-turns", type=int, default=None)
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_SESSIONS} conversations, {QUICK_TURNS} turns"
    )
    parser.add_argument(
        "--mode",
        choices=("rendered", "byte-exact"),
        default="rendered",
        help="the emulator's render mode (docs/emulator.md, 'Render modes')",
    )
    parser.add_argument(
        "--per-user",
        action="store_true",
        help="each conversation's system prompt names its own user early (application.with_user)",
    )
    parser.add_argument("--write-md", type=Path, default=None, help="write the table to this file")
    args = parser.parse_args(argv)
    limit, turns = args.sessions_per_source, args.max_turns
    if args.quick:
        limit, turns = limit or QUICK_SESSIONS, turns or QUICK_TURNS
    wanted = {s for s in args.sources.split(",") if s}
    applications: dict[str, list[list[Any]]] = {}
    for path in sorted(args.traces.glob("*.jsonl*")):
        name = source_name(path)
        if wanted and name not in wanted:
            continue
        sessions, _ = sessions_of(path, "anthropic", None, turns)
        by_template: dict[str | None, list[list[Any]]] = {}
        for session in sessions:
            by_template.setdefault(template_key(session[0].api, session[0].kwargs), []).append(session)
        for number, group in enumerate(g for t, g in by_template.items() if t is not None):
            if len(group) >= 2:  # an application needs a second conversation to be measured
                applications[f"{name}#{number}"] = group[:limit] if limit else group
    rows = []
    with patched():
        for style in [s for s in args.styles.split(",") if s]:
            rows.append(run_style(style, applications, args.mode, args.per_user))
            print(table(rows)[-1], file=sys.stderr, flush=True)
    users = "Per-user prompts: each conversation's system prompt names its user after its first line. "
    out = [
        (users if args.per_user else "")
        + "Applications (sessions of one source and one system-prompt template, 2+ of them; "
        "conversations each): " + ", ".join(f"{name} ({len(s)})" for name, s in applications.items()),
        "",
        *table(rows),
    ]
    print("\n".join(out))
    if args.write_md is not None:
        args.write_md.write_text("\n".join(out) + "\n")
    failed = any("FAIL" in line for line in table(rows)[2:])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
