"""Replaying recorded requests through the real SDKs, ``patch()`` and the engine emulator.

Every request goes through the real ``anthropic`` / ``openai`` SDK to a fresh
``telos_wrap.emulator.Emulator`` (a manual clock moving a few seconds per request), once per
strategy: as the agent sent it (telos disabled for the call), with Anthropic's native automatic
caching, or through telos_wrap. ``benchmarks/cache_efficiency.py`` uses the same functions.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import logging
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO, Any

import telos_wrap
from telos_wrap.config import PatchConfig, current_config, set_config
from telos_wrap.emulator import Emulator, ManualClock, emulator_http_client
from telos_wrap.ir.model import UsageReport
from telos_wrap.replay.responses import jitter_responses
from telos_wrap.replay.results import ReplayedTurn, RunResult, prices_for
from telos_wrap.replay.traces import TraceRequest, jitter, load_trace

#: Engines ``replay --engine`` accepts, and the base URL the OpenAI client uses for each.
ENGINES: Mapping[str, str | None] = {
    "anthropic": None,
    "openai": "https://api.openai.com/v1",
    "deepseek": "https://api.deepseek.com",
    "vllm": "http://vllm.emulated:8000/v1",
    "sglang": "http://sglang.emulated:30000/v1",
    "openrouter": "https://openrouter.ai/api/v1",
}
#: The recorded APIs (``TraceRequest.api``) each engine serves: DeepSeek has no Responses API
#: (docs/engines.md, "OpenAI Responses").
SERVED_APIS: Mapping[str, tuple[str, ...]] = {
    "anthropic": ("anthropic",),
    "openai": ("openai", "responses"),
    "deepseek": ("openai",),
    "vllm": ("openai", "responses"),
    "sglang": ("openai", "responses"),
    "openrouter": ("openai",),
}
_SELF_HOSTED = {"vllm", "sglang"}
DEMO_FILE = "demo_session.jsonl.xz"
JITTER_SEED = 0

# -- strategies -------------------------------------------------------------------------------------

Rewrite = Callable[[TraceRequest, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Strategy:
    """How a run sends each request: through telos_wrap or not, after an optional rewrite."""

    name: str
    telos: bool = False
    rewrite: Rewrite | None = None


def _auto_cache(request: TraceRequest, kwargs: dict[str, Any]) -> dict[str, Any]:
    if request.api != "anthropic":
        return kwargs
    return {**kwargs, "cache_control": {"type": "ephemeral"}}


#: The request exactly as the agent sent it (telos disabled for the call).
AS_SENT = Strategy("as sent")
#: Anthropic's native automatic caching: a top-level ``cache_control`` added to the request as sent.
AUTO_CACHING = Strategy("auto-caching", rewrite=_auto_cache)
#: Through telos_wrap.
TELOS = Strategy("telos_wrap", telos=True)


# -- sending through the real SDKs ------------------------------------------------------------------

_OWN_ARGS = frozenset({"self", "extra_headers", "extra_query", "extra_body", "timeout"})
_STREAM_ARGS = ("stream", "stream_options")


def _accepted(api: str) -> frozenset[str]:
    if api == "anthropic":
        from anthropic.resources.messages import Messages

        params = inspect.signature(Messages.create).parameters
    elif api == "responses":
        from openai.resources.responses import Responses

        params = inspect.signature(Responses.create).parameters
    else:
        from openai.resources.chat.completions import Completions

        params = inspect.signature(Completions.create).parameters
    return frozenset(params) - _OWN_ARGS


def create_kwargs(api: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Trace kwargs as ``create()`` arguments: unknown ones go to ``extra_body``; never streamed."""
    accepted = _accepted(api)
    known = {k: v for k, v in kwargs.items() if k in accepted and k not in _STREAM_ARGS}
    extra = dict(kwargs.get("extra_body") or {})
    extra.update({k: v for k, v in kwargs.items() if k not in accepted and k != "extra_body"})
    if extra:
        known["extra_body"] = extra
    return known


class _Clients:
    """One emulator, and the SDK clients pointed at it."""

    def __init__(self, engine: str, emulator: Emulator) -> None:
        self.engine = engine
        self.emulator = emulator
        self._anthropic: Any = None
        self._openai: Any = None

    def http(self, sdk: str) -> Any:
        return emulator_http_client(self.emulator, sdk)

    def send(self, api: str, kwargs: dict[str, Any]) -> Any:
        if api == "anthropic":
            if self._anthropic is None:
                import anthropic

                self._anthropic = anthropic.Anthropic(
                    api_key="emulator",
                    base_url="https://api.anthropic.com",
                    http_client=self.http("anthropic"),
                    max_retries=0,
                )
            return self._anthropic.messages.create(**kwargs)
        base_url = ENGINES.get(self.engine)
        if base_url is None:
            raise ValueError(f"an OpenAI-API request cannot be replayed with --engine {self.engine}")
        if self._openai is None:
            import openai

            self._openai = openai.OpenAI(
                api_key="emulator", base_url=base_url, http_client=self.http("openai"), max_retries=0
            )
        if api == "responses":
            return self._openai.responses.create(**kwargs)
        return self._openai.chat.completions.create(**kwargs)

    def close(self) -> None:
        for client in (self._anthropic, self._openai):
            if client is not None:
                client.close()


def _status_errors() -> tuple[type[BaseException], ...]:
    import anthropic
    import openai

    return (anthropic.APIStatusError, openai.APIStatusError)


def _turn_gap(turn: int) -> float:
    """Plausible seconds between two requests of an agent (3 to 9, deterministic)."""
    return 3.0 + (turn * 7919 % 61) / 10


def _turn_result(request: TraceRequest, report: UsageReport | None) -> ReplayedTurn:
    if report is None or report.raw_input is None:
        return ReplayedTurn(request.session, request.turn, reported=False)
    by_ttl = report.cache_write_by_ttl or {}
    return ReplayedTurn(
        request.session,
        request.turn,
        raw=report.raw_input,
        read=report.cache_read or 0,
        write=report.cache_write or 0,
        write_1h=int(by_ttl.get("1h", 0)),
        output=report.output or 0,
        reported=report.cache_read is not None,
    )


class Progress:
    """One stderr line, updated in place; on by default only when stderr is a terminal.

    Hand-written rather than a progress-bar library: a count and a percentage redrawn at most ten
    times a second is all a replay needs, and the CLI's only runtime dependencies are the SDKs,
    wrapt and pydantic (``telos-wrap demo`` must run on a fresh install).
    """

    def __init__(self, total: int, *, stream: IO[str] | None = None, enabled: bool | None = None) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.done = 0
        self._last = 0.0
        self._width = 0

    def step(self, label: str) -> None:
        """Count one request; redraw at most ten times a second (and on the last one)."""
        self.done += 1
        now = time.monotonic()
        if self.enabled and (now - self._last > 0.1 or self.done == self.total):
            self._last = now
            text = f"  {label}: {self.done}/{self.total} requests ({100 * self.done // max(self.total, 1)}%)"
            self.stream.write("\r" + text.ljust(self._width))
            self._width = max(self._width, len(text))
            self.stream.flush()

    def close(self) -> None:
        """Erase the line."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()


_run_ids = itertools.count(1)


def replay(
    sessions: Sequence[Sequence[TraceRequest]],
    strategy: Strategy,
    *,
    engine: str = "anthropic",
    jitter_seed: int | None = None,
    emulator: Emulator | None = None,
    emulator_mode: str = "rendered",
    progress: Progress | None = None,
    label: str = "",
    session_factory: Callable[[str], telos_wrap.Session] | None = None,
) -> RunResult:
    """Send ``sessions`` through the real SDKs to an emulator (a fresh one unless given).

    Needs ``telos_wrap.patch()`` in effect (see :func:`patched`). Each session runs inside its own
    ``telos_wrap.session`` — made by ``session_factory(session_id)`` when given (its options, e.g.
    ``learn_volatility``, and the caller keeps the object for ``explain``) — and the emulator's
    ``ManualClock`` moves 3-9 s per request. With
    ``jitter_seed`` every request is first rebuilt the way a careless harness sends it
    (``telos_wrap.replay.traces.jitter``). Requests the emulator refuses are counted as errors.
    ``emulator_mode`` is the fresh emulator's render mode (``"rendered"`` or ``"byte-exact"``,
    docs/emulator.md); a given ``emulator`` keeps its own.
    """
    if not telos_wrap.is_patched():
        raise RuntimeError(
            "replay() needs telos_wrap.patch() in effect (use `with telos_wrap.cli.patched():`)"
        )
    if emulator is None:
        emulator = Emulator(
            clock=ManualClock(), routes={ENGINES[e] or "": e for e in _SELF_HOSTED}, mode=emulator_mode
        )
    clients = _Clients(engine, emulator)
    result = RunResult(strategy.name, engine, prices_for(engine))
    before = sum(telos_wrap.failure_counts().values())
    run = next(_run_ids)
    try:
        _replay_sessions(
            sessions, strategy, clients, result, jitter_seed, run, progress, label, session_factory
        )
    finally:
        clients.close()
    result.fallbacks = sum(telos_wrap.failure_counts().values()) - before
    return result


def _replay_sessions(
    sessions: Sequence[Sequence[TraceRequest]],
    strategy: Strategy,
    clients: _Clients,
    result: RunResult,
    jitter_seed: int | None,
    run: int,
    progress: Progress | None,
    label: str,
    session_factory: Callable[[str], telos_wrap.Session] | None = None,
) -> None:
    errors = _status_errors()
    make = session_factory or telos_wrap.session
    for requests in sessions:
        with make(f"replay-{run}-{requests[0].session}" if requests else f"replay-{run}"):
            for request in requests:
                kwargs = request.kwargs
                if jitter_seed is not None and request.api == "responses":
                    kwargs = jitter_responses(kwargs, request.turn, seed=jitter_seed)
                elif jitter_seed is not None:
                    kwargs = jitter(request.api, kwargs, request.turn, seed=jitter_seed)
                if strategy.rewrite is not None:
                    kwargs = strategy.rewrite(request, kwargs)
                args = create_kwargs(request.api, kwargs)
                if not strategy.telos:
                    args["telos_hint"] = {"disable": True}
                try:
                    response = clients.send(request.api, args)
                except errors as exc:
                    status = getattr(exc, "status_code", "?")
                    message = getattr(exc, "message", str(exc))
                    result.turns.append(
                        ReplayedTurn(request.session, request.turn, error=f"{status}: {message}")
                    )
                else:
                    result.turns.append(_turn_result(request, telos_wrap.usage_of(response)))
                clock = clients.emulator.clock
                if isinstance(clock, ManualClock):
                    clock.advance(_turn_gap(request.turn))
                if progress is not None:
                    progress.step(label or strategy.name)


@contextlib.contextmanager
def patched(*, quiet: bool = True, only_what_pays: bool = True) -> Iterator[None]:
    """``telos_wrap.patch()`` (with the emulated self-hosted URLs) for the block; restored after.

    ``quiet`` keeps telos_wrap's own log lines (cache-break notices, fall-backs) and the SDK's
    retired-model warnings off the terminal while a replay runs; fall-backs are still counted.
    ``only_what_pays`` is ``patch()``'s option (False: rewrite requests below the minimum too).
    """
    was_patched, previous = telos_wrap.is_patched(), current_config()
    telos_wrap.patch(  # every option named: a replay never inherits the caller's strict or ref-pool
        strict=False,
        engines={**previous.engines, **{ENGINES[e] or "": e for e in _SELF_HOSTED}},
        enabled=True,
        refpool_threshold=PatchConfig().refpool_threshold,
        keep_past_drop=False,
        only_what_pays=only_what_pays,
    )
    logger = logging.getLogger("telos_wrap")
    level = logger.level
    if quiet:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            if quiet:
                warnings.filterwarnings(
                    "ignore", message="The model '.*' is deprecated", category=DeprecationWarning
                )
            yield
    finally:
        logger.setLevel(level)
        if was_patched:
            set_config(previous)
        else:
            telos_wrap.unpatch()


# -- loading ----------------------------------------------------------------------------------------


def load_sessions(path: str | Path, *, limit: int | None = None) -> list[list[TraceRequest]]:
    """The sessions of a trace or recording: grouped by session id (first-seen order), by turn.

    ``limit`` keeps only the first ``limit`` requests of the file.
    """
    groups: dict[str, list[TraceRequest]] = {}
    for count, request in enumerate(load_trace(path)):
        if limit is not None and count >= limit:
            break
        groups.setdefault(request.session, []).append(request)
    return [sorted(group, key=lambda r: r.turn) for group in groups.values()]


def demo_path() -> Path:
    """The bundled demo session."""
    return Path(str(resources.files("telos_wrap") / "data" / DEMO_FILE))
