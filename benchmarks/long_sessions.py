"""Long sessions that outgrow the model's window: no policy, Anthropic's context editing (emulated),
telos' context policy; per vendor API, on the built-in emulator (offline).

    python benchmarks/long_sessions.py [--traces DIR] [--turns 120] [--trigger 100000]

The session is the longest ``mini-swe-agent`` trace (real observations of a SWE-bench run), its
command / observation turns made into tool calls and results (``bash``), and extended by repeating
those turns (each repetition with its own call ids and a round number in the result) and each
observation's text (``--scale``) until the history passes the model's window. Each run prints, per
API and strategy: whether the session finished (no "prompt is too long" / ``context_length_exceeded``),
the requests sent, the peak input tokens of one request, and the input cost in uncached-token units
(reads at 0.1x; writes at 1.25x on Anthropic, 1x on OpenAI; docs/vendor-facts.md §1.4, §2.4).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import telos_wrap
from telos_wrap.emulator import Emulator, emulator_http_client
from telos_wrap.replay.runner import load_sessions
from telos_wrap.sessions import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = ROOT.parent / "shared" / "traces"
PRICES = {"anthropic": (0.1, 1.25), "openai": (0.1, 1.0)}
MODELS = {"anthropic": "claude-sonnet-4-5", "chat": "gpt-4o", "responses": "gpt-4o"}
SYSTEM = "You are a software engineer fixing an issue in a repository with a bash tool."


@dataclass(frozen=True)
class Turn:
    thought: str
    command: str
    observation: str


def trace_turns(traces: Path) -> list[Turn]:
    """The longest mini-swe-agent session's (assistant, observation) pairs."""
    sessions = load_sessions(traces / "mini-swe-agent.jsonl.xz")
    longest = max(sessions, key=len)[-1].kwargs["messages"]
    turns = []
    for assistant, observation in zip(longest[2::2], longest[3::2], strict=False):
        text = str(assistant.get("content") or "")
        found = re.search(r"```bash\n(.*?)```", text, re.S)
        command = found.group(1).strip() if found else "true"
        turns.append(Turn(text.split("```")[0].strip(), command, str(observation.get("content") or "")))
    return turns


def extended(turns: list[Turn], count: int, scale: int) -> Iterator[tuple[str, Turn]]:
    """``count`` turns cycling through ``turns``, each observation repeated ``scale`` times."""
    for i in range(count):
        turn = turns[i % len(turns)]
        round_ = i // len(turns)
        obs = "\n".join([turn.observation] * scale)
        obs = f"[round {round_}]\n{obs}" if round_ else obs
        yield f"{i:05d}", Turn(turn.thought, turn.command, obs)


TOOL = {"name": "bash", "description": "Run a bash command.", "input_schema": {"type": "object"}}
CHAT_TOOL = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
RESP_TOOL = {"type": "function", "name": "bash", "parameters": {"type": "object"}}


@dataclass
class Result:
    finished: bool = True
    requests: int = 0
    peak: int = 0
    cost: float = 0.0
    reason: str = ""


def _account(result: Result, usage: telos_wrap.UsageReport, engine: str) -> None:
    read, write = PRICES[engine]
    total = usage.total_input or 0
    result.requests += 1
    result.peak = max(result.peak, total)
    result.cost += (usage.raw_input or 0) + read * (usage.cache_read or 0) + write * (usage.cache_write or 0)


def run(api: str, strategy: str, turns: list[Turn], count: int, scale: int, policy: dict[str, Any]) -> Result:
    import anthropic
    import openai

    emulator = Emulator()
    result = Result()
    context = policy if strategy == "telos" else None
    task = turns[0].thought or "Fix the issue."
    with telos_wrap.session(f"{api}-{strategy}", store=MemoryStore(), context=context):
        if api == "anthropic":
            http = emulator_http_client(emulator, "anthropic")
            client: Any = anthropic.Anthropic(
                api_key="x", base_url="https://api.anthropic.com", http_client=http, max_retries=0
            )
        else:
            http = emulator_http_client(emulator, "openai")
            client = openai.OpenAI(api_key="x", http_client=http, max_retries=0)
        history: list[dict[str, Any]] = [{"role": "user", "content": f"Task: {task}"}]
        extra: dict[str, Any] = {}
        if strategy == "anthropic-editing":
            edit = {"type": "clear_tool_uses_20250919", **{k: v for k, v in policy.items() if k != "type"}}
            extra = {"extra_body": {"context_management": {"edits": [edit]}}}
        try:
            for ident, turn in extended(turns, count, scale):
                if api == "anthropic":
                    msg = client.messages.create(
                        model=MODELS[api],
                        max_tokens=64,
                        system=SYSTEM,
                        tools=[TOOL],
                        messages=history,
                        **extra,
                    )
                    history.append(
                        {
                            "role": "assistant",
                            "content": [
                                {"type": "text", "text": turn.thought or "Next."},
                                {
                                    "type": "tool_use",
                                    "id": f"toolu_{ident}",
                                    "name": "bash",
                                    "input": {"command": turn.command},
                                },
                            ],
                        }
                    )
                    history.append(
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "tool_result",
                                    "tool_use_id": f"toolu_{ident}",
                                    "content": turn.observation,
                                }
                            ],
                        }
                    )
                    engine = "anthropic"
                elif api == "chat":
                    msg = client.chat.completions.create(
                        model=MODELS[api],
                        messages=[{"role": "system", "content": SYSTEM}, *history],
                        tools=[CHAT_TOOL],
                    )
                    call = {
                        "id": f"call_{ident}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": f'{{"command": {turn.command!r}}}'},
                    }
                    history.append(
                        {"role": "assistant", "content": turn.thought or None, "tool_calls": [call]}
                    )
                    history.append(
                        {"role": "tool", "tool_call_id": f"call_{ident}", "content": turn.observation}
                    )
                    engine = "openai"
                else:
                    msg = client.responses.create(
                        model=MODELS[api], instructions=SYSTEM, input=history, tools=[RESP_TOOL]
                    )
                    history.append(
                        {
                            "type": "function_call",
                            "call_id": f"call_{ident}",
                            "name": "bash",
                            "arguments": "{}",
                        }
                    )
                    history.append(
                        {
                            "type": "function_call_output",
                            "call_id": f"call_{ident}",
                            "output": turn.observation,
                        }
                    )
                    engine = "openai"
                usage = telos_wrap.usage_of(msg)
                if usage is not None:
                    _account(result, usage, engine)
        except (anthropic.BadRequestError, openai.BadRequestError) as exc:
            result.finished = False
            result.reason = str(exc)[:80]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--turns", type=int, default=60, help="requests per session (default 60)")
    parser.add_argument("--scale", type=int, default=12, help="each observation repeated (default 12)")
    parser.add_argument("--trigger", type=int, default=100_000)
    parser.add_argument("--keep", type=int, default=3)
    parser.add_argument("--clear-at-least", type=int, default=20_000)
    args = parser.parse_args(argv)
    telos_wrap.patch()
    turns = trace_turns(args.traces)
    policy = {
        "trigger": {"type": "input_tokens", "value": args.trigger},
        "keep": {"type": "tool_uses", "value": args.keep},
        "clear_at_least": {"type": "input_tokens", "value": args.clear_at_least},
    }
    print(
        f"{len(turns)} turns of mini-swe-agent's longest session, extended to {args.turns} requests "
        f"(observations x{args.scale}); "
        f"trigger {args.trigger:,}, keep {args.keep}, clear_at_least {args.clear_at_least:,}"
    )
    print(
        f"{'api':<10} {'strategy':<18} {'finished':<9} {'requests':>8} {'peak input':>11} {'input cost':>12}"
    )
    started = time.monotonic()
    plan = [("anthropic", "none"), ("anthropic", "anthropic-editing"), ("anthropic", "telos")]
    plan += [("chat", "none"), ("chat", "telos"), ("responses", "none"), ("responses", "telos")]
    for api, strategy in plan:
        result = run(api, strategy, turns, args.turns, args.scale, policy)
        done = "yes" if result.finished else "no"
        print(
            f"{api:<10} {strategy:<18} {done:<9} {result.requests:>8} {result.peak:>11,} "
            f"{result.cost:>12,.0f}",
            flush=True,
        )
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
