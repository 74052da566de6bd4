"""Client-side overhead of telos_wrap, measured against the SDK's own client-side work.

Same calls with and without ``telos_wrap.patch()``, through the real SDKs and a transport that
answers instantly with a canned response (network time is zero, only client-side work counts),
alternating A/B in small batches in one run, each call timed in this thread's CPU time
(``time.thread_time``: the SDKs' client work, the instant transport and ``asyncio.run`` of an async
call all run in it; ``--wall`` times elapsed time instead, which on a shared machine also counts
the time other processes held the core). Conversations of 10, 100 and 1,000 messages are built
from a real session in ../shared/traces. Prints, per case: median client-side time unpatched,
patched, their ratio and the added milliseconds; then the added time per turn of a session replayed
turn by turn (Anthropic 500 turns, OpenAI 200: its SDK alone takes ~0.2 s per call at 400
messages); then the size of a 1,000-turn session's state.

    python benchmarks/overhead.py [--traces ../shared/traces] [--rounds 15] [--quick] [--wall]

``--against TREE`` compares this checkout's telos_wrap with the one in another checkout (``TREE/src``,
e.g. a worktree at the previous commit) in the same minutes: one worker process per tree (this
script with ``PYTHONPATH=<tree>/src``), asked in turn (A/B/B/A...) for batches of unpatched and
patched calls, each call timed in CPU time (``time.thread_time``: a neighbour's load on a shared
machine stretches wall time, much less the CPU time the call itself uses). Prints per case and
tree the median and the minimum CPU time unpatched and patched, their ratio and the added
microseconds; first, the function calls telos adds to one call (counted by ``cProfile``:
deterministic, load-free).

    python benchmarks/overhead.py --against ../base-checkout [--rounds 40] [--cases "anthropic sync 10"]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import os
import pstats
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai

import telos_wrap
from telos_wrap.replay.traces import group_sessions, load_trace

ROOT = Path(__file__).resolve().parent.parent

ANTHROPIC_REPLY = json.dumps(
    {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "model": "claude-opus-5",
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 1,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 0,
        },
    }
).encode()
ANTHROPIC_STREAM = "".join(
    f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
    for event in [
        {
            "type": "message_start",
            "message": {**json.loads(ANTHROPIC_REPLY), "content": [], "stop_reason": None},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
).encode()
OPENAI_REPLY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4.1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 110,
            "completion_tokens": 1,
            "total_tokens": 111,
            "prompt_tokens_details": {"cached_tokens": 100},
        },
    }
).encode()
_CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4.1"}
OPENAI_STREAM = (
    "".join(
        f"data: {json.dumps(chunk)}\n\n"
        for chunk in [
            {
                **_CHUNK,
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}
                ],
            },
            {**_CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {**_CHUNK, "choices": [], "usage": json.loads(OPENAI_REPLY)["usage"]},
        ]
    ).encode()
    + b"data: [DONE]\n\n"
)


def answer(request: httpx2.Request) -> httpx2.Response:
    """The instant vendor: a canned response, streamed when the request asks for a stream."""
    stream = b'"stream":true' in request.content
    if request.url.path.endswith("/messages"):
        body, kind = (
            (ANTHROPIC_STREAM, "text/event-stream") if stream else (ANTHROPIC_REPLY, "application/json")
        )
    else:
        body, kind = (OPENAI_STREAM, "text/event-stream") if stream else (OPENAI_REPLY, "application/json")
    return httpx2.Response(200, content=body, headers={"content-type": kind})


def load_messages(traces: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The longest real session of each API: its last request's kwargs."""
    anthropic_session = max(
        group_sessions(load_trace(traces / "mini-swe-agent.as-anthropic.jsonl.xz")), key=len
    )
    openai_session = max(group_sessions(load_trace(traces / "mini-swe-agent.jsonl.xz")), key=len)
    return anthropic_session[-1].kwargs, openai_session[-1].kwargs


def conversation(base: dict[str, Any], n: int, api: str) -> dict[str, Any]:
    """A request with ``n`` messages, cycling the real session's turns (ending on a user turn)."""
    source = [m for m in base["messages"] if m["role"] not in ("system", "developer")]
    head = [m for m in base["messages"] if m["role"] in ("system", "developer")]
    messages: list[dict[str, Any]] = []
    while len(messages) < n:
        messages.extend(source)
    messages = messages[:n]
    while messages[-1]["role"] != "user":
        messages.pop()
    if api == "anthropic":
        return {"model": "claude-opus-5", "max_tokens": 256, "system": base["system"], "messages": messages}
    return {"model": "gpt-4.1", "messages": head + messages}


Call = Callable[[], Any]


def make_calls(kwargs: dict[str, Any], api: str) -> dict[str, Call]:
    """sync / async / stream calls of one request through fresh real SDK clients."""
    if api == "anthropic":
        sync_client = anthropic.Anthropic(
            api_key="bench", http_client=httpx2.Client(transport=httpx2.MockTransport(answer))
        )
        async_client = anthropic.AsyncAnthropic(
            api_key="bench", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
        )

        def stream() -> Any:
            with sync_client.messages.stream(**kwargs) as events:
                return events.get_final_message()

        return {
            "sync": lambda: sync_client.messages.create(**kwargs),
            "async": lambda: asyncio.run(async_client.messages.create(**kwargs)),
            "stream": stream,
        }
    osync = openai.OpenAI(api_key="bench", http_client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    oasync = openai.AsyncOpenAI(
        api_key="bench", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    )

    def ostream() -> Any:
        return list(osync.chat.completions.create(**kwargs, stream=True))

    return {
        "sync": lambda: osync.chat.completions.create(**kwargs),
        "async": lambda: asyncio.run(oasync.chat.completions.create(**kwargs)),
        "stream": ostream,
    }


#: The clock of every figure: this thread's CPU time (``--wall``: elapsed time). On a shared machine
#: the elapsed time of a call includes the time other processes held the core; its CPU time much less.
CLOCK: list[Callable[[], float]] = [time.thread_time]


def timed(call: Call) -> float:
    clock = CLOCK[0]
    start = clock()
    call()
    return clock() - start


def ab(call: Call, rounds: int, batch: int = 4) -> tuple[float, float]:
    """Median seconds per call unpatched and patched, alternating batches of each."""
    plain: list[float] = []
    patched: list[float] = []
    for side in (False, True):  # warm both paths (imports, caches) before measuring
        telos_wrap.patch() if side else telos_wrap.unpatch()
        for _ in range(2):
            call()
    for _ in range(rounds):
        telos_wrap.unpatch()
        plain.extend(timed(call) for _ in range(batch))
        telos_wrap.patch()
        patched.extend(timed(call) for _ in range(batch))
    telos_wrap.unpatch()
    return statistics.median(plain), statistics.median(patched)


def per_turn_growth(
    base: dict[str, Any], turns: int, rounds: int, api: str = "anthropic"
) -> dict[int, float]:
    """Added ms per turn of a ``turns``-turn session replayed turn by turn.

    Each turn is sent twice back to back, unpatched and patched (alternating which goes first), so
    both calls see the same process state; the figure at turn ``t`` is the median of the paired
    differences over turns ``t-4 .. t+4`` and ``rounds`` fresh sessions.
    """
    requests = [conversation(base, 2 * t + 1, api) for t in range(turns)]
    transport = httpx2.MockTransport(answer)
    if api == "anthropic":
        client: Any = anthropic.Anthropic(api_key="bench", http_client=httpx2.Client(transport=transport))
        create = client.messages.create
    else:
        client = openai.OpenAI(api_key="bench", http_client=httpx2.Client(transport=transport))
        create = client.chat.completions.create
    checkpoints = (20, 100, turns)
    pairs: dict[int, list[float]] = {turn: [] for turn in checkpoints}
    for round_number in range(rounds):
        with telos_wrap.session(f"growth-{time.monotonic_ns()}-{round_number}"):
            for index, kwargs in enumerate(requests):
                seconds = {}
                for side in (False, True) if index % 2 else (True, False):
                    telos_wrap.patch() if side else telos_wrap.unpatch()
                    seconds[side] = timed(lambda kw=kwargs: create(**kw))
                turn = index + 1
                for checkpoint in checkpoints:
                    if abs(turn - checkpoint) <= 4:
                        pairs[checkpoint].append(seconds[True] - seconds[False])
    telos_wrap.unpatch()
    return {turn: statistics.median(diffs) * 1000 for turn, diffs in pairs.items()}


def state_size(base: dict[str, Any], turns: int) -> tuple[int, float]:
    """Bytes of a ``turns``-turn session's durable state, and peak traced MiB while building it."""
    client = anthropic.Anthropic(
        api_key="bench", http_client=httpx2.Client(transport=httpx2.MockTransport(answer))
    )
    telos_wrap.patch()
    tracemalloc.start()
    try:
        with telos_wrap.session("state-size") as session:
            for t in range(turns):
                client.messages.create(**conversation(base, 2 * t + 1, "anthropic"))
        _, peak = tracemalloc.get_traced_memory()
        size = len(session.state.dumps())
    finally:
        tracemalloc.stop()
        telos_wrap.unpatch()
    return size, peak / 2**20


AB_CASES = (
    "anthropic sync 10,anthropic stream 10,anthropic sync 100,anthropic async 100,"
    "openai sync 10,openai stream 10,openai sync 100"
)


def _cpu_times(call: Call, count: int) -> list[float]:
    return [timed(call) for _ in range(count)]


def _calls_counted(call: Call) -> int:
    """Function calls (Python and C) one call makes, counted by cProfile."""
    profiler = cProfile.Profile()
    profiler.runcall(call)
    return int(pstats.Stats(profiler).total_calls)  # type: ignore[attr-defined]


def worker(traces: Path) -> int:
    """The --against worker: answers ``<side> <batch> <case>`` lines on stdin with JSON CPU times.

    ``side`` is ``plain``, ``patched`` or ``count`` (function calls of one unpatched and one
    patched call). Every case is built and warmed once, before the first answer.
    """
    anthropic_base, openai_base = load_messages(traces)
    calls: dict[str, Call] = {}
    for api, base in (("anthropic", anthropic_base), ("openai", openai_base)):
        for n in (10, 100, 1000):
            for kind, call in make_calls(conversation(base, n, api), api).items():
                calls[f"{api} {kind} {n}"] = call
    logging.getLogger("telos_wrap").setLevel(logging.ERROR)  # a case's cache break is no news here
    print(json.dumps(telos_wrap.__file__), flush=True)
    for line in sys.stdin:
        side, batch, case = line.split(maxsplit=2)
        call = calls[case.strip()]
        if side == "count":
            counts = []
            for patched in (False, True):
                telos_wrap.patch() if patched else telos_wrap.unpatch()
                call(), call()
                counts.append(_calls_counted(call))
            print(json.dumps(counts), flush=True)
            continue
        telos_wrap.patch() if side == "patched" else telos_wrap.unpatch()
        print(json.dumps(_cpu_times(call, int(batch))), flush=True)
    return 0


class Worker:
    """One tree's worker process."""

    def __init__(self, tree: Path, traces: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree / "src")}
        command = [sys.executable, __file__, "--worker", "--traces", str(traces)]
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.module = json.loads(self.ask())

    def ask(self, line: str | None = None) -> str:
        assert self.process.stdin and self.process.stdout
        if line is not None:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        return self.process.stdout.readline()

    def times(self, side: str, batch: int, case: str) -> list[float]:
        return list(json.loads(self.ask(f"{side} {batch} {case}")))

    def close(self) -> None:
        assert self.process.stdin
        self.process.stdin.close()
        self.process.wait()


def against(other: Path, traces: Path, cases: list[str], rounds: int, batch: int = 4) -> None:
    """This tree (A) and ``other`` (B), interleaved A/B/B/A in one run; CPU-time medians."""
    trees = {"A": ROOT, "B": other.resolve()}
    workers = {name: Worker(tree, traces) for name, tree in trees.items()}
    for name, tree in trees.items():
        print(f"{name}: {tree} (telos_wrap from {workers[name].module})")
    print(f"\n{'case':26} {'tree':4} {'of':6} {'unpatched':>10} {'patched':>10} {'ratio':>6} {'added':>10}")
    counts: list[tuple[str, str, int, int]] = []
    try:
        for case in cases:
            for name in trees:  # counted first (after two calls of each side), then timed
                plain_calls, patched_calls = json.loads(workers[name].ask(f"count 1 {case}"))
                counts.append((case, name, plain_calls, patched_calls))
            samples = {(name, side): [] for name in trees for side in ("plain", "patched")}
            for name in trees:  # warm each side of both trees before measuring
                for side in ("plain", "patched"):
                    workers[name].times(side, 2, case)
            for round_number in range(rounds):
                order = ("A", "B") if round_number % 2 == 0 else ("B", "A")
                sides = ("plain", "patched") if round_number % 4 < 2 else ("patched", "plain")
                for name in order:
                    for side in sides:
                        samples[name, side].extend(workers[name].times(side, batch, case))
            for name in trees:
                for label, pick in (("median", statistics.median), ("min", min)):
                    plain = pick(samples[name, "plain"])
                    patched = pick(samples[name, "patched"])
                    print(
                        f"{case + ' msgs':26} {name:4} {label:6} {plain * 1e3:8.3f}ms {patched * 1e3:8.3f}ms "
                        f"{patched / plain:6.2f} {(patched - plain) * 1e6:+8.1f}us",
                        flush=True,
                    )
        print(f"\n{'function calls per call':26} {'tree':4} {'unpatched':>10} {'patched':>10} {'added':>8}")
        for case, name, plain_calls, patched_calls in counts:
            print(
                f"{case + ' msgs':26} {name:4} {plain_calls:10} {patched_calls:10} "
                f"{patched_calls - plain_calls:+8}"
            )
    finally:
        for each in workers.values():
            each.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and a 200-turn growth run")
    parser.add_argument("--against", type=Path, help="another checkout to compare with, A/B in one run")
    parser.add_argument("--cases", default=AB_CASES, help="--against: comma-separated '<api> <kind> <n>'")
    parser.add_argument("--wall", action="store_true", help="time elapsed time, not this thread's CPU time")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.wall:
        CLOCK[0] = time.perf_counter
    if args.worker:
        return worker(args.traces)
    if args.against:
        cases = [case.strip() for case in args.cases.split(",")]
        against(args.against, args.traces, cases, 4 if args.quick else args.rounds)
        return 0
    rounds = 4 if args.quick else args.rounds
    anthropic_base, openai_base = load_messages(args.traces)
    print(f"clock: {'elapsed (--wall)' if args.wall else 'CPU time of the calling thread'}")
    print(f"{'case':34} {'unpatched':>10} {'patched':>10} {'ratio':>6} {'added':>9}")
    for api, base in (("anthropic", anthropic_base), ("openai", openai_base)):
        for n in (10, 100, 1000):
            calls = make_calls(conversation(base, n, api), api)
            for kind, call in calls.items():
                plain, patched = ab(call, rounds)
                case = f"{api} {kind} {n} msgs"
                print(
                    f"{case:34} {plain * 1e3:9.2f}ms {patched * 1e3:9.2f}ms "
                    f"{patched / plain:6.2f} {(patched - plain) * 1e3:+8.2f}ms",
                    flush=True,
                )
    for api, base, turns in (
        ("anthropic", anthropic_base, 200 if args.quick else 500),
        ("openai", openai_base, 100 if args.quick else 200),
    ):
        growth = per_turn_growth(base, turns, max(3, rounds // 3), api)
        print(f"\nadded time per turn, one session replayed turn by turn ({api} sync):")
        for turn, added in growth.items():
            print(f"  turn {turn:4}: {added:+.2f} ms")
        if growth[20] > 0:
            print(f"  turn {turns} / turn 20: {growth[turns] / growth[20]:.2f}x")
    size, peak = state_size(anthropic_base, 200 if args.quick else 1000)
    print(
        f"\nsession state after {200 if args.quick else 1000} turns: {size / 1024:.1f} KiB serialized; "
        f"peak traced memory while replaying: {peak:.1f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
