"""Cache efficiency on the OpenAI Responses API: the shared traces' chat sessions as Responses requests.

    python benchmarks/responses_efficiency.py [--traces DIR] [--sessions-per-source N]
        [--max-turns N] [--engine openai|vllm|sglang] [--write-md BENCHMARKS.md]

Every OpenAI-API (chat) session of ../shared/traces is converted into the Responses requests an
agent on that API would send (``telos_wrap.replay.responses.to_responses``: leading system messages
→ ``instructions``, messages → input items, tool calls → ``function_call`` / ``function_call_output``
items, flat function tools) and sent through the real ``openai`` SDK (``client.responses.create``) to
the emulator's ``/v1/responses`` (a fresh emulator per session and strategy, OpenAI cache rules),
as recorded and as a careless harness sends it (``jitter_responses``: a live clock and an
``<environment_info>`` block rebuilt at the top of ``instructions``, tools and every JSON key
reshuffled, every turn):

* **as sent** — the request as the harness built it (telos disabled for the call);
* **telos_wrap** — through ``telos_wrap.patch()``, one ``telos_wrap.session`` per session;
* **oracle bound** — per request, the tokens of content already sent earlier in the session
  (tools sorted, ``instructions`` and text by line with the clock and environment lines cut out, every
  other item as canonical JSON; the longest unit prefix shared with any earlier request, below 1,024
  tokens counted as 0, then whole 128-token steps), as ``benchmarks/_bench_bound.py`` does for chat.

Efficiency = cache reads / oracle bound. ``--write-md`` replaces the "OpenAI Responses" section of
the file (and leaves every other section alone).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_bound import _canonical, _tokens, readable, shared_prefix, text_units

from telos_wrap.replay.responses import jitter_responses, responses_sessions
from telos_wrap.replay.runner import AS_SENT, TELOS, patched, replay
from telos_wrap.replay.traces import TraceRequest, group_sessions, load_trace

ROOT = Path(__file__).resolve().parents[1]
JITTER_SEED = 0
SECTION = "## OpenAI Responses"
Unit = tuple[str, float]


def responses_units(kwargs: Mapping[str, Any]) -> list[Unit]:
    """Units of a Responses request: tools (sorted), instructions, then every input item."""
    units: list[Unit] = [
        ("tool:" + d, _tokens(d)) for d in sorted(_canonical(t) for t in kwargs.get("tools") or [])
    ]
    instructions = kwargs.get("instructions")
    if isinstance(instructions, str):
        units.extend(text_units(instructions))
    raw = kwargs.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw or []
    for item in items:
        if item.get("type", "message") == "message":
            units.append((f"role:{item.get('role')}", 0.0))
            content = item.get("content")
            for part in [content] if isinstance(content, str) else content or []:
                text = (
                    part if isinstance(part, str) else part.get("text") if isinstance(part, Mapping) else None
                )
                if isinstance(text, str):
                    units.extend(text_units(text))
                else:
                    data = _canonical(part)
                    units.append(("j:" + data, _tokens(data)))
        else:
            data = _canonical(item)
            units.append(("j:" + data, _tokens(data)))
    return units


class ResponsesBound:
    """Feed one session's requests in order; each call returns that request's oracle bound."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()

    def add(self, kwargs: Mapping[str, Any]) -> int:
        shared = shared_prefix(self._seen, responses_units(kwargs))
        return readable(shared, api="openai", model=str(kwargs.get("model", "")))


@dataclass
class Cell:
    input: int = 0
    read: int = 0
    bound: int = 0
    refused: int = 0
    fallbacks: int = 0
    sessions: int = 0
    requests: int = 0

    @property
    def efficiency(self) -> float | None:
        return self.read / self.bound if self.bound else None


def _sessions(path: Path, limit: int | None, max_turns: int | None) -> list[list[TraceRequest]]:
    chat = [s for s in group_sessions(load_trace(path)) if s[0].api == "openai"]
    if limit is not None:
        chat = chat[:limit]
    if max_turns is not None:
        chat = [s[:max_turns] for s in chat]
    return responses_sessions(chat)


def run(
    files: Sequence[Path], engine: str, limit: int | None, max_turns: int | None
) -> dict[tuple[str, str, str], Cell]:
    """``{(source, variant, strategy): Cell}``; ``strategy`` is as sent, telos_wrap or oracle bound."""
    cells: dict[tuple[str, str, str], Cell] = {}
    with patched():
        for path in files:
            source = path.name.removesuffix(".xz").removesuffix(".jsonl")
            for session in _sessions(path, limit, max_turns):
                for variant, seed in (("recorded", None), ("jittered", JITTER_SEED)):
                    bound = ResponsesBound()
                    bounds = [
                        bound.add(jitter_responses(r.kwargs, r.turn, seed) if seed is not None else r.kwargs)
                        for r in session
                    ]
                    oracle = cells.setdefault((source, variant, "oracle bound"), Cell())
                    oracle.bound += sum(bounds)
                    oracle.sessions += 1
                    oracle.requests += len(session)
                    for strategy in (AS_SENT, TELOS):
                        result = replay([session], strategy, engine=engine, jitter_seed=seed)
                        cell = cells.setdefault((source, variant, strategy.name), Cell())
                        cell.input += result.input
                        cell.read += result.read
                        cell.bound += sum(bounds)
                        cell.refused += sum(1 for t in result.turns if t.error)
                        cell.fallbacks += result.fallbacks
                    oracle.input = cells[(source, variant, AS_SENT.name)].input
    add_totals(cells)
    return cells


def _iter_sources(cells: Mapping[tuple[str, str, str], Cell]) -> Iterator[str]:
    yield from dict.fromkeys(source for source, _, _ in cells)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def add_totals(cells: dict[tuple[str, str, str], Cell]) -> None:
    """Add the ``TOTAL`` cells (every source summed)."""
    sources = [source for source in _iter_sources(cells) if source != "TOTAL"]
    for variant in ("recorded", "jittered"):
        for strategy in ("as sent", "telos_wrap", "oracle bound"):
            total = Cell()
            for source in sources:
                cell = cells[(source, variant, strategy)]
                for name in ("input", "read", "bound", "refused", "fallbacks", "sessions", "requests"):
                    setattr(total, name, getattr(total, name) + getattr(cell, name))
            cells[("TOTAL", variant, strategy)] = total


def table(cells: dict[tuple[str, str, str], Cell]) -> list[str]:
    sources = [source for source in _iter_sources(cells) if source != "TOTAL"]
    lines = [
        "| source | strategy | recorded: reads / input | efficiency | jittered: reads / input | efficiency "
        "| notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for source in [*sources, "TOTAL"]:
        for strategy in ("as sent", "telos_wrap", "oracle bound"):
            row = [source, strategy]
            notes = []
            for variant in ("recorded", "jittered"):
                cell = cells[(source, variant, strategy)]
                if strategy == "oracle bound":
                    row += [_pct(cell.bound / cell.input if cell.input else None), ""]
                else:
                    row += [_pct(cell.read / cell.input if cell.input else None), _pct(cell.efficiency)]
                    notes += [f"{variant}: {cell.refused} refused"] * bool(cell.refused)
                    notes += [f"{variant}: {cell.fallbacks} fall-backs"] * bool(cell.fallbacks)
            lines.append("| " + " | ".join([*row, "; ".join(notes)]) + " |")
    return lines


def markdown(cells: dict[tuple[str, str, str], Cell], command: str, elapsed: float, engine: str) -> str:
    from importlib import metadata

    jittered = cells[("TOTAL", "jittered", "telos_wrap")]
    as_sent = cells[("TOTAL", "jittered", "as sent")]
    oracle = cells[("TOTAL", "recorded", "oracle bound")]
    head = [
        SECTION,
        "",
        "Measured with:",
        "",
        f"    {command}",
        "",
        f"({elapsed:.0f} s; openai {metadata.version('openai')}; engine `{engine}`; "
        f"{oracle.sessions} sessions, {oracle.requests} requests.) "
        "The OpenAI-API (chat) sessions of ../shared/traces converted into Responses requests "
        "(`telos_wrap.replay.responses.to_responses`) and sent with `client.responses.create` through the "
        "real SDK to the emulator's `/v1/responses` (OpenAI cache rules, a fresh emulator per session and "
        "strategy); *jittered* = replayed by a careless harness (`jitter_responses`: live clock and "
        "`<environment_info>` at the top of `instructions`, tools and every JSON key reshuffled, every "
        "turn). *efficiency* = cache reads / oracle bound; the oracle row shows bound / input. See the "
        "docstring of `benchmarks/responses_efficiency.py`.",
        "",
        *table(cells),
        "",
        f"Acceptance (issue 17): jittered, telos_wrap reads {_pct(jittered.efficiency)} of the oracle bound "
        f"(floor 97%): **{'PASS' if (jittered.efficiency or 0) >= 0.97 else 'FAIL'}**; as sent it reads "
        f"{as_sent.read:,} tokens (floor: zero): **{'PASS' if as_sent.read == 0 else 'FAIL'}**.",
        "",
    ]
    return "\n".join(head)


def write_section(path: Path, text: str) -> None:
    """Replace the ``SECTION`` of ``path`` (up to the next ``## `` heading), or append it."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    start = old.find(SECTION + "\n")
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + len(SECTION))
        new = old[:start] + text + (old[end + 1 :] if end >= 0 else "")
    path.write_text(new, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    parser.add_argument("--sessions-per-source", type=int, metavar="N")
    parser.add_argument("--max-turns", type=int, metavar="N")
    parser.add_argument("--engine", choices=["openai", "vllm", "sglang"], default="openai")
    parser.add_argument("--json", type=Path, metavar="FILE")
    parser.add_argument("--write-md", type=Path, metavar="FILE")
    args = parser.parse_args(argv)
    files = sorted(args.traces.glob("*.jsonl.xz"))
    started = time.monotonic()
    cells = run(files, args.engine, args.sessions_per_source, args.max_turns)
    elapsed = time.monotonic() - started
    command = "python benchmarks/responses_efficiency.py" + "".join(
        f" {flag} {value}"
        for flag, value in (
            ("--sessions-per-source", args.sessions_per_source),
            ("--max-turns", args.max_turns),
            ("--engine", args.engine if args.engine != "openai" else None),
            ("--write-md", args.write_md),
        )
        if value is not None
    )
    text = markdown(cells, command, elapsed, args.engine)
    sys.stdout.write(text)
    if args.json:
        args.json.write_text(
            json.dumps({"|".join(key): vars(cell) for key, cell in cells.items()}, indent=1), encoding="utf-8"
        )
    if args.write_md:
        write_section(args.write_md, text)
    jittered = cells[("TOTAL", "jittered", "telos_wrap")]
    return (
        0 if (jittered.efficiency or 0) >= 0.97 and cells[("TOTAL", "jittered", "as sent")].read == 0 else 1
    )


if __name__ == "__main__":
    raise SystemExit(main())
