"""Two sibling branches alternating from one common prefix: does each keep its prefix cached?

An agent runs two branches of one conversation (parallel sampling, a sub-agent, an undo): both
share a long prefix (system prompt, tools, the first turns), then each grows its own turns, and
requests alternate A, B, A, B... Each request goes through the real Anthropic SDK to the engine
emulator (in process), unpatched and patched with telos, each with its own cold emulator. Printed:
the share of input tokens read from the cache per branch, and the same for one linear conversation
of the same length (the reference: what a branch would get if it ran alone).

    python benchmarks/branches.py [--rounds 30] [--minutes-between 0.5]
"""

from __future__ import annotations

import argparse
from typing import Any

import anthropic
import httpx2

import telos_wrap
from telos_wrap.emulator import Emulator, EmulatorTransport, ManualClock

MODEL = "claude-opus-4-8"
SYSTEM = "You are the support assistant of Example Corp.\n" + "".join(
    f"Rule {i}: answer in plain words and cite the handbook section you used.\n" for i in range(80)
)


def turn(branch: str, n: int) -> list[dict[str, Any]]:
    """One agent step: a tool call and its result, then the user's next message."""
    call = {"type": "tool_use", "id": f"{branch}{n}", "name": "lookup", "input": {"order": 1000 + n}}
    result = {"type": "tool_result", "tool_use_id": f"{branch}{n}", "content": f"order {n}: " + "ok " * 60}
    return [
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result, {"type": "text", "text": f"Branch {branch}, step {n}: go on."}]},
    ]


TOOLS = [{"name": "lookup", "description": "Look an order up.", "input_schema": {"type": "object"}}]


def run(schedule: list[str], rounds: int, minutes: float, patched: bool) -> dict[str, tuple[int, int]]:
    """Input tokens read from cache / total, per branch, for requests following ``schedule``."""
    clock = ManualClock(0.0)
    client = anthropic.Anthropic(
        api_key="x",
        http_client=httpx2.Client(transport=EmulatorTransport(Emulator(clock=clock))),
        max_retries=0,
    )
    if patched:
        telos_wrap.patch()
    shared: list[dict[str, Any]] = [{"role": "user", "content": "Please audit my last orders."}]
    for n in range(6):
        shared += turn("s", n)
    history = {name: list(shared) for name in set(schedule)}
    totals: dict[str, tuple[int, int]] = {}
    try:
        for step in range(rounds):
            name = schedule[step % len(schedule)]
            history[name] += turn(name, step)
            usage = client.messages.create(
                model=MODEL, max_tokens=8, system=SYSTEM, tools=TOOLS, messages=history[name]
            ).usage
            total = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
            read, seen = totals.get(name, (0, 0))
            totals[name] = (read + usage.cache_read_input_tokens, seen + total)
            clock.advance(60 * minutes)
    finally:
        if patched:
            telos_wrap.unpatch()
        client.close()
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--minutes-between", type=float, default=0.5)
    args = parser.parse_args()
    print(f"{args.rounds} requests, {args.minutes_between} min apart; share of input read from cache")
    print(f"{'schedule':<28}{'branch':<8}{'unpatched':>10}{'telos':>8}")
    for label, schedule in (("linear (reference)", ["A"]), ("two branches alternating", ["A", "B"])):
        plain = run(schedule, args.rounds, args.minutes_between, patched=False)
        ours = run(schedule, args.rounds, args.minutes_between, patched=True)
        for name in sorted(plain):
            p_read, p_total = plain[name]
            t_read, t_total = ours[name]
            print(f"{label:<28}{name:<8}{p_read / p_total:>10.1%}{t_read / t_total:>8.1%}")


if __name__ == "__main__":
    main()
