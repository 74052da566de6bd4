"""SHA-256 over the wire bytes telos sends for the sample traces, through sessions end to end.

    python benchmarks/wire_hash.py [--traces DIR] [--sessions-per-source N] [--max-turns N] [--verbose]

A refactor that is not meant to change what is sent proves it with this script: run it before and
after, the hashes must be equal (issue 28). Each line is one *case*, hashed over the method, URL
and body bytes of every request the SDK put on the wire (as the in-process emulator received
them, in order):

* ``session <variant> <engine>`` — every sampled session of every trace source whose API the
  engine serves, sent by the real SDK client (sync, or ``async`` for the ``AsyncAnthropic`` /
  ``AsyncOpenAI`` variants) under ``telos_wrap.patch()``, inside one ``telos_wrap.session`` per
  trace session (its own ``MemoryStore``, its clock the emulator's ``ManualClock``, moving 3-9 s
  per request), so turn preparation, the store's compare-and-set plans, learned volatility,
  the ref-pool and pass-through notes all run. Variants: ``clean`` (the traces as recorded),
  ``kitchen-sink`` (the careless-harness style of ``telos_wrap.testing.harnesses`` that changes the most
  every turn: volatile spans to learn), ``primitives`` (clean, plus ``session.pin`` before the
  second request, ``fold(slugs=...)`` before the fourth and ``fold(message_range=...)`` before the
  sixth, a refused fold hashed by its exception type; every fourth request sent with
  ``telos_hint={"disable": True}``, a pass-through; at the end, 240 s later, the keep-alive
  ``refresh()`` decides, and is sent when it says so), ``async`` (clean, async clients);
  ``responses`` sends the OpenAI-API sessions as Responses requests.
* ``views`` — what the sessions of every case show afterwards: ``explain(n)`` of each request,
  ``stats``, ``cache_breaks``, ``volatile_spans``, ``mark()``'s plan and ``refresh()``'s decision.
* ``pipeline.prepare <engine>`` — the bare ``pipeline.prepare()`` body of every sampled request,
  without a session.

Deterministic: fixed session ids, manual clocks, seeded harness styles; two runs print the same
hashes. About a minute on one core with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import telos_wrap
from telos_wrap.emulator import Emulator, ManualClock, emulator_http_client
from telos_wrap.errors import TelosError
from telos_wrap.ir.canon import canonical_json
from telos_wrap.pipeline import PrepareOptions, prepare
from telos_wrap.replay.responses import responses_sessions
from telos_wrap.replay.runner import ENGINES, SERVED_APIS, create_kwargs, load_sessions, patched
from telos_wrap.replay.traces import TraceRequest
from telos_wrap.sessions import MemoryStore
from telos_wrap.testing.harnesses import rewrite_session

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = ROOT.parent / "shared" / "traces"
SELF_HOSTED = ("vllm", "sglang")
#: A document large enough for the ref-pool (pinned by the ``primitives`` variant).
PINNED = "".join(f"Clause {i}: the order record is quoted verbatim, never paraphrased.\n" for i in range(120))


class RecordingEmulator(Emulator):
    """The emulator, hashing every request it receives (method, URL, body bytes) in order."""

    def __init__(self, digest: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.digest = digest
        self.count = 0

    def handle(self, method: str, url: str, body: bytes, *, flavour: str | None = None) -> Any:
        self.digest.update(f"{method} {url} {len(body)}\n".encode())
        self.digest.update(body)
        self.count += 1
        return super().handle(method, url, body, flavour=flavour)


def _gap(turn: int) -> float:
    return 3.0 + (turn * 7919 % 61) / 10


def _emulator(digest: Any) -> RecordingEmulator:
    return RecordingEmulator(digest, clock=ManualClock(), routes={ENGINES[e] or "": e for e in SELF_HOSTED})


def _client(emulator: Emulator, engine: str, api: str, *, asynchronous: bool) -> Any:
    import anthropic
    import openai

    http = emulator_http_client(
        emulator, "anthropic" if api == "anthropic" else "openai", asynchronous=asynchronous
    )
    if api == "anthropic":
        cls = anthropic.AsyncAnthropic if asynchronous else anthropic.Anthropic
        return cls(api_key="emulator", base_url="https://api.anthropic.com", http_client=http, max_retries=0)
    cls = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return cls(api_key="emulator", base_url=ENGINES[engine], http_client=http, max_retries=0)


def _endpoint(client: Any, api: str) -> Any:
    if api == "anthropic":
        return client.messages.create
    if api == "responses":
        return client.responses.create
    return client.chat.completions.create


def _primitive(sess: telos_wrap.Session, turn: int, views: list[str]) -> None:
    """The ``primitives`` variant's pin and folds, before request ``turn`` of the session."""
    try:
        if turn == 1:
            sess.pin("handbook", PINNED)
        elif turn == 3:
            sess.fold(slugs=["handbook"], summary="The handbook: quote order records verbatim.")
        elif turn == 5:
            sess.fold(message_range=(0, 2), summary="The customer asked about an order; it was found.")
    except TelosError as exc:
        views.append(f"{sess.id} turn {turn}: {type(exc).__name__}")


def _views(sess: telos_wrap.Session, count: int) -> str:
    """Everything the read-only views of a session show, as text."""
    lines = [sess.explain(n) for n in range(count)]
    stats = sess.stats
    lines.append(repr(stats))
    lines.append(repr(sess.cache_breaks))
    lines.append(repr(sess.volatile_spans))
    decision = sess.refresh()
    lines.append(
        repr((decision.send, decision.reason, canonical_json(decision.body) if decision.body else None))
    )
    try:
        lines.append(repr(sess.mark()))
    except TelosError as exc:
        lines.append(f"mark: {type(exc).__name__}")
    return "\n".join(lines)


def _run_session(
    requests: Sequence[TraceRequest],
    engine: str,
    variant: str,
    wire: Any,
    views: list[str],
    label: str,
) -> int:
    emulator = _emulator(wire)
    clock = emulator.clock
    assert isinstance(clock, ManualClock)
    sess = telos_wrap.session(label, store=MemoryStore(), clock=clock.now)
    clients: dict[str, Any] = {}
    asynchronous = variant == "async"

    async def send_async(call: Callable[..., Any], args: dict[str, Any]) -> Any:
        async with sess:
            return await call(**args)

    sent = 0
    with sess:
        for request in requests:
            if variant == "primitives":
                _primitive(sess, sent, views)
            client = clients.get(request.api)
            if client is None:
                client = clients[request.api] = _client(
                    emulator, engine, request.api, asynchronous=asynchronous
                )
            call = _endpoint(client, request.api)
            args = create_kwargs(request.api, request.kwargs)
            if variant == "primitives" and sent % 4 == 2:
                args["telos_hint"] = {"disable": True}  # a pass-through request of the session
            try:
                if asynchronous:
                    asyncio.run(send_async(call, args))
                else:
                    call(**args)
            except Exception as exc:  # a refusal is part of what is hashed, by its type
                views.append(f"{label} turn {request.turn}: {type(exc).__name__}")
            clock.advance(_gap(request.turn))
            sent += 1
        if variant == "primitives" and "anthropic" in clients:
            clock.advance(240.0)  # near the end of a 5-minute entry: a keep-alive may pay
            decision = sess.refresh()
            if decision.send and decision.body is not None:
                clients["anthropic"].messages.create(**create_kwargs("anthropic", decision.body))
                sent += 1
    views.append(_views(sess, sent))
    return emulator.count


def _served(sessions: Sequence[Sequence[TraceRequest]], engine: str) -> list[Sequence[TraceRequest]]:
    apis = SERVED_APIS[engine]
    return [s for s in sessions if s and all(r.api in apis for r in s)]


def _cases() -> Iterator[tuple[str, str]]:
    """(variant, engine) pairs hashed through sessions."""
    yield "clean", "anthropic"
    for engine in ("openai", "deepseek", "vllm", "sglang", "openrouter"):
        yield "clean", engine
    yield "kitchen-sink", "anthropic"
    yield "kitchen-sink", "openai"
    yield "primitives", "anthropic"
    yield "primitives", "openai"
    yield "async", "anthropic"
    yield "async", "openai"
    yield "responses", "openai"
    yield "responses", "vllm"


def load(traces: Path, per_source: int, max_turns: int) -> dict[str, list[list[TraceRequest]]]:
    """The first ``per_source`` sessions of each trace source, each cut to ``max_turns`` requests."""
    sources: dict[str, list[list[TraceRequest]]] = {}
    for path in sorted(traces.glob("*.jsonl*")):
        sessions = load_sessions(path)
        picked: list[list[TraceRequest]] = []
        for api in ("anthropic", "openai"):
            of_api = [s for s in sessions if s and all(r.api == api for r in s)]
            picked.extend(list(s[:max_turns]) for s in of_api[:per_source])
        sources[path.name.split(".jsonl")[0]] = picked
    return sources


def session_hashes(sources: dict[str, list[list[TraceRequest]]], verbose: bool) -> list[tuple[str, str, int]]:
    rows: list[tuple[str, str, int]] = []
    views: list[str] = []
    for variant, engine in _cases():
        wire = hashlib.sha256()
        count = 0
        started = time.perf_counter()
        for source, sessions in sources.items():
            if variant == "responses":
                sessions = [
                    list(s) for s in responses_sessions([s for s in sessions if s[0].api == "openai"])
                ]
            for number, requests in enumerate(_served(sessions, engine)):
                if variant == "kitchen-sink":
                    requests, _ = rewrite_session(requests, "kitchen-sink", seed=0)
                label = f"wh-{variant}-{engine}-{source}-{number}"
                count += _run_session(requests, engine, variant, wire, views, label)
        rows.append((f"session {variant} {engine}", wire.hexdigest(), count))
        if verbose:
            print(f"  ({variant} {engine}: {time.perf_counter() - started:.1f} s)", file=sys.stderr)
    rows.append(("views", hashlib.sha256("\n".join(views).encode()).hexdigest(), len(views)))
    return rows


def prepare_hashes(sources: dict[str, list[list[TraceRequest]]]) -> list[tuple[str, str, int]]:
    rows: list[tuple[str, str, int]] = []
    for engine in ("anthropic", "openai", "deepseek", "vllm"):
        digest = hashlib.sha256()
        count = 0
        for sessions in sources.values():
            for requests in _served(sessions, engine):
                for request in requests:
                    options = PrepareOptions(engine=engine, session_id=f"wh-{request.session}")
                    try:
                        body: object = prepare(request.api, request.kwargs, options).body  # type: ignore[arg-type]
                    except TelosError as exc:
                        body = type(exc).__name__
                    digest.update(canonical_json(body).encode() + b"\n")
                    count += 1
        rows.append((f"pipeline.prepare {engine}", digest.hexdigest(), count))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--sessions-per-source", type=int, default=6, help="per source and API (default 6)")
    parser.add_argument("--max-turns", type=int, default=24, help="requests per session (default 24)")
    parser.add_argument("--verbose", action="store_true", help="time per case on stderr")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sources = load(args.traces, args.sessions_per_source, args.max_turns)
    with patched(quiet=True):
        rows = session_hashes(sources, args.verbose)
    rows += prepare_hashes(sources)
    for name, digest, count in rows:
        print(f"{name:32} {digest}  ({count})")
    total = hashlib.sha256("".join(digest for _, digest, _ in rows).encode()).hexdigest()
    print(f"{'all':32} {total}")
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
