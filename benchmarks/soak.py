"""A worker that runs for weeks: resident memory and per-call time over 100,000 conversations.

One process, ``telos_wrap.patch()``, one anthropic and one openai client, the default store, and a
vendor that answers at once in-process (a canned response through the SDK's own ``MockTransport``,
as ``overhead.py`` does: network time is zero, every byte of client-side work is counted). The
conversations are a mix a production worker sees:

* short (2 turns, 19 in 20) and long (8 turns, 1 in 20);
* one prompt (a ~20 KB agent system prompt with a clock line, shared by every such conversation)
  and many prompts (1,000 different ~4 KB prompts, also with a clock);
* implicit sessions (2 in 4), hint-named sessions (``telos_hint={"session": id}``, 1 in 4) and
  sessions the application opens (``with telos_wrap.session(id)``, 1 in 4);
* Anthropic Messages (3 in 4) and OpenAI Chat Completions (1 in 4).

Every ``--every`` conversations (after a full garbage collection) it samples the process's resident
memory and the median time of the calls since the last sample, and prints a line; at the end the
ratios the acceptance asks for: resident memory at the last sample over the one at 10,000
conversations (flat: within 5%), the median per-call time of the last window over the window at
10,000 and at 1,000 (flat: within 10%). It starts with the issue's own case measured alone: 2-turn
implicit Anthropic conversations sharing one 50 KB prompt with a clock, the resident bytes per
additional conversation from 1,000 to 3,000.

    python benchmarks/soak.py [--conversations 100000] [--every 1000] [--plot docs/soak.png]
        [--json soak.json]

``--plot`` needs matplotlib (``pip install -e '.[plot]'``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import answer

import telos_wrap

PAGE = os.sysconf("SC_PAGE_SIZE")

RULES = [
    "Quote the order record verbatim; never guess a delivery date.",
    "Ask for the order number before looking anything up.",
    "Refunds above 200 EUR need a supervisor's approval; say so and open a ticket.",
    "Never reveal another customer's address, phone number or order history.",
    "Answer in the customer's language; keep answers under 120 words.",
    "Escalate threats, legal questions and press enquiries to a human at once.",
]


def prompt(words: int, seed: int) -> str:
    """A system prompt of about ``words`` words: numbered rules, different per ``seed``."""
    lines, count = [f"You are support agent #{seed} of a bookshop chain (profile {seed:06d}).", ""], 0
    while count < words:
        rule = RULES[(count + seed) % len(RULES)]
        lines.append(f"Rule {len(lines) - 1} for department {seed % 97}: {rule}")
        count += len(rule.split()) + 5
    return "\n".join(lines) + "\n"


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class Worker:
    """The process's clients, and one conversation of each kind."""

    def __init__(self) -> None:
        telos_wrap.patch()
        self.anthropic = anthropic.Anthropic(
            api_key="soak", http_client=httpx2.Client(transport=httpx2.MockTransport(answer))
        )
        self.openai = openai.OpenAI(
            api_key="soak", http_client=httpx2.Client(transport=httpx2.MockTransport(answer))
        )
        self.issue = prompt(8_000, 1)  # ~50 KB: the issue's case
        self.one = prompt(3_200, 2)  # ~20 KB
        self.many = [prompt(650, 1000 + k) for k in range(1_000)]  # ~4 KB each
        self.times: list[float] = []
        #: CPU time of each call (this thread's): on a shared machine, wall time measures the neighbours.
        self.cpu: list[float] = []
        #: When each call ended (wall clock shared with the control process, see ``Control``).
        self.stamps: list[float] = []

    def call(self, api: str, system: str, messages: list[dict[str, Any]], hint: dict[str, Any]) -> None:
        extra = {"telos_hint": hint} if hint else {}
        start, cpu = time.perf_counter(), time.thread_time()
        if api == "anthropic":
            self.anthropic.messages.create(
                model="claude-opus-5", max_tokens=64, system=system, messages=messages, **extra
            )
        else:
            self.openai.chat.completions.create(
                model="gpt-5.1", messages=[{"role": "system", "content": system}, *messages], **extra
            )
        self.times.append(time.perf_counter() - start)
        self.cpu.append(time.thread_time() - cpu)
        self.stamps.append(time.time())

    def conversation(self, i: int, *, api: str, base: str, turns: int, naming: str) -> None:
        history: list[dict[str, Any]] = [{"role": "user", "content": f"Hello, where is my order {i}?"}]
        hint = {"session": f"hinted-{i}"} if naming == "hinted" else {}

        def run() -> None:
            nonlocal history
            for turn in range(turns):
                clock = f"Current time: 2026-11-26 09:{(i // 60) % 60:02d}:{(i + turn) % 60:02d}"
                self.call(api, f"{base}{clock}", history, hint)
                history = [
                    *history,
                    {"role": "assistant", "content": f"Order {i} left the warehouse on day {turn}."},
                    {"role": "user", "content": f"And item {turn} of it?"},
                ]

        if naming == "explicit":
            with telos_wrap.session(f"explicit-{i}"):
                run()
        else:
            run()

    def mixed(self, i: int) -> None:
        """Conversation ``i`` of the mix (see the module docstring)."""
        api = "openai" if i % 4 == 3 else "anthropic"
        base = self.one if i % 2 == 0 else self.many[(i // 2) % len(self.many)]
        turns = 8 if i % 20 == 7 else 2
        naming = ("implicit", "hinted", "implicit", "explicit")[(i // 4) % 4]
        self.conversation(i, api=api, base=base, turns=turns, naming=naming)

    def issue_case(self, i: int) -> None:
        """The issue's case: 2-turn implicit Anthropic conversations sharing the 50 KB prompt."""
        self.conversation(i, api="anthropic", base=self.issue, turns=2, naming="implicit")


def per_conversation(worker: Worker, start: int) -> dict[str, float]:
    """Bytes per additional conversation of the issue's case, from 1,000 to 3,000."""
    for i in range(start, start + 1_000):
        worker.issue_case(i)
    gc.collect()
    before = rss()
    for i in range(start + 1_000, start + 3_000):
        worker.issue_case(i)
    gc.collect()
    return {"rss_per_conversation": (rss() - before) / 2_000}


class Control(threading.Thread):
    """Fresh processes running conversations 1 to 1,000 of the same mix, side by side with the soak.

    Per-call CPU time on a shared machine moves with its load (caches, frequency, a neighbour on the
    other hyperthread), by more than the 10% the acceptance allows. So the soak does not compare its
    last window with its first one alone: a control process, started afresh again and again, runs the
    first 1,000 conversations at the same time, and every window's median is divided by the control's
    median over the same wall-clock interval. A worker whose accumulated state slows its calls keeps
    a rising ratio; a machine that gets busier raises both sides.
    """

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.records: list[tuple[float, float]] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            with subprocess.Popen(
                [sys.executable, __file__, "--control-child"], stdout=subprocess.PIPE, text=True
            ) as child:
                assert child.stdout is not None
                for line in child.stdout:
                    batch = [(t, c) for t, c in json.loads(line)]
                    with self.lock:
                        self.records.extend(batch)
                    if self.stopped.is_set():
                        child.kill()
                        return
            if child.returncode != 0:
                print(f"control process exited with {child.returncode}", file=sys.stderr, flush=True)
                return

    def median_between(self, start: float, end: float) -> float | None:
        """The control's median over ``[start, end)``; forgets what is older than ``end``.

        Forgetting matters: records kept for the whole run would grow the soak's own memory (and
        the garbage collector's work on every call) with time, which is what the soak measures.
        """
        with self.lock:
            window = [c for t, c in self.records if start <= t < end]
            self.records = [record for record in self.records if record[0] >= end]
        return statistics.median(window) if len(window) >= 100 else None


def control_child() -> None:
    """One control run: conversations 1 to 1,000 in a fresh process; prints (end, CPU) per call."""
    worker = Worker()
    for i in range(1, 1_001):
        worker.mixed(i)
        if i % 50 == 0:
            try:
                print(json.dumps(list(zip(worker.stamps, worker.cpu, strict=True))), flush=True)
            except BrokenPipeError:  # the soak ended
                return
            worker.stamps.clear()
            worker.cpu.clear()
            worker.times.clear()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=1_000)
    parser.add_argument("--plot", type=Path, default=None, help="write the curve as a PNG (matplotlib)")
    parser.add_argument("--json", type=Path, default=None, help="write the samples as JSON")
    parser.add_argument("--skip-issue-case", action="store_true")
    parser.add_argument(
        "--no-control",
        action="store_true",
        help="no fresh control process beside the soak (per-call ratios then move with the machine's load)",
    )
    parser.add_argument("--control-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--from-log", type=Path, default=None, help="summarize (and --plot) what an earlier run printed"
    )
    args = parser.parse_args(argv)
    if args.control_child:
        control_child()
        return {}
    if args.from_log:
        result = from_log(args.from_log)
        summarize(result)
        if args.plot:
            plot(result, args.plot)
        return result

    worker = Worker()
    result: dict[str, Any] = {"conversations": args.conversations, "every": args.every}
    if not args.skip_issue_case:
        case = per_conversation(worker, 10_000_000)
        result["issue_case"] = case
        print(
            "issue case (2-turn implicit conversations, one 50 KB prompt with a clock), 1,000 -> 3,000: "
            f"{case['rss_per_conversation'] / 1e3:.2f} KB resident per additional conversation",
            flush=True,
        )
        worker.times.clear()
        worker.cpu.clear()
        worker.stamps.clear()
    control = None if args.no_control else Control()
    if control:
        control.start()
    samples: list[dict[str, float]] = []
    started = time.perf_counter()
    window_start = time.time()
    print(
        f"{'conversations':>13} {'calls':>8} {'RSS MB':>8} {'median ms/call':>15} {'elapsed s':>10} "
        f"{'median CPU ms/call':>19} {'/ fresh process':>16}"
    )
    for i in range(1, args.conversations + 1):
        worker.mixed(i)
        if i % args.every == 0:
            gc.collect()
            sample = {
                "conversations": i,
                "calls": len(worker.times),
                "rss": rss(),
                "median_call": statistics.median(worker.times),
                "median_cpu": statistics.median(worker.cpu),
                "elapsed": time.perf_counter() - started,
            }
            fresh = control.median_between(window_start, time.time()) if control else None
            if fresh:
                sample["fresh_cpu"] = fresh
                sample["relative_cpu"] = sample["median_cpu"] / fresh
            window_start = time.time()
            samples.append(sample)
            worker.times.clear()
            worker.cpu.clear()
            worker.stamps.clear()
            relative = f"{sample['relative_cpu']:>16.3f}" if fresh else f"{'-':>16}"
            print(
                f"{i:>13,} {sample['calls']:>8,} {sample['rss'] / 1e6:>8.1f} "
                f"{sample['median_call'] * 1e3:>15.3f} {sample['elapsed']:>10.0f} "
                f"{sample['median_cpu'] * 1e3:>19.3f} {relative}",
                flush=True,
            )
    if control:
        control.stopped.set()
    result["samples"] = samples
    summarize(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    if args.plot:
        plot(result, args.plot)
    return result


def from_log(path: Path) -> dict[str, Any]:
    """The samples an earlier run printed (its sample lines), for a run stopped before its end."""
    samples = []
    for line in path.read_text().splitlines():
        parts = [part for part in line.replace(",", "").split() if part != "-"]
        if len(parts) in (5, 6, 7) and all(part.replace(".", "").isdigit() for part in parts):
            conversations, calls, rss_mb, call_ms, elapsed = map(float, parts[:5])
            sample = {
                "conversations": int(conversations),
                "calls": int(calls),
                "rss": rss_mb * 1e6,
                "median_call": call_ms / 1e3,
                "elapsed": elapsed,
            }
            if len(parts) >= 6:
                sample["median_cpu"] = float(parts[5]) / 1e3
            if len(parts) == 7:
                sample["relative_cpu"] = float(parts[6])
            samples.append(sample)
    return {"samples": samples, "conversations": samples[-1]["conversations"] if samples else 0}


def _at(samples: list[dict[str, float]], conversations: int) -> dict[str, float]:
    return min(samples, key=lambda s: abs(s["conversations"] - conversations))


def summarize(result: dict[str, Any]) -> None:
    samples = result["samples"]
    if not samples:
        return
    last = samples[-1]
    ten = _at(samples, 10_000)
    one = _at(samples, 1_000)
    after = [s for s in samples if s["conversations"] >= ten["conversations"]]
    rss_values = [s["rss"] for s in after]
    key = "median_cpu" if "median_cpu" in last else "median_call"
    times = [s[key] for s in after]
    summary = {
        "rss_last_over_10k": last["rss"] / ten["rss"],
        "rss_range_after_10k": (min(rss_values) / ten["rss"], max(rss_values) / ten["rss"]),
        "call_last_over_10k": last[key] / ten[key],
        "call_last_over_1k": last[key] / one[key],
        "call_range_after_10k": (min(times) / ten[key], max(times) / ten[key]),
        "time": key,
    }
    result["summary"] = summary
    print(
        f"resident memory at {last['conversations']:,} / at {ten['conversations']:,} conversations: "
        f"{summary['rss_last_over_10k']:.3f} (every sample from {ten['conversations']:,} on: "
        f"{summary['rss_range_after_10k'][0]:.3f}-{summary['rss_range_after_10k'][1]:.3f})"
    )
    print(
        f"{'CPU' if key == 'median_cpu' else 'wall'} time per call (median), last window / window at "
        f"{ten['conversations']:,}: "
        f"{summary['call_last_over_10k']:.3f}; / window at {one['conversations']:,}: "
        f"{summary['call_last_over_1k']:.3f} (every window from {ten['conversations']:,} on: "
        f"{summary['call_range_after_10k'][0]:.3f}-{summary['call_range_after_10k'][1]:.3f})"
    )
    relative = [s for s in samples if "relative_cpu" in s]
    if relative:
        first, tenth, final = relative[0], _at(relative, 10_000), relative[-1]
        summary["relative_last_over_first"] = final["relative_cpu"] / first["relative_cpu"]
        summary["relative_last_over_10k"] = final["relative_cpu"] / tenth["relative_cpu"]
        print(
            "CPU time per call over a fresh process's at the same moment (load-independent): "
            f"{first['relative_cpu']:.3f} at {first['conversations']:,} conversations, "
            f"{tenth['relative_cpu']:.3f} at {tenth['conversations']:,}, "
            f"{final['relative_cpu']:.3f} at {final['conversations']:,}; last / first "
            f"{summary['relative_last_over_first']:.3f}, "
            f"last / 10,000 {summary['relative_last_over_10k']:.3f}"
        )


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result["samples"]
    x = [s["conversations"] for s in samples]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    top.plot(x, [s["rss"] / 1e6 for s in samples], color="tab:blue")
    top.set_ylabel("resident memory (MB)")
    top.set_ylim(bottom=0)
    top.grid(alpha=0.3)
    bottom.plot(x, [s["median_call"] * 1e3 for s in samples], color="tab:orange", label="wall")
    if all("median_cpu" in s for s in samples):
        bottom.plot(x, [s["median_cpu"] * 1e3 for s in samples], color="tab:green", label="CPU")
    relative = [s for s in samples if "relative_cpu" in s]
    if relative:
        ratio = bottom.twinx()
        ratio.plot(
            [s["conversations"] for s in relative],
            [s["relative_cpu"] for s in relative],
            color="tab:red",
            linestyle="--",
            label="CPU / fresh process (right)",
        )
        ratio.set_ylim(0, max(2.0, max(s["relative_cpu"] for s in relative) * 1.2))
        ratio.set_ylabel("ratio to a fresh process")
        ratio.legend(loc="upper right")
    bottom.legend(loc="lower right")
    bottom.set_ylabel("median ms per call")
    bottom.set_ylim(bottom=0)
    bottom.set_xlabel("conversations through one process")
    bottom.grid(alpha=0.3)
    fig.suptitle("benchmarks/soak.py: one patched worker, mixed conversations")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
