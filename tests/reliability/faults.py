"""Faults to inject into telos' own stages, by name, and what each one must lead to.

Pipeline stages are reached through ``pipeline._stage_hook``; the stages around the pipeline (hint
decoding, routing, usage parsing, stream-usage capture, the session store) are reached by replacing
the function the stage calls (``monkeypatch``) or by giving telos a store that fails — one whose
methods raise, or a ``RedisStore`` pointed at a port nothing listens on.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from telos_wrap import pipeline
from telos_wrap.engines._openai_compat import OpenAICompatEngine
from telos_wrap.engines.anthropic import AnthropicEngine
from telos_wrap.patch import turns
from telos_wrap.sessions import MemoryStore, set_default_store
from telos_wrap.sessions.runtime import SessionRuntime
from telos_wrap.sessions.stores.redis_store import RedisStore

from .harness import Entry

PIPELINE_STAGES = (
    "engine",
    "lift",
    "session.before",
    "bridge.canonicalize",
    "bridge.relocate",
    "bridge.refpool",
    "bridge.invariants",
    "plan",
    "emit",
    "history",  # turns (not token counts): the session's history memo is settled after emit
    "gate",  # patch()'s default: is the request above the minimum cacheable prefix (docs/engines.md)
)


class InjectedFault(RuntimeError):
    """What an injected fault raises (a type no real code raises, so its cause is unambiguous)."""


class FailingStore(MemoryStore):
    """A ``MemoryStore`` whose named methods raise (a store that is down or times out)."""

    def __init__(self, failing: set[str], error: Callable[[], Exception]) -> None:
        super().__init__()
        self.failing = failing
        self.error = error

    def load(self, session_id: str) -> Any:
        if "load" in self.failing:
            raise self.error()
        return super().load(session_id)

    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        if "compare_and_set" in self.failing:
            raise self.error()
        return super().compare_and_set(session_id, expected, text)


class BrokenAccumulator:
    """A stream-usage accumulator that fails on the first event."""

    def feed(self, event: Any) -> None:
        raise InjectedFault("injected fault in stream usage capture")

    def report(self) -> None:
        return None


def closed_port() -> int:
    """A local port with nothing listening on it (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _raise(*_: Any, **__: Any) -> Any:
    raise InjectedFault("injected fault")


@dataclass(frozen=True)
class Fault:
    """One injectable fault.

    Attributes:
        name: test id.
        stage: the stage ``TelosStageError.stage`` must name (fail-open count key).
        side: ``"request"`` (the request cannot be rewritten: the original goes out),
            ``"response"`` (the rewrite went out; reading the response fails) or ``"store"`` (the
            session store is unavailable: the rewrite goes out, made from the state this process
            holds, and strict mode raises before sending).
        install: injects the fault (``monkeypatch``); restored by pytest.
        cause: the exception type at the root of the ``TelosStageError`` chain.
    """

    name: str
    stage: str
    side: str
    install: Callable[[pytest.MonkeyPatch], None]
    cause: type[BaseException] = InjectedFault

    def fires(self, entry: Entry) -> bool:
        """Whether this fault is reached by a call through ``entry``."""
        if self.name == "history":
            # Responses requests carry only what they send: no history memo, no "history" stage.
            return not entry.count_only and entry.sdk != "responses"
        if self.name == "usage":
            return entry.has_usage
        if self.name == "stream-usage":
            return entry.streaming
        if self.name == "session.record-usage":
            return not entry.count_only and entry.turn
        if self.name == "store.write":
            # a token count (or a Responses compaction) is not a turn: it only reads the session
            return not entry.count_only and entry.turn
        return True

    def rewrites_anyway(self, entry: Entry) -> bool:
        """A token count (or compaction) that cannot read its session still sends the stateless rewrite."""
        return (entry.count_only or not entry.turn) and self.stage == "session.store"

    def stage_for(self, entry: Entry) -> str:
        if self.name == "session.record-usage":
            return "stream-usage" if entry.streaming else "usage"
        return self.stage


def _stage_fault(stage: str) -> Fault:
    def hook(name: str) -> None:
        if name == stage:
            raise InjectedFault(f"injected fault in {name}")

    def install(monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(pipeline, "_stage_hook", hook)

    return Fault(stage, stage, "request", install)


def _store_fault(name: str, make: Callable[[], Any], cause: type[BaseException]) -> Fault:
    def install(monkeypatch: pytest.MonkeyPatch) -> None:
        set_default_store(make())  # the autouse fixture puts the previous store back

    # The store is down, not telos: the call is still rewritten, on the state this process holds.
    return Fault(name, "session.store", "store", install, cause)


def _patch_fault(name: str, stage: str, side: str, target: Any, attribute: str, value: Any) -> Fault:
    def install(monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(target, attribute, value)

    return Fault(name, stage, side, install)


def _usage_fault() -> Fault:
    def install(monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(AnthropicEngine, "parse_usage", _raise)
        monkeypatch.setattr(OpenAICompatEngine, "parse_usage", _raise)

    return Fault("usage", "usage", "response", install)


def _stream_usage_fault() -> Fault:
    def install(monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(AnthropicEngine, "stream_usage", lambda self: BrokenAccumulator())
        monkeypatch.setattr(OpenAICompatEngine, "stream_usage", lambda self: BrokenAccumulator())

    return Fault("stream-usage", "stream-usage", "response", install)


def _record_usage_fault() -> Fault:
    """Recording the usage in the session fails, after the rewrite went out (the usage has no store
    I/O of its own: it is folded into the session's next write, see docs/sessions.md)."""

    def install(monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(SessionRuntime, "record_usage", _raise)

    return Fault("session.record-usage", "usage", "response", install)


FAULTS: tuple[Fault, ...] = (
    *(_stage_fault(stage) for stage in PIPELINE_STAGES),
    _patch_fault("hint", "hint", "request", turns, "read_hint_header", _raise),
    _patch_fault("route", "route", "request", turns, "route_request", _raise),
    _store_fault(
        "store.read",
        lambda: FailingStore({"load"}, lambda: ConnectionError("store unreachable")),
        ConnectionError,
    ),
    _store_fault(
        "store.write",
        lambda: FailingStore({"compare_and_set"}, lambda: redis.exceptions.TimeoutError("Timeout writing")),
        redis.exceptions.TimeoutError,
    ),
    _store_fault(
        "store.redis-down",
        lambda: RedisStore(f"redis://127.0.0.1:{closed_port()}/0"),
        redis.exceptions.ConnectionError,
    ),
    _store_fault(
        "store.redis-cluster-down",
        lambda: RedisStore(f"redis+cluster://127.0.0.1:{closed_port()}"),
        redis.exceptions.RedisClusterException,
    ),
    _usage_fault(),
    _stream_usage_fault(),
    _record_usage_fault(),
)
FAULT_IDS = [fault.name for fault in FAULTS]
STORE_FAULTS = frozenset(f.name for f in FAULTS if f.stage == "session.store")


def fault(name: str) -> Fault:
    return next(f for f in FAULTS if f.name == name)
