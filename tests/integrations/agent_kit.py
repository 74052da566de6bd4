"""The shared scenario of the framework integration suite (docs/integrations.md).

A small support agent: a long, stable system prompt (well above every vendor's cacheable minimum),
three tools, and a scripted model (the emulator's :func:`~telos_wrap.emulator.tool_loop`) that
calls a tool eight times and then answers — nine model requests per run. Each framework test runs
the same agent twice against a fresh emulator served over real HTTP, once as is and once after
``telos_wrap.patch()``, and :func:`check` compares the two runs.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import telos_wrap
from telos_wrap.emulator import Emulator, Replier, ToolCall, serve, tool_loop
from telos_wrap.emulator.flavour_router import chat_to_messages, is_claude
from telos_wrap.failopen import reset_failures

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks._bench_bound
from benchmarks._bench_bound import SessionBound

ANTHROPIC_MODEL = "claude-sonnet-4-5"
OPENAI_MODEL = "gpt-4.1"
QUESTION = "Where is order 42, what will the weather be at its destination, and what is 17 + 25?"
FINAL_TEXT = "Order 42 ships tomorrow to Lisbon (sunny, 21 C); 17 + 25 = 42."

_POLICY = [
    "Always confirm the order number before quoting any status to the customer.",
    "Quote delivery dates as calendar dates, never as relative days.",
    "Refunds above 200 EUR need a supervisor; say so instead of promising them.",
    "Never reveal another customer's address, name or order contents.",
    "Weather questions are answered only for the destination city of an order.",
    "Arithmetic is done with the add tool, never in your head.",
    "Keep answers under four sentences unless the customer asks for detail.",
    "When a tool fails, apologise once and try a different tool or ask a question.",
]
#: ~3,000 tokens of stable instructions (the emulator counts 4 bytes a token).
SYSTEM_PROMPT = "You are the support agent of an online shop.\n" + "\n".join(
    f"Rule {i + 1}.{j + 1}: {rule}" for i in range(12) for j, rule in enumerate(_POLICY)
)

#: What the scripted model asks for, in order: 8 tool calls, then FINAL_TEXT.
SCRIPT = [
    ToolCall("lookup_order", {"order_id": "42"}),
    ToolCall("get_weather", {"city": "Lisbon"}),
    ToolCall("add", {"a": 17, "b": 25}),
    ToolCall("lookup_order", {"order_id": "43"}),
    ToolCall("get_weather", {"city": "Porto"}),
    ToolCall("add", {"a": 1, "b": 2}),
    ToolCall("lookup_order", {"order_id": "44"}),
    ToolCall("get_weather", {"city": "Faro"}),
]
REQUESTS = len(SCRIPT) + 1
#: The shorter scenario of the frameworks added in issue 32: the first three calls, then the answer —
#: four model requests a run (a few turns keep each framework's environment inside CI's budget).
FEW_CALLS = SCRIPT[:3]


def lookup_order(order_id: str) -> str:
    """Look up an order's status by its id."""
    return f"order {order_id}: shipped, arrives tomorrow in Lisbon"


def get_weather(city: str) -> str:
    """Get the weather forecast for a city."""
    return f"{city}: sunny, 21 C"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


TOOL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "lookup_order": lookup_order,
    "get_weather": get_weather,
    "add": add,
}


def parameters_of(fn: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema of a tool function's arguments, written by hand as users of the raw APIs do."""
    args = [arg for arg in fn.__annotations__ if arg != "return"]
    return {
        "type": "object",
        "properties": {
            arg: {"type": "integer" if fn.__annotations__[arg] is int else "string"} for arg in args
        },
        "required": args,
    }


#: ``TOOL_FUNCTIONS`` as Chat Completions tool definitions.
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {"name": name, "description": fn.__doc__, "parameters": parameters_of(fn)},
    }
    for name, fn in TOOL_FUNCTIONS.items()
]


def clock_prompt() -> str:
    """The careless habit: the current time in the system prompt, rebuilt on every request."""
    return f"{SYSTEM_PROMPT}\nCurrent time: {dt.datetime.now(dt.timezone.utc).isoformat()}"


def tools_as_set() -> list[Callable[..., Any]]:
    """The other careless habit: tools collected in a set (iteration order varies between runs)."""
    return list(set(TOOL_FUNCTIONS.values()))


@dataclass
class Run:
    """One run of the agent: what the framework returned, and the emulator's view of it."""

    result: Any
    emulator: Emulator
    failures: dict[str, int]

    def usage(self) -> list[Mapping[str, Any]]:
        return [r.usage for r in self.emulator.requests if r.usage is not None]

    def cache_read(self) -> int:
        return sum(_read(u) for u in self.usage())

    def total_input(self) -> int:
        return sum(_input(u) for u in self.usage())

    def hit_ratio(self) -> float:
        return self.cache_read() / max(1, self.total_input())

    def bound(self) -> int:
        """The oracle bound of the requests as they were sent (benchmarks/_bench_bound.py)."""
        session = SessionBound()
        total = 0
        for record in self.emulator.requests:
            if record.status == 200 and record.usage is not None:
                api = "anthropic" if record.flavour == "anthropic" else "openai"
                if _via_router(record):  # the router sends the model its Anthropic translation
                    api, body = "anthropic", chat_to_messages(record.body, record.flavour)
                    total += session.add(api, body)
                    continue
                total += session.add(api, record.body)
        return total


#: The roles each API accepts (Messages: user / assistant; Chat Completions: the rest too). The
#: emulator does not refuse an unknown role the way the APIs do (a 400), so the suite checks the wire.
_ROLES = {
    True: frozenset({"user", "assistant"}),
    False: frozenset({"system", "developer", "user", "assistant", "tool", "function"}),
}


def _roles(record: Any) -> set[Any]:
    messages = record.body.get("messages") if isinstance(record.body, Mapping) else None
    return {m.get("role") for m in messages or () if isinstance(m, Mapping)}


def _via_router(record: Any) -> bool:
    return record.flavour in ("openrouter", "litellm") and is_claude(record.model)


def _read(usage: Mapping[str, Any]) -> int:
    if "cache_read_input_tokens" in usage:
        return int(usage.get("cache_read_input_tokens") or 0)
    details = usage.get("prompt_tokens_details") or {}
    return int(details.get("cached_tokens") or 0)


def _input(usage: Mapping[str, Any]) -> int:
    if "input_tokens" in usage:
        return sum(
            int(usage.get(k) or 0)
            for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
    return int(usage.get("prompt_tokens") or 0)


@contextmanager
def served(replier: Replier | None = None) -> Iterator[tuple[Emulator, str]]:
    """A fresh emulator answering with ``replier`` (default: :data:`SCRIPT`) on a real local server."""
    emulator = Emulator(replier=replier or tool_loop(SCRIPT, FINAL_TEXT))
    with serve(emulator) as url:
        yield emulator, url


def run_both(
    agent: Callable[[str], Any],
    *,
    openai_engine: bool = False,
    replier: Replier | None = None,
    engines: Callable[[str], dict[str, str]] | None = None,
) -> tuple[Run, Run]:
    """Run ``agent(base_url)`` unpatched, then patched, each against a fresh emulator.

    ``openai_engine``: tell telos the local server is api.openai.com (it would otherwise use the
    generic engine for an unknown host). ``engines``: ``patch(engines=...)`` for the server's URL.
    """
    runs = []
    for patched in (False, True):
        telos_wrap.unpatch()
        reset_failures()
        with served(replier) as (emulator, url):
            if patched:
                named = {f"{url}/openai/v1": "openai"} if openai_engine else {}
                telos_wrap.patch(engines={**named, **(engines(url) if engines else {})})
            try:
                result = agent(url)
            finally:
                telos_wrap.unpatch()
        runs.append(Run(result, emulator, telos_wrap.failure_counts()))
    return runs[0], runs[1]


def check(plain: Run, patched: Run, *, requests: int = REQUESTS, margin: float = 0.95) -> None:
    """The suite's assertions (issue 18): same result, no fallback, hits at least as good, near the bound."""
    assert len(plain.emulator.requests) == requests, [r.error for r in plain.emulator.requests]
    assert len(patched.emulator.requests) == requests, [r.error for r in patched.emulator.requests]
    assert all(r.status == 200 for r in patched.emulator.requests), [
        r.error for r in patched.emulator.requests
    ]
    assert patched.result == plain.result
    assert patched.failures == {}, patched.failures
    for record in patched.emulator.requests:
        assert _roles(record) <= _ROLES[record.flavour == "anthropic"], (record.flavour, _roles(record))
    bound = patched.bound()
    # Efficiency = cache reads / the oracle bound (the same bound for both runs: same content).
    # Not the raw hit ratio: telos may send another number of prompt tokens than the application
    # for the same content (moved envelopes, one shape for one-part content), which moves the
    # denominator without changing what was read.
    # Never below unpatched (issue 42), to the third decimal of the efficiency, on every vendor. OpenAI's
    # automatic cache (before gpt-5.6) reads whole 128-token steps, so a prefix that ends a few tokens
    # earlier than the careless one's (a moved clock line's old place) can cost a step: telos must win
    # that step back elsewhere, not hide behind the grid.
    # A clock line that never changes within the run (pydantic-ai renders its dynamic system prompt once
    # per run) stays in place where it ends the system prompt (docs/sessions.md, *A clock that ends the
    # system prompt*): before, moved on sight, it cost pydantic-ai on OpenAI one step (100.7% -> 100.0%).
    assert bound > 0, "the scenario sends a cacheable prefix"
    assert round(patched.cache_read() / bound, 3) >= round(plain.cache_read() / bound, 3), (
        patched.cache_read(),
        plain.cache_read(),
        bound,
    )
    assert patched.cache_read() >= margin * bound, (patched.cache_read(), bound)


def summary(name: str, plain: Run, patched: Run) -> str:
    """One line for docs/integrations.md: efficiency (reads / bound) and hit ratios, before -> after."""
    bound = max(1, patched.bound())
    return (
        f"{name}: efficiency {plain.cache_read() / bound:.1%} -> {patched.cache_read() / bound:.1%} "
        f"(hit ratio {plain.hit_ratio():.1%} -> {patched.hit_ratio():.1%}, bound {patched.bound():,} tokens)"
    )
