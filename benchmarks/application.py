"""Application benchmark: what many short conversations of one application pay together.

    python benchmarks/application.py [--traces DIR] [--vendors anthropic,openai] [--apps NAME,...]
        [--styles NAME,...] [--conversations N] [--rate PER_MINUTE] [--workers N] [--quick]
        [--keys conversation,shard] [--profile] [--write-md FILE]

Every other efficiency figure of this project is one conversation against a fresh cache. Production
is many conversations of one application, interleaved in time, against one vendor cache per
organisation, where what one conversation writes (tools, the shared system text) is read by the
next one within the TTL. Here:

* **An application** is the sessions of one trace source (tau-bench's airline support agent,
  SWE-agent, mini-SWE-agent; the bundled demo session when no traces are at hand), each session one
  of its conversations (cycled when there are fewer sessions than conversations; every conversation
  opens with its own ticket number, so no two conversations share their messages), each rebuilt by
  one careless-harness style (``telos_wrap.testing.harnesses``, seeded per conversation: the clocks
  of two conversations differ). Its system prompt is either **one prompt** for everybody, or
  **per user**: ``You are helping Ana Lopez (account 1000).`` and ``Address the customer as Ana.``
  after its first line, a name and account of its own per conversation (stable caller text early
  in the prompt, as many applications write it).
* **In time**: conversations arrive at ``--rate`` per minute (exponential gaps, seeded), each request
  follows the previous one of its conversation after 5-40 s (the user reads and types), lengths are
  the trace sessions' own, cut to ``--max-turns``; requests are sent in time order by ``--workers``
  SDK clients (a conversation's requests go to any of them; they share one session store, as
  workers share a Redis). The emulator's clock is simulated (``ManualClock``) and moved to each
  request's time, so the 5-minute Anthropic TTL and OpenAI's retention apply as they would.
* **One cache per organisation** (each application is its own organisation and API key, with its
  own session store): Anthropic, one emulator (one workspace cache). OpenAI (models before GPT-5.6,
  docs/vendor-facts.md §2.1): requests are routed by a hash of the first ~256 tokens of the prompt
  and the ``prompt_cache_key`` to one of ``MACHINES`` machines (one emulator each, one clock), and a
  prefix+key sent more than ``OVERFLOW_RPM`` times in the last minute overflows to the next machine
  (the guide's "~15 requests per minute", §2.1) — so a key shared too widely also costs hits.

Strategies per application and style: **uncached** (every input token at the uncached price: the
denominator), **native** (Anthropic: automatic caching, a top-level ``cache_control`` on the request
as sent; OpenAI: the request as sent, cached automatically), **telos** (``telos_wrap.patch()``, one
``telos_wrap.session`` per conversation, fleet learning on: the facts of the application's prompts,
and how long its conversations run, so that a conversation's expected last request writes nothing
nobody reads, docs/sessions.md) and **telos, fleet off**; and the
**shared-prefix ideal**: a prefix cache shared by the whole application that keeps the caller's order
and takes the live values (the strings the style declares volatile) out — per request, the longest
unit prefix (``_bench_bound``) it shares with *any* earlier request of the application is read,
the rest of the units a later request will share is written once, anything else is paid uncached;
no TTL (an ideal). ``--keys``: on OpenAI, also telos with the application setting its own
``prompt_cache_key`` per conversation, or per shard (``shards``), beside telos' one key per application
(issue 42; docs/engines.md, "Which conversations share a key"). ``--profile`` prints, per
application and style, where telos' cost goes against the ideal's: per request number of a
conversation the cost gap and the tokens each read and wrote, and the first conversation's share.
Cost = uncached + read x read price + write x write price (Anthropic 0.1 / 1.25;
OpenAI 0.1 / writes free), relative to uncached.

Acceptance lines (issue 34): telos <= native on every application and style; telos <= 1.1x the
ideal on the one-prompt and per-user support application (checked with three requests per
conversation, the issue's case; ``--max-turns 2`` measures two-request conversations); telos <= 100%
of uncached wherever native is. ``--quick`` is the CI form (the support applications, clock-first,
a few conversations; the full form's table is in BENCHMARKS.md, "Applications"). ``--apps demo``
runs the bundled demo session as an application (no traces needed).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import random
import sys
from collections import defaultdict, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_bound import anthropic_units, openai_units, readable

import telos_wrap
from telos_wrap.emulator import Emulator, ManualClock, emulator_transport
from telos_wrap.emulator.transport import sdk_http_library
from telos_wrap.replay.results import Prices, prices_for
from telos_wrap.replay.runner import create_kwargs, demo_path, patched
from telos_wrap.replay.traces import TraceRequest, group_sessions, load_trace
from telos_wrap.sessions import MemoryStore
from telos_wrap.testing.harnesses import SHAPES, rewrite_session

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = ROOT.parent / "shared" / "traces"
#: OpenAI: machines per organisation, and requests per minute per prefix+key before overflow (§2.1).
MACHINES = 4
OVERFLOW_RPM = 15
#: The routing prefix: ~256 tokens at the emulator's 4 bytes per token.
ROUTE_BYTES = 1024
FIRST_NAMES = (
    "Ana",
    "Bruno",
    "Chloe",
    "Dmitri",
    "Esi",
    "Farid",
    "Greta",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemi",
    "Luca",
)
LAST_NAMES = ("Lopez", "Novak", "Okafor", "Petrov", "Quinn", "Rossi", "Sato", "Tanaka", "Ulloa", "Varga")
NATIVE, TELOS, TELOS_OFF, IDEAL = "native", "telos", "telos, fleet off", "ideal"
STRATEGIES = (NATIVE, TELOS, TELOS_OFF)
#: ``--keys``: OpenAI ``prompt_cache_key`` granularities, each run as telos with the application setting
#: the key itself (telos keeps a caller's key): one per conversation, or one per shard of the
#: application (``shards``: conversations spread by a hash of their number over as many keys as keep
#: each key under ``OVERFLOW_RPM``). telos' own key is one per application (its tools).
PER_CONVERSATION, SHARDED = "telos, key per conversation", "telos, key per shard"
KEYINGS = {"conversation": PER_CONVERSATION, "shard": SHARDED}
TARGET_IDEAL = 1.1
#: (source file stem, prompt kind, styles): the applications of the full run.
APPS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "support": ("tau-bench", "one-prompt", ("clean", "clock-first", "clock-last", "env-dump")),
    "support/per-user": ("tau-bench", "per-user", ("clean", "clock-first", "clock-last", "env-dump")),
    "demo": ("demo", "one-prompt", ("clock-first",)),
    "swe-agent": ("swe-agent", "one-prompt", ("clean", "git-status")),
    "mini-swe-agent": ("mini-swe-agent", "one-prompt", ("clean", "env-dump")),
}
#: The applications and styles the 1.1x-of-ideal line is checked on (issue 34: one prompt, or one
#: naming its user, where only a clock line changes).
SUPPORT = ("support", "support/per-user")
IDEAL_STYLES = ("clean", "clock-first", "clock-last")
#: ... with the issue's 24 conversations (with fewer, the first one's learning weighs more).
IDEAL_CONVERSATIONS = 24
QUICK_APPS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "support": ("tau-bench", "one-prompt", ("clock-first",)),
    "support/per-user": ("tau-bench", "per-user", ("clock-first",)),
}
QUICK_CONVERSATIONS = 6


def with_user(text: str, number: int) -> str:
    """``text`` with conversation ``number``'s per-user lines after its first line (early in the
    prompt, as many applications write them: ``You are <the app>.`` then who is being helped)."""
    first, newline, rest = text.partition("\n")
    return f"{first}\n{user_line(number)}{newline}{rest}"


def user_line(number: int) -> str:
    """The per-user line of conversation ``number``."""
    first = FIRST_NAMES[number % len(FIRST_NAMES)]
    last = LAST_NAMES[(number // len(FIRST_NAMES)) % len(LAST_NAMES)]
    return f"You are helping {first} {last} (account {1000 + number}).\nAddress the customer as {first}."


# -- the application's conversations ----------------------------------------------------------------


@dataclass
class Conversation:
    number: int
    requests: list[TraceRequest]
    volatile: list[tuple[str, ...]]
    times: list[float] = field(default_factory=list)


def _ticket(kwargs: dict[str, Any], number: int) -> None:
    """Open the conversation with its own ticket number (conversations share no messages)."""
    for message in kwargs.get("messages") or []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        tag = f"[ticket {40_000 + number}] "
        if isinstance(content, str):
            message["content"] = tag + content
        elif isinstance(content, list):
            message["content"] = [{"type": "text", "text": tag.strip()}, *content]
        return


def conversations_of(
    sessions: Sequence[Sequence[TraceRequest]], kind: str, style: str, count: int, max_turns: int
) -> list[Conversation]:
    """``count`` conversations of an application: trace sessions cycled, personalised, styled."""
    out = []
    for number in range(count):
        session = sessions[number % len(sessions)][:max_turns]
        requests = []
        for request in session:
            kwargs = copy.deepcopy(request.kwargs)
            _ticket(kwargs, number)
            if kind == "per-user":
                SHAPES[request.api].edit_system_text(kwargs, lambda text, n=number: with_user(text, n))
            requests.append(replace(request, session=f"c{number}", kwargs=kwargs))
        if style == "clean":
            out.append(Conversation(number, requests, [() for _ in requests]))
        else:
            styled, volatile = rewrite_session(requests, style, seed=number)
            out.append(Conversation(number, styled, volatile))
    return out


def schedule(conversations: list[Conversation], rate: float, seed: int = 0) -> list[tuple[float, int, int]]:
    """``(time, conversation, turn)`` of every request, in time order: arrivals at ``rate`` per minute,
    5-40 s between two requests of a conversation."""
    rng = random.Random(f"arrivals:{seed}")
    start = 0.0
    events = []
    for conv in conversations:
        start += rng.expovariate(rate / 60.0)
        at = start
        conv.times = []
        for turn in range(len(conv.requests)):
            conv.times.append(at)
            events.append((at, conv.number, turn))
            at += rng.uniform(5.0, 40.0)
    return sorted(events)


# -- one organisation's cache -----------------------------------------------------------------------


class Organisation:
    """The vendor cache of one organisation: Anthropic one emulator; OpenAI ``MACHINES`` emulators
    behind prefix+key routing with overflow (docs/vendor-facts.md §2.1)."""

    def __init__(self, vendor: str) -> None:
        self.vendor = vendor
        self.clock = ManualClock()
        count = 1 if vendor == "anthropic" else MACHINES
        self.machines = [Emulator(clock=self.clock) for _ in range(count)]
        self.recent: dict[bytes, deque[float]] = defaultdict(deque)

    def route(self, body: bytes) -> Emulator:
        if len(self.machines) == 1:
            return self.machines[0]
        try:
            data = json.loads(body)
        except ValueError:
            return self.machines[0]
        prefix = json.dumps([data.get("tools"), data.get("messages")], ensure_ascii=False)[:ROUTE_BYTES]
        key = f"{data.get('prompt_cache_key', '')}\x00{data.get('model', '')}\x00{prefix}"
        digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
        now = self.clock.now()
        recent = self.recent[digest]
        while recent and recent[0] <= now - 60.0:
            recent.popleft()
        recent.append(now)
        overflow = (len(recent) - 1) // OVERFLOW_RPM
        return self.machines[(int.from_bytes(digest, "big") + overflow) % len(self.machines)]

    def advance_to(self, at: float) -> None:
        self.clock.advance(max(0.0, at - self.clock.now()))

    def client(self, api: str, key: str) -> Any:
        sdk = "anthropic" if api == "anthropic" else "openai"
        http = sdk_http_library(sdk)
        base = type(emulator_transport(self.machines[0], library=http))
        org = self

        class Routed(base):  # type: ignore[misc,valid-type]
            def handle_request(self, request: Any) -> Any:
                self.emulator = org.route(request.read())
                return super().handle_request(request)

        transport = Routed(self.machines[0])
        if sdk == "anthropic":
            import anthropic

            return anthropic.Anthropic(
                api_key=key,
                base_url="https://api.anthropic.com",
                http_client=http.Client(transport=transport),
            )
        import openai

        return openai.OpenAI(
            api_key=key, base_url="https://api.openai.com/v1", http_client=http.Client(transport=transport)
        )


# -- running ---------------------------------------------------------------------------------------


@dataclass
class Cost:
    """Input usage summed over requests, and its cost in uncached-token units."""

    input: int = 0
    read: int = 0
    write: int = 0
    cost: float = 0.0
    requests: int = 0

    def add(self, raw: int, read: int, write: int, prices: Prices) -> None:
        self.input += raw + read + write
        self.read += read
        self.write += write
        self.cost += raw + read * prices.read + write * prices.write
        self.requests += 1


def shards(conversations: Sequence[Conversation], rate: float) -> int:
    """How many keys keep each under ``OVERFLOW_RPM``: the application's requests per minute (``rate``
    conversations a minute times their mean length: a conversation's requests, 5-40 s apart, fall
    within about a minute) over the overflow rate, rounded up."""
    per_conversation = sum(len(c.requests) for c in conversations) / max(1, len(conversations))
    return max(1, -(-int(rate * per_conversation) // OVERFLOW_RPM))


def cache_key(strategy: str, number: int, count: int) -> str | None:
    """The ``prompt_cache_key`` the application sets under ``strategy`` (``None``: telos' own)."""
    if strategy == PER_CONVERSATION:
        return f"conversation-{number}"
    if strategy == SHARDED:
        digest = hashlib.blake2b(str(number).encode(), digest_size=8).digest()
        return f"shard-{int.from_bytes(digest, 'big') % count}"
    return None


def run_app(
    vendor: str,
    conversations: list[Conversation],
    strategy: str,
    workers: int,
    rate: float,
    app: str,
    log: list[tuple[int, int, int]] | None = None,
) -> tuple[Cost, Cost]:
    """Every request of the application under ``strategy``: (all conversations, all but the first);
    ``log`` gets each request's ``(uncached, read, write)`` in the order sent (``schedule``)."""
    keys = shards(conversations, rate)
    org = Organisation(vendor)
    store = MemoryStore()
    key = f"org-{app}-{vendor}"
    clients = [org.client(conversations[0].requests[0].api, key) for _ in range(workers)]
    prices = prices_for(vendor)
    total, later = Cost(), Cost()
    events = schedule(conversations, rate)
    by_number = {c.number: c for c in conversations}
    sessions: dict[int, Any] = {}
    try:
        for count, (at, number, turn) in enumerate(events):
            org.advance_to(at)
            request = by_number[number].requests[turn]
            kwargs = request.kwargs
            if strategy == NATIVE and request.api == "anthropic":
                kwargs = {**kwargs, "cache_control": {"type": "ephemeral"}}
            args = create_kwargs(request.api, kwargs)
            args["max_tokens" if request.api == "anthropic" else "max_completion_tokens"] = 64
            if request.api != "anthropic":
                args.pop("max_tokens", None)
            if strategy == NATIVE:
                args["telos_hint"] = {"disable": True}
            key_of = cache_key(strategy, number, keys)
            if key_of is not None and request.api != "anthropic":
                args["prompt_cache_key"] = key_of
            client = clients[count % workers]
            if strategy == NATIVE:
                response = _send(client, request.api, args)
            else:
                session = sessions.get(number)
                if session is None:
                    session = sessions[number] = telos_wrap.session(
                        f"{app}:{number}", store=store, fleet_learning=strategy != TELOS_OFF
                    )
                with session:
                    response = _send(client, request.api, args)
            usage = telos_wrap.usage_of(response)
            raw, read, write = usage.raw_input or 0, usage.cache_read or 0, usage.cache_write or 0
            total.add(raw, read, write, prices)
            if log is not None:
                log.append((raw, read, write))
            if number != conversations[0].number:
                later.add(raw, read, write, prices)
    finally:
        for client in clients:
            client.close()
    return total, later


def _send(client: Any, api: str, args: dict[str, Any]) -> Any:
    if api == "anthropic":
        return client.messages.create(**args)
    return client.chat.completions.create(**args)


def ideal(vendor: str, conversations: list[Conversation], rate: float, inputs: int) -> float:
    """The shared-prefix ideal's cost (module docstring), given the requests' ``inputs`` tokens."""
    prices = prices_for(vendor)
    requests = ideal_requests(conversations, rate)
    read = sum(r for r, _ in requests)
    write = sum(w for _, w in requests)
    return (inputs - read - write) + read * prices.read + write * prices.write


def ideal_requests(conversations: list[Conversation], rate: float) -> list[tuple[float, float]]:
    """The shared-prefix ideal's ``(read, write)`` tokens of each request, in the order sent."""
    events = schedule(conversations, rate)
    by_number = {c.number: c for c in conversations}
    walks: list[tuple[list[bytes], list[float], str, str]] = []
    for _, number, turn in events:
        conv = by_number[number]
        request = conv.requests[turn]
        units_of = anthropic_units if request.api == "anthropic" else openai_units
        units = units_of(request.kwargs, conv.volatile[turn])
        digest = hashlib.blake2b(digest_size=16)
        states, sizes = [], []
        for unit, tokens in units:
            digest.update(unit.encode("utf-8") + b"\x00")
            states.append(digest.copy().digest())
            sizes.append(tokens)
        walks.append((states, sizes, request.api, str(request.kwargs.get("model", ""))))
    remaining: dict[bytes, int] = defaultdict(int)
    for states, _, _, _ in walks:
        for state in states:
            remaining[state] += 1
    seen: set[bytes] = set()
    out: list[tuple[float, float]] = []
    for states, sizes, api, model in walks:
        shared = 0.0
        matching = True
        written = 0.0
        for state, tokens in zip(states, sizes, strict=True):
            remaining[state] -= 1
            if matching and state in seen:
                shared += tokens
                continue
            matching = False
            if remaining[state] > 0:  # a later request shares this prefix: written once
                written += tokens
            seen.add(state)
        out.append((readable(shared, api=api, model=model), written))
    return out


def profile(
    vendor: str, conversations: list[Conversation], rate: float, log: Sequence[tuple[int, int, int]]
) -> list[str]:
    """Where telos' cost goes against the ideal's (``--profile``), request by request: per request
    number of a conversation, the cost gap (token units), tokens read and written by each; and the
    gap of the application's first conversation, the only one that must learn its live lines at
    their first change (the others start with its facts)."""
    prices = prices_for(vendor)
    events = schedule(conversations, rate)
    first = conversations[0].number
    by_turn: dict[int, list[float]] = defaultdict(lambda: [0.0] * 5)
    first_gap = total_gap = 0.0
    for (_, number, turn), (raw, read, write), (ideal_read, ideal_write) in zip(
        events, log, ideal_requests(conversations, rate), strict=True
    ):
        mine = raw + read * prices.read + write * prices.write
        inputs = raw + read + write
        theirs = (inputs - ideal_read - ideal_write) + ideal_read * prices.read + ideal_write * prices.write
        row = by_turn[turn]
        for index, value in enumerate((mine - theirs, read, ideal_read, write, ideal_write)):
            row[index] += value
        total_gap += mine - theirs
        if number == first:
            first_gap += mine - theirs
    lines = [f"  gap to the ideal: {total_gap:,.0f} token units; the first conversation's: {first_gap:,.0f}"]
    for turn in sorted(by_turn):
        gap, read, ideal_read, write, ideal_write = by_turn[turn]
        lines.append(
            f"  request {turn + 1}: gap {gap:,.0f}; read {read:,.0f} (ideal {ideal_read:,.0f}); "
            f"written {write:,.0f} (ideal {ideal_write:,.0f})"
        )
    return lines


# -- output ------------------------------------------------------------------------------------------


@dataclass
class Row:
    vendor: str
    app: str
    style: str
    conversations: int
    requests: int
    uncached: int
    costs: dict[str, Cost]
    later: dict[str, Cost]
    ideal: float
    shards: int = 1

    def ratio(self, strategy: str) -> float:
        if strategy == IDEAL:
            return self.ideal / self.uncached
        return self.costs[strategy].cost / self.uncached

    def checks(self) -> list[str]:
        telos, native = self.ratio(TELOS), self.ratio(NATIVE)
        found = [f"<= native: {'ok' if telos <= native + 0.0005 else 'FAIL'}"]
        if self.app in SUPPORT and self.style in IDEAL_STYLES and self.conversations >= IDEAL_CONVERSATIONS:
            found.append(f"<= 1.1x ideal: {'ok' if telos <= TARGET_IDEAL * self.ratio(IDEAL) else 'FAIL'}")
        if native <= 1.0:
            found.append(f"<= 100%: {'ok' if telos <= 1.0 else 'FAIL'}")
        return found


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def table(rows: Sequence[Row]) -> list[str]:
    lines = [
        "| vendor | application | style | conversations / requests | native | telos | telos, fleet off "
        "| ideal | telos / ideal | acceptance |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.vendor} | {row.app} | {row.style} | {row.conversations} / {row.requests} "
            f"| {_pct(row.ratio(NATIVE))} | {_pct(row.ratio(TELOS))} | {_pct(row.ratio(TELOS_OFF))} "
            f"| {_pct(row.ratio(IDEAL))} | {row.ratio(TELOS) / row.ratio(IDEAL):.2f}x "
            f"| {'; '.join(row.checks())} |"
        )
    return lines


def key_table(rows: Sequence[Row], rate: float) -> list[str]:
    """OpenAI's ``prompt_cache_key`` granularities side by side (rows that ran them)."""
    keyed = [row for row in rows if PER_CONVERSATION in row.costs or SHARDED in row.costs]
    if not keyed:
        return []
    lines = [
        "| application | style | conversations / requests | rate | shards | native "
        "| telos: key per application | key per conversation | key per shard |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in keyed:
        cells = [_pct(row.ratio(s)) if s in row.costs else "-" for s in (PER_CONVERSATION, SHARDED)]
        lines.append(
            f"| {row.app} | {row.style} | {row.conversations} / {row.requests} | {rate:g}/min | {row.shards} "
            f"| {_pct(row.ratio(NATIVE))} | {_pct(row.ratio(TELOS))} | {' | '.join(cells)} |"
        )
    return lines


def sessions_for(traces: Path, source: str, vendor: str) -> list[list[TraceRequest]]:
    """The sessions of ``source`` for ``vendor`` (Anthropic: its ``.as-anthropic`` conversion)."""
    if source == "demo":  # an Anthropic session: Anthropic rules only
        if vendor != "anthropic":
            return []
        path = demo_path()
        api = "anthropic"
    else:
        stem = f"{source}.as-anthropic" if vendor == "anthropic" else source
        path = traces / f"{stem}.jsonl.xz"
        api = vendor
        if not path.exists():
            return []
    found = [s for s in group_sessions(load_trace(path)) if s[0].api == api]
    if vendor == "openai":
        found = [[replace(r, kwargs=_openai_only(r.kwargs)) for r in s] for s in found]
    return found


def _openai_only(kwargs: dict[str, Any]) -> dict[str, Any]:
    from cache_efficiency import _openai_accepted

    accepted = _openai_accepted()
    return {k: v for k, v in kwargs.items() if k in accepted}


def run(
    vendors: Sequence[str],
    apps: dict[str, tuple[str, str, tuple[str, ...]]],
    traces: Path,
    count: int,
    max_turns: int,
    rate: float,
    workers: int,
    styles: Sequence[str] = (),
    keys: Sequence[str] = (),
    profiled: bool = False,
) -> Iterator[Row]:
    """The rows of the benchmark (needs ``patched()``); ``keys``: the ``KEYINGS`` also run on OpenAI."""
    for vendor in vendors:
        for app, (source, kind, app_styles) in apps.items():
            sessions = sessions_for(traces, source, vendor)
            if not sessions:
                continue
            for style in app_styles:
                if styles and style not in styles:
                    continue
                conversations = conversations_of(sessions, kind, style, count, max_turns)
                costs, later = {}, {}
                extra = tuple(KEYINGS[k] for k in keys) if vendor == "openai" else ()
                log: list[tuple[int, int, int]] = []
                for strategy in (*STRATEGIES, *extra):
                    costs[strategy], later[strategy] = run_app(
                        vendor,
                        conversations,
                        strategy,
                        workers,
                        rate,
                        f"{app}/{style}",
                        log if strategy == TELOS else None,
                    )
                if profiled:
                    print(f"{vendor} {app} {style}:", file=sys.stderr)
                    print("\n".join(profile(vendor, conversations, rate, log)), file=sys.stderr, flush=True)
                uncached = costs[NATIVE].input
                yield Row(
                    vendor,
                    app,
                    style,
                    len(conversations),
                    costs[NATIVE].requests,
                    uncached,
                    costs,
                    later,
                    ideal(vendor, conversations, rate, uncached),
                    shards(conversations, rate),
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--vendors", default="anthropic,openai")
    parser.add_argument("--apps", default="")
    parser.add_argument("--styles", default="")
    parser.add_argument("--conversations", type=int, default=24)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--rate", type=float, default=4.0, help="conversations arriving per minute")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help=f"the support applications, {QUICK_CONVERSATIONS} conversations"
    )
    parser.add_argument(
        "--keys",
        default="",
        help="OpenAI prompt_cache_key granularities to run beside telos' own: conversation,shard",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print where telos' cost goes against the ideal's, per request number (stderr)",
    )
    parser.add_argument("--write-md", type=Path, default=None)
    args = parser.parse_args(argv)
    apps = QUICK_APPS if args.quick else APPS
    if args.apps:
        wanted = set(args.apps.split(","))
        # The full run's styles (``--styles`` narrows them); the quick run's only for a --quick run.
        known = {**APPS, **QUICK_APPS} if args.quick else {**QUICK_APPS, **APPS}
        apps = {name: app for name, app in known.items() if name in wanted}
    count = QUICK_CONVERSATIONS if args.quick else args.conversations
    rows: list[Row] = []
    with patched():
        for row in run(
            [v for v in args.vendors.split(",") if v],
            apps,
            args.traces,
            count,
            args.max_turns,
            args.rate,
            args.workers,
            [s for s in args.styles.split(",") if s],
            [k for k in args.keys.split(",") if k],
            args.profile,
        ):
            rows.append(row)
            print(table(rows)[-1], file=sys.stderr, flush=True)
    out = [
        f"{count} conversations per application and style, at most {args.max_turns} requests each, "
        f"arriving {args.rate:g} per minute, {args.workers} workers; cost relative to uncached.",
        "",
        *table(rows),
    ]
    keyed = key_table(rows, args.rate)
    if keyed:
        out += ["", *keyed]
    print("\n".join(out))
    if args.write_md is not None:
        args.write_md.write_text("\n".join(out) + "\n")
    return 1 if any("FAIL" in line for line in table(rows)[2:]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
