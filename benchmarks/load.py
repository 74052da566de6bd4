"""Sessions under load: many concurrent async sessions, a real Redis behind a relay that adds latency or
stalls, the emulator as the vendor over real HTTP.

What runs (all on 127.0.0.1, all stopped at the end):

* a ``redis-server`` started here (``--save '' --appendonly no``, as ``.ci/run`` starts it);
* a TCP relay in front of it (a child process) that delays every client→server chunk by the chosen
  latency, and on command holds every byte in both directions (a Redis that accepts connections and
  never answers) until released;
* the built-in emulator behind a real HTTP server (``telos_wrap.emulator.serve``, a child process);
* in this process, ``--sessions`` asyncio tasks, each one session of ``--turns`` turns through one
  ``anthropic.AsyncAnthropic`` client, and a lag monitor task (sleeps 1 ms, records how late it
  wakes: the event loop's longest stall).

Passes: unpatched once (the SDK alone; Redis is not used), then patched with the store behind the
relay at 0 ms, at ``--latency`` ms, and stalled for ``--stall`` seconds in the middle of the run
(then released: the sessions must recover). Per pass: throughput, per-call latency p50/p99 and the
difference to unpatched, telos' own time on each call's request path (the awaited store call
included) p50/p99/max, the longest loop stall, the store's breaker counters, and a check that every
session's stored state holds exactly its own turns and usage.

    python benchmarks/load.py [--sessions 500] [--turns 20] [--latency 5] [--stall 6]
                              [--scenarios 0ms,latency,stalled] [--think S] [--quick]

The emulator answers at once, so by default every session sends its next turn as soon as the last
one returns: 500 tasks always ready, a saturated loop, and each call's latency is mostly its wait
behind the other 499 (it measures throughput). ``--think S`` adds the time a real model takes to
answer: each session waits ``S`` seconds times a factor in [0.5, 1.5) (seeded per session and turn,
the same in every pass) before its next turn, so the load is what 500 live conversations offer
(about ``sessions / S`` calls a second) and a call's added latency is telos' own work plus what
queues behind it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing as mp
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2

import telos_wrap
from telos_wrap.patch import wrappers
from telos_wrap.sessions import RedisStore, Session

MODEL = "claude-opus-4-8"
SYSTEM = "You are the support agent of a shop. Cite the handbook.\n" + "".join(
    f"Rule {i}: answer in plain words and cite the handbook section you used.\n" for i in range(60)
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the relay (child process) ------------------------------------------------------------------------


def _relay_main(listen: int, upstream: int, latency: Any, stalled: Any, ready: Any, stop: Any) -> None:
    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: bool) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def read() -> None:
            try:
                while data := await reader.read(65536):
                    queue.put_nowait((loop.time() + (latency.value if delay else 0.0), data))
            except (ConnectionError, OSError):
                pass
            queue.put_nowait(None)

        async def write() -> None:
            try:
                while (item := await queue.get()) is not None:
                    deadline, data = item
                    while stalled.value:  # hold every byte until released
                        await asyncio.sleep(0.005)
                    if (wait := deadline - loop.time()) > 0:
                        await asyncio.sleep(wait)
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        await asyncio.gather(read(), write())

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            client_writer.close()
            return
        try:
            await asyncio.gather(
                forward(client_reader, server_writer, True), forward(server_reader, client_writer, False)
            )
        except (asyncio.CancelledError, ConnectionError, OSError):
            pass

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", listen, backlog=1024)
        ready.set()
        while not stop.is_set():  # bounded: the parent sets ``stop`` (and terminates us anyway)
            await asyncio.sleep(0.05)
        server.close()

    asyncio.run(main())


def _emulator_main(port: int, ready: Any, stop: Any) -> None:
    import socketserver

    from telos_wrap.emulator import Emulator, serve

    # This child process only: a listen backlog for hundreds of clients (the stdlib default is 5).
    socketserver.TCPServer.request_queue_size = 1024

    with serve(Emulator(), port=port):
        ready.set()
        stop.wait()


@dataclass
class Rig:
    """Redis, the relay and the emulator; ``close()`` stops all three."""

    redis_port: int
    relay_port: int
    http_port: int
    latency: Any
    stalled: Any
    processes: list[Any] = field(default_factory=list)
    stop: Any = None
    redis: subprocess.Popen[bytes] | None = None
    workdir: str = ""

    @property
    def store_url(self) -> str:
        return f"redis://127.0.0.1:{self.relay_port}/0"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def close(self) -> None:
        self.stalled.value = 0
        self.stop.set()
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
        if self.redis is not None:
            self.redis.terminate()
            self.redis.wait(timeout=10)
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_rig() -> Rig:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    ctx = mp.get_context("spawn")
    workdir = tempfile.mkdtemp(prefix="telos-load-")
    rig = Rig(free_port(), free_port(), free_port(), ctx.Value("d", 0.0), ctx.Value("i", 0), workdir=workdir)
    rig.stop = ctx.Event()
    rig.redis = subprocess.Popen(
        [
            binary,
            "--port",
            str(rig.redis_port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            workdir,
            "--maxclients",
            "10000",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    relay_ready, http_ready = ctx.Event(), ctx.Event()
    rig.processes = [
        ctx.Process(
            target=_relay_main,
            args=(rig.relay_port, rig.redis_port, rig.latency, rig.stalled, relay_ready, rig.stop),
            daemon=True,
        ),
        ctx.Process(target=_emulator_main, args=(rig.http_port, http_ready, rig.stop), daemon=True),
    ]
    try:
        for process in rig.processes:
            process.start()
        started = relay_ready.wait(30) and http_ready.wait(30)
    except BaseException:
        rig.close()  # never leave the redis-server behind
        raise
    if not started:
        rig.close()
        sys.exit("the relay or the emulator did not start")
    import redis

    client = redis.Redis(port=rig.redis_port)
    for _ in range(200):
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.025)
    client.close()
    return rig


# -- one pass -------------------------------------------------------------------------------------------


def messages_for(owner: int, turn: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for t in range(turn + 1):
        messages.append({"role": "user", "content": f"[{owner}] question {t}: " + "about my order " * 20})
        if t < turn:
            messages.append({"role": "assistant", "content": f"[{owner}] answer {t}: it ships tomorrow."})
    return messages


@dataclass
class PassResult:
    name: str
    calls: int
    seconds: float
    latencies: list[float]
    telos: list[float]
    max_stall: float
    steps: StepStats | None = None
    completed_during_stall: int = 0
    recovered_after: float | None = None
    breaker: Any = None
    state_ok: str = "-"
    gc: GcStats | None = None


@dataclass
class GcStats:
    """Garbage collections during a pass, and the objects the collector tracks after it."""

    full: int  # generation-2 collections: each walks every tracked object in the process
    longest_full: float
    total: float  # seconds spent in collections of any generation
    live: int  # tracked objects after the pass, its sessions still held


class GcTimer:
    """Times every collection (``gc.callbacks``): the full ones are the loop's longest stalls."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self.spent = 0.0  # seconds in collections so far (``StepTimer`` subtracts it from a step)
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            took = time.perf_counter() - self._started
            self.pauses.append((info["generation"], took))
            self.spent += took

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def stats(self) -> GcStats:
        full = [took for generation, took in self.pauses if generation == 2]
        total = sum(took for _, took in self.pauses)
        return GcStats(len(full), max(full, default=0.0), total, len(gc.get_objects()))


class LagMonitor:
    """Sleeps 1 ms at a time and records how late it wakes up (the loop's longest stall)."""

    def __init__(self) -> None:
        self.max_lag = 0.0
        self.running = True

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while self.running:
            expected = loop.time() + 0.001
            await asyncio.sleep(0.001)
            self.max_lag = max(self.max_lag, loop.time() - expected)


@dataclass
class StepStats:
    """How long single callbacks held the loop during a pass (``StepTimer``)."""

    count: int
    p99: float
    longest: float
    longest_what: str
    #: The longest step with the garbage collections that ran inside it taken out: the longest time
    #: the request path's own code (the SDK's and telos') held the loop.
    longest_outside_gc: float = 0.0
    #: Steps that held the loop 5 ms or longer with their garbage collections taken out.
    over_5ms_outside_gc: int = 0


class StepTimer:
    """Times every callback the event loop runs (each step of each task is one), by wrapping
    ``asyncio.events.Handle._run``, the pure-Python method every ``call_soon`` callback goes through.

    The lag monitor's stall is the sum of every callback that was ready before it (with hundreds of
    tasks ready, the SDK alone stalls the loop for tens of milliseconds); the longest *single* step is
    what a blocking call inside one request (a synchronous Redis round trip, say) would show: with
    the store 5 ms away, a synchronous store call makes a step of at least 5 ms.
    """

    def __init__(self, collections: GcTimer | None = None) -> None:
        self.durations: list[float] = []
        self.longest = 0.0
        self.longest_what = ""
        self.longest_outside_gc = 0.0
        self.over_5ms_outside_gc = 0
        self._collections = collections
        self._original: Any = None

    def __enter__(self) -> StepTimer:
        original = self._original = asyncio.events.Handle._run
        timer = self

        collections = self._collections

        def _run(handle: asyncio.events.Handle) -> None:
            collected = collections.spent if collections is not None else 0.0
            started = time.perf_counter()
            try:
                original(handle)
            finally:
                took = time.perf_counter() - started
                timer.durations.append(took)
                if took > timer.longest:
                    timer.longest = took
                    timer.longest_what = repr(handle)[:160]
                if collections is not None:
                    own = took - (collections.spent - collected)
                    if own > timer.longest_outside_gc:
                        timer.longest_outside_gc = own
                    if own >= 0.005:
                        timer.over_5ms_outside_gc += 1

        asyncio.events.Handle._run = _run  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]

    def stats(self) -> StepStats:
        return StepStats(
            len(self.durations),
            pct(self.durations, 0.99),
            self.longest,
            self.longest_what,
            self.longest_outside_gc,
            self.over_5ms_outside_gc,
        )


def timed_aprepare(samples: list[float]) -> Callable[..., Awaitable[Any]]:
    """``wrappers.aprepare_for_sending`` that records its own duration: telos' time on each call's
    request path."""
    original = wrappers.aprepare_for_sending

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            samples.append(time.perf_counter() - started)

    timed.original = original  # type: ignore[attr-defined]
    return timed


async def run_pass(
    name: str,
    rig: Rig,
    sessions: int,
    turns: int,
    store: RedisStore | None,
    stall: tuple[float, float] | None = None,
    think: float = 0.0,
) -> PassResult:
    """``sessions`` concurrent sessions of ``turns`` turns each; patched iff ``store`` is given."""
    latencies: list[float] = []
    telos_samples: list[float] = []
    finished_at: list[float] = []
    held: list[Session] = []
    http = httpx2.AsyncClient(limits=httpx2.Limits(max_connections=100, max_keepalive_connections=100))
    client = anthropic.AsyncAnthropic(
        api_key="load", base_url=rig.base_url, max_retries=0, timeout=120.0, http_client=http
    )
    monitor = LagMonitor()
    if store is not None:
        wrappers.aprepare_for_sending = timed_aprepare(telos_samples)  # type: ignore[assignment]

    async def one(owner: int) -> None:
        pace = random.Random(owner)
        # A ramp, not 500 connections in the same millisecond; with model time, conversations start
        # spread over one model answer, as live ones would be (not all in the same second).
        await asyncio.sleep(think * pace.random() if think else owner * 0.002)
        sess = telos_wrap.session(f"{name}-{owner}", store=store) if store is not None else None
        if sess is not None:
            held.append(sess)
            await sess.__aenter__()
        try:
            for turn in range(turns):
                if think and turn:
                    await asyncio.sleep(think * (0.5 + pace.random()))
                started = time.perf_counter()
                await client.messages.create(
                    model=MODEL, max_tokens=8, system=SYSTEM, messages=messages_for(owner, turn)
                )
                now = time.perf_counter()
                latencies.append(now - started)
                finished_at.append(now)
        finally:
            if sess is not None:
                await sess.__aexit__(None, None, None)

    recovered: list[float] | None = [] if stall else None

    async def staller(start: float, seconds: float) -> None:
        await asyncio.sleep(start)
        rig.stalled.value = 1
        await asyncio.sleep(seconds)
        rig.stalled.value = 0
        released = time.perf_counter()
        assert store is not None and recovered is not None
        # Bounded: how long after Redis answers again the breaker is closed (a probe succeeded).
        for _ in range(int(60 / 0.02)):
            if not store.breaker.is_open:
                recovered.append(time.perf_counter() - released)
                return
            await asyncio.sleep(0.02)

    lag_task = asyncio.ensure_future(monitor.run())
    started = time.perf_counter()
    stall_task = asyncio.ensure_future(staller(*stall)) if stall else None
    try:
        with GcTimer() as collections, StepTimer(collections) as steps:
            await asyncio.gather(*(one(n) for n in range(sessions)))
    finally:
        monitor.running = False
        await lag_task
        if store is not None:
            wrappers.aprepare_for_sending = wrappers.aprepare_for_sending.original  # type: ignore[attr-defined]
    seconds = time.perf_counter() - started
    result = PassResult(
        name, len(latencies), seconds, latencies, telos_samples, monitor.max_lag, steps.stats()
    )
    result.gc = collections.stats()
    if stall is not None:
        lo, hi = started + stall[0], started + stall[0] + stall[1]
        result.completed_during_stall = sum(lo <= t <= hi for t in finished_at)
    if store is not None:
        # After the run (and a stall's recovery), every session's stored state must hold exactly
        # its own turns and usage: written again once the store answered, nothing crossed. If the
        # breaker is still open, wait out its window: the first flush is then the probe.
        if store.breaker.is_open:
            await asyncio.sleep(store.breaker.max_backoff)
        for sess in held:
            await sess.aflush()
        if stall_task is not None:
            await stall_task
        if recovered is not None:
            result.recovered_after = recovered[0]
        result.breaker = store.breaker.stats()
        result.state_ok = check_states(store, held, turns)
        await store.aclose()
    await client.close()
    return result


def check_states(store: RedisStore, held: list[Session], turns: int) -> str:
    bad = 0
    for sess in held:
        stored = store.load(sess.id)
        if stored is None:
            bad += 1
            continue
        state = telos_wrap.sessions.SessionState.loads(stored.text)
        usage = sum(u.responses for u in state.usage.values())
        kinds = len(state.app.kinds) if state.app is not None else 0
        if state.requests != turns or usage != turns or kinds != 2 * turns - 1:
            bad += 1
    return "all exact" if bad == 0 else f"{bad} of {len(held)} sessions off"


# -- report -------------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(results: list[PassResult]) -> None:
    base = results[0]
    print(
        f"{'pass':22} {'calls':>6} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'+p50':>7} {'+p99':>7} "
        f"{'telos p50':>9} {'telos p99':>9} {'telos max':>9} {'loop stall':>10} {'step p99':>8} "
        f"{'longest step':>12}  state"
    )
    for r in results:
        p50, p99 = pct(r.latencies, 0.5) * 1e3, pct(r.latencies, 0.99) * 1e3
        d50 = p50 - pct(base.latencies, 0.5) * 1e3
        d99 = p99 - pct(base.latencies, 0.99) * 1e3
        steps = f"{'-':>8} {'-':>12}"
        if r.steps is not None:
            steps = f"{r.steps.p99 * 1e3:6.2f}ms {r.steps.longest * 1e3:10.1f}ms"
        telos = (
            f"{pct(r.telos, 0.5) * 1e3:9.2f} {pct(r.telos, 0.99) * 1e3:9.2f} {max(r.telos) * 1e3:9.1f}"
            if r.telos
            else f"{'-':>9} {'-':>9} {'-':>9}"
        )
        print(
            f"{r.name:22} {r.calls:6d} {r.calls / r.seconds:8.0f} {p50:8.1f} {p99:8.1f} "
            f"{d50 if r is not base else 0:+7.1f} {d99 if r is not base else 0:+7.1f} {telos} "
            f"{r.max_stall * 1e3:9.1f}ms {steps}  {r.state_ok}"
        )
    for r in results:
        if r.steps is not None:
            print(
                f"  {r.name}: longest step ({r.steps.count} steps): {r.steps.longest_what}; "
                f"outside garbage collection: longest {r.steps.longest_outside_gc * 1e3:.2f} ms, "
                f"{r.steps.over_5ms_outside_gc} of 5 ms or more"
            )
        if r.gc is not None:
            longest = r.gc.longest_full * 1e3
            print(
                f"  {r.name}: {r.gc.full} full garbage collections (longest {longest:.1f} ms), "
                f"{r.gc.total:.2f} s in all collections, {r.gc.live:,} tracked objects after the pass"
            )
    for r in results:
        if r.breaker is not None:
            b = r.breaker
            extra = (
                f", {r.completed_during_stall} calls completed while Redis was stalled"
                if r.completed_during_stall
                else ""
            )
            if r.recovered_after is not None:
                extra += f", breaker closed {r.recovered_after:.1f} s after Redis answered again"
            print(
                f"  {r.name}: breaker {b.state}; store failures (timeouts) {b.failures} (of them late, "
                f"already waiting when an earlier one opened the window: {b.late}), trips {b.trips}, "
                f"probes {b.probes}, calls that skipped the store {b.skipped}, in-flight calls cut short "
                f"{b.abandoned}, busy (no pooled connection in time) {b.busy}, events {dict(b.events)}{extra}"
            )


async def main_async(args: argparse.Namespace, rig: Rig) -> list[PassResult]:
    results = [await run_pass("unpatched", rig, args.sessions, args.turns, None, think=args.think)]
    telos_wrap.patch()
    try:
        for scenario in args.scenarios.split(","):
            store = RedisStore(
                rig.store_url,
                prefix="load:",
                timeout=args.timeout,
                backoff=args.backoff,
                max_backoff=args.backoff,
            )
            if scenario == "0ms":
                rig.latency.value = 0.0
                name = "patched, Redis 0 ms"
                results.append(await run_pass(name, rig, args.sessions, args.turns, store, think=args.think))
            elif scenario == "latency":
                rig.latency.value = args.latency / 1e3
                name = f"patched, Redis {args.latency:g} ms"
                results.append(await run_pass(name, rig, args.sessions, args.turns, store, think=args.think))
            elif scenario == "stalled":
                rig.latency.value = 0.0
                stall = (args.stall_at, args.stall)
                name = f"patched, Redis stalled {args.stall:g}s"
                results.append(
                    await run_pass(name, rig, args.sessions, args.turns, store, stall, think=args.think)
                )
            else:
                raise SystemExit(f"unknown scenario {scenario!r}")
    finally:
        telos_wrap.unpatch()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--latency", type=float, default=5.0, help="ms added per Redis round trip")
    parser.add_argument("--stall", type=float, default=6.0, help="seconds Redis is stalled")
    parser.add_argument("--stall-at", type=float, default=3.0, help="seconds into the pass the stall starts")
    parser.add_argument("--timeout", type=float, default=1.0, help="RedisStore timeout (s)")
    parser.add_argument("--backoff", type=float, default=2.0, help="breaker window (s)")
    parser.add_argument("--scenarios", default="0ms,latency,stalled")
    parser.add_argument(
        "--think", type=float, default=0.0, help="seconds a model takes to answer, between turns (default 0)"
    )
    parser.add_argument("--quick", action="store_true", help="50 sessions x 5 turns, 2 s stall")
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.turns, args.stall, args.stall_at = 50, 5, 2.0, 0.5
    gc.collect()
    rig = start_rig()
    try:
        pacing = f"{args.think:g} s x [0.5, 1.5) model time between turns" if args.think else "no pause"
        print(
            f"{args.sessions} concurrent async sessions x {args.turns} turns ({pacing}); emulator over HTTP; "
            f"Redis behind a relay (timeout {args.timeout:g} s, breaker window {args.backoff:g} s)"
        )
        report(asyncio.run(main_async(args, rig)))
        one, five, _ = os.getloadavg()
        print(
            f"machine: {os.cpu_count()} CPUs, load average {one:.1f} (1 min) / {five:.1f} (5 min); "
            "at the end; every figure is wall-clock time on this machine as loaded"
        )
    finally:
        rig.close()


if __name__ == "__main__":
    main()
