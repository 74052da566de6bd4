"""The output filter on real command outputs: tokens removed per family, and what a session costs.

    python benchmarks/output_filter.py [--traces DIR] [--sessions-per-source N] [--max-turns N]
        [--write-md BENCHMARKS.md]

Sources: the command outputs of the trace sessions ``mini-swe-agent`` and ``swe-agent`` (in
../shared/traces an agent's command is a fenced block in its message and the output comes back as
the next user message; here each such pair becomes what a tool-calling agent sends: an Anthropic
``tool_use`` / ``tool_result`` round, an OpenAI ``tool_calls`` / ``tool`` message), plus the noisy
families of the fidelity corpus (``tests/filters/filter_corpus``: colored, redrawn, repeated and
spinner output, test runners, installs, git, listings, lint and build output).

* **Families** — every output, through ``filters.decide`` exactly as the bridge pass calls it (in
  conversation order, so an output identical to an earlier one of its session is a repeat): tokens
  (UTF-8 bytes / 4, the emulator's rule) before, after ``safe`` and after ``aggressive``, per family
  (``filters.command.family``; ``repeat`` for the pointers).
* **Sessions** — each session's tool-result tokens at its last request (every result as first
  filtered: what the last request carries), off / safe / aggressive; then the session replayed
  through the real SDKs under ``patch()`` to the emulator (Anthropic and OpenAI cache rules), once
  with caching alone (``output_filter="off"``) and once with ``"aggressive"``: input cost in
  uncached-token units (reads 0.1x; Anthropic writes 1.25x).

Deterministic (manual clocks, fixed ids). ``--write-md`` replaces the "Output filter" section.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import telos_wrap
from telos_wrap.filters import decide
from telos_wrap.filters.command import family
from telos_wrap.replay.runner import TELOS, patched, replay
from telos_wrap.replay.traces import TraceRequest, group_sessions, load_trace

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "filters" / "filter_corpus"
SECTION = "## Output filter"
SOURCES = ("mini-swe-agent", "swe-agent")
_FENCE = {
    "mini-swe-agent": re.compile(r"```bash\n(.*?)\n```", re.S),
    "swe-agent": re.compile(r"```\n?(.*?)\n?```", re.S),
}


def tokens(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or () if isinstance(part, dict))


def rounds(source: str, final: dict[str, Any]) -> tuple[str, str, list[tuple[str, str, str]]]:
    """(system, task, [(assistant text, command, output)]) of a session's final request."""
    messages = final["messages"]
    system = _text(messages[0]["content"]) if messages[0]["role"] == "system" else ""
    rest = messages[1:] if system else messages
    task = _text(rest[0]["content"])
    found = []
    for index in range(1, len(rest) - 1):
        said, answer = rest[index], rest[index + 1]
        if said["role"] != "assistant" or answer["role"] != "user":
            continue
        commands = _FENCE[source].findall(_text(said["content"]))
        if commands:
            found.append((_text(said["content"]), commands[-1].strip(), _text(answer["content"])))
    return system, task, found


def as_anthropic(system: str, task: str, steps: list[tuple[str, str, str]], model: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for n, (said, command, output) in enumerate(steps):
        call = f"toolu_{n:03d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": said},
                    {"type": "tool_use", "id": call, "name": "bash", "input": {"command": command}},
                ],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": output}]}
        )
    tool = {
        "name": "bash",
        "description": "Run a bash command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
    return {"model": model, "max_tokens": 64, "system": system, "tools": [tool], "messages": messages}


def as_openai(system: str, task: str, steps: list[tuple[str, str, str]], model: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": task},
    ]
    for n, (said, command, output) in enumerate(steps):
        call = f"call_{n:03d}"
        messages.append(
            {
                "role": "assistant",
                "content": said,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call, "content": output})
    tool = {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a bash command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
    return {"model": model, "tools": [tool], "messages": messages}


def filtered(steps: list[tuple[str, str, str]], mode: str) -> list[tuple[str, str]]:
    """(family, text as sent) of every output, in order, as the bridge pass decides them."""
    seen: set[str] = set()
    out = []
    for _, command, output in steps:
        decision = decide(output, mode, command=command, tool="bash")
        kind = family(command, output, "bash")
        if output in seen or (decision.filter_id is not None and decision.text in seen):
            again = decide(output, mode, command=command, tool="bash", seen_before=True)
            if again.filter_id is not None:
                decision, kind = again, "repeat"
        seen.add(decision.text)
        out.append((kind, decision.text))
    return out


def corpus() -> Iterator[tuple[str, str | None, str]]:
    manifest = json.loads((CORPUS / "corpus.json").read_text(encoding="utf-8"))
    for name, spec in sorted(manifest.items()):
        if not spec["whole"] and not spec["is_error"]:
            yield name, spec["command"], (CORPUS / f"{name}.txt").read_bytes().decode("utf-8")


def replay_cost(sessions: list[list[TraceRequest]], engine: str, mode: str) -> tuple[float, int]:
    """(input cost in uncached-token units, input tokens) of the sessions under ``output_filter=mode``."""
    with patched():
        run = replay(
            sessions,
            TELOS,
            engine=engine,
            session_factory=lambda sid: telos_wrap.session(sid, output_filter=mode),
        )
    return run.cost, run.input


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    parser.add_argument(
        "--sessions-per-source", type=int, default=3, help="sessions replayed for the cost table"
    )
    parser.add_argument("--max-turns", type=int, default=30, help="requests replayed per session")
    parser.add_argument("--write-md", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    fam: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    session_rows = []
    replays: dict[str, list[tuple[str, list[TraceRequest], list[TraceRequest]]]] = {}
    for source in SOURCES:
        grouped = group_sessions(load_trace(args.traces / f"{source}.jsonl.xz"))
        for requests in grouped:
            final = requests[-1].kwargs
            system, task, steps = rounds(source, final)
            if not steps:
                continue
            sent = {mode: filtered(steps, mode) for mode in ("off", "safe", "aggressive")}
            for (_, _, output), (_, safe_text), (kind, aggr_text) in zip(
                steps, sent["safe"], sent["aggressive"], strict=True
            ):
                row = fam[f"{source}: {kind}"]
                row[0] += tokens(output)
                row[1] += tokens(safe_text)
                row[2] += tokens(aggr_text)
            totals = {mode: sum(tokens(text) for _, text in sent[mode]) for mode in sent}
            session_rows.append((source, requests[0].session, len(steps), totals))
            turns = steps[: args.max_turns]
            anthropic_requests = [
                TraceRequest(
                    requests[0].session,
                    n,
                    "anthropic",
                    as_anthropic(system, task, turns[:n], "claude-sonnet-4-5"),
                )
                for n in range(len(turns) + 1)
            ]
            openai_requests = [
                TraceRequest(requests[0].session, n, "openai", as_openai(system, task, turns[:n], "gpt-4o"))
                for n in range(len(turns) + 1)
            ]
            replays.setdefault(source, []).append((requests[0].session, anthropic_requests, openai_requests))
    for name, command, text in corpus():
        d_safe = decide(text, "safe", command=command)
        d_aggr = decide(text, "aggressive", command=command)
        kind = "noisy" if name.startswith("noisy_") else family(command, text)
        row = fam[f"corpus: {kind}"]
        row[0] += tokens(text)
        row[1] += tokens(d_safe.text)
        row[2] += tokens(d_aggr.text)
    lines = [
        SECTION,
        "",
        f"Measured with `python benchmarks/output_filter.py --sessions-per-source {args.sessions_per_source} "
        f"--max-turns {args.max_turns}` (tokens: UTF-8 bytes / 4, the emulator's rule). Off by default; "
        "see docs/output-filter.md.",
        "",
        "**Per family** — the tool outputs of the trace sessions (every session) and of the fidelity corpus; "
        "file reads, searches and diffs are never cut (a repeated one becomes a pointer, `repeat`):",
        "",
        "| family | outputs' tokens | safe | removed | aggressive | removed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key in sorted(fam):
        before, safe_after, aggr_after = fam[key]
        lines.append(
            f"| {key} | {before:,} | {safe_after:,} | {1 - safe_after / before:.1%} | {aggr_after:,} | "
            f"{1 - aggr_after / before:.1%} |"
        )
    lines += [
        "",
        "**Per source** — tool-result tokens at each session's last request (every result as it was "
        "first sent), summed over the source's sessions:",
        "",
        "| source | sessions | tool results | off | safe | aggressive | aggressive removes |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for source in SOURCES:
        rows = [r for r in session_rows if r[0] == source]
        off = sum(r[3]["off"] for r in rows)
        safe_total = sum(r[3]["safe"] for r in rows)
        aggr = sum(r[3]["aggressive"] for r in rows)
        lines.append(
            f"| {source} | {len(rows)} | {sum(r[2] for r in rows):,} | {off:,} | {safe_total:,} | "
            f"{aggr:,} | {1 - aggr / off:.1%} |"
        )
    worst = min(
        (1 - r[3]["aggressive"] / r[3]["off"], r[1]) for r in session_rows if r[0] == "mini-swe-agent"
    )
    lines += [
        "",
        f"Fewest removed in one mini-swe-agent session: {worst[0]:.1%} (`{worst[1]}`).",
        "",
        "**Cost** — the first sessions of each source replayed as tool-calling conversations through the "
        "real SDKs under `patch()` to the emulator; input cost in uncached-token units, caching alone "
        '(`output_filter="off"`) and caching + `"aggressive"`:',
        "",
        "| source | engine | sessions | requests | input tokens, caching alone | cost "
        "| input tokens, + filter | cost | cost saved |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for source in SOURCES:
        chosen = replays.get(source, [])[: args.sessions_per_source]
        for engine, index in (("anthropic", 1), ("openai", 2)):
            sessions = [list(item[index]) for item in chosen]
            cost_off, input_off = replay_cost(sessions, engine, "off")
            cost_on, input_on = replay_cost(sessions, engine, "aggressive")
            lines.append(
                f"| {source} | {engine} | {len(sessions)} | {sum(map(len, sessions)):,} | {input_off:,} | "
                f"{cost_off:,.0f} | {input_on:,} | {cost_on:,.0f} | {1 - cost_on / cost_off:.1%} |"
            )
    lines.append("")
    text = "\n".join(lines)
    print(text)
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if args.write_md is not None:
        write_section(args.write_md, text)


def write_section(path: Path, section: str) -> None:
    """Replace (or append) this benchmark's section of ``path``."""
    old = path.read_text(encoding="utf-8")
    start = old.find(SECTION + "\n")
    if start < 0:
        path.write_text(old.rstrip("\n") + "\n\n" + section, encoding="utf-8")
        return
    end = old.find("\n## ", start + len(SECTION))
    path.write_text(old[:start] + section + (old[end + 1 :] if end >= 0 else ""), encoding="utf-8")


if __name__ == "__main__":
    main()
