"""The documented per-request pattern, soaked: a worker's memory over thousands of requests.

One asyncio worker, ``telos_wrap.patch()``, one ``AsyncAnthropic`` client whose vendor answers at once
in-process (``overhead.answer`` through the SDK's ``MockTransport``: network time is zero), and a
session store (a ``RedisStore`` on ``--redis``, else the process's ``MemoryStore``). Every request is
what README shows a web service do:

    async with telos_wrap.session(conv_id, store=store):
        await client.messages.create(...)

a new ``Session`` object per request, conversations of ``--turns`` turns (a ~20 KB system prompt
with a clock line, shared), ``--concurrency`` of them in flight. Every ``--every`` requests (after a
full garbage collection) it prints the resident memory and the ``Session`` objects alive; at the
end, resident memory at the last sample over the one after the first ``--warmup`` requests (flat:
within 5%), and the objects alive (before issue 44: one per finished request, up to 4,096).

    python benchmarks/soak_per_request.py [--requests 5000] [--every 500] [--redis redis://...]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import answer
from soak import prompt, rss

import telos_wrap
from telos_wrap.sessions import MemoryStore, RedisStore, Session


def _alive() -> int:
    return sum(1 for obj in gc.get_objects() if type(obj) is Session)


async def _run(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    telos_wrap.patch()
    store: Any = (
        RedisStore(args.redis, prefix=f"soak-{os.getpid()}-{int(time.time())}:")
        if args.redis
        else MemoryStore()
    )
    client = anthropic.AsyncAnthropic(
        api_key="soak", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    )
    system = prompt(3_200, 2)  # ~20 KB
    samples: list[tuple[int, int, int]] = []
    done = 0
    queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
    conversations = args.requests // args.turns
    for conv in range(conversations):
        for turn in range(args.turns):
            queue.put_nowait((conv, turn))

    async def one(conv: int, turn: int) -> None:
        history: list[dict[str, Any]] = []
        for t in range(turn + 1):
            history.append(
                {"role": "user", "content": f"Conversation {conv}, question {t}: where is order {t}?"}
            )
            if t < turn:
                history.append({"role": "assistant", "content": f"Order {t} ships tomorrow."})
        clock = f"Current time: 2026-11-27 10:{turn:02d}:{conv % 60:02d}\n"
        async with telos_wrap.session(f"conv-{conv}", store=store):
            await client.messages.create(
                model="claude-opus-5", max_tokens=64, system=clock + system, messages=history
            )

    # Each conversation's turns in order; ``concurrency`` conversations interleaved.
    async def conversation_worker(convs: list[int]) -> None:
        nonlocal done
        for conv in convs:
            for turn in range(args.turns):
                await one(conv, turn)
                done += 1
                if done % args.every == 0:
                    gc.collect()
                    samples.append((done, rss(), _alive()))
                    mib, alive = samples[-1][1] / 2**20, samples[-1][2]
                    print(f"{done:>7} requests  rss {mib:7.1f} MiB  sessions alive {alive}")

    lanes = [list(range(k, conversations, args.concurrency)) for k in range(args.concurrency)]
    await asyncio.gather(*(conversation_worker(lane) for lane in lanes))
    await client.close()
    if isinstance(store, RedisStore):
        await store.aclose()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5_000)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=1_000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--redis", default=None, help="a Redis URL (default: the in-process MemoryStore)")
    args = parser.parse_args()
    samples = asyncio.run(_run(args))
    base = next((s for s in samples if s[0] >= args.warmup), samples[0])
    last = samples[-1]
    print(
        f"resident memory {base[1] / 2**20:.1f} MiB at {base[0]} requests -> {last[1] / 2**20:.1f} MiB at "
        f"{last[0]}: ratio {last[1] / base[1]:.3f} (flat: <= 1.05); "
        f"Session objects alive at the end: {last[2]}"
    )


if __name__ == "__main__":
    main()
