"""Sessions: the conversation-level state a cache-friendly prompt needs, carried by a ContextVar.

``with telos_wrap.session("chat-42"):`` (or ``async with``) makes every patched call inside it —
including calls made in asyncio tasks started inside it — part of session ``chat-42``. Calls
outside any session get an implicit session keyed by the conversation's stable prefix (model,
tools, system), so a one-line ``patch()`` user loses nothing.
"""

from __future__ import annotations

import contextvars
import hashlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from telos_wrap.ir.canon import canonical_bytes, canonical_json
from telos_wrap.ir.hints import TelosHints, parse_hints
from telos_wrap.ir.model import Api, UsageReport
from telos_wrap.pipeline import Prepared, PrepareOptions, SessionHooks, prepare

__all__ = ["Session", "SessionStats", "current_session", "implicit_session", "named_session", "session"]

_current: contextvars.ContextVar[Session | None] = contextvars.ContextVar("telos_wrap_session", default=None)
_IMPLICIT_LIMIT = 1024


@dataclass(slots=True)
class SessionStats:
    """Running totals of one session (every count is exact, updated under the session's lock)."""

    requests: int = 0
    responses_with_usage: int = 0
    raw_input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    unreported: int = 0
    cache_breaks: int = 0
    by_engine: dict[str, int] = field(default_factory=dict)

    @property
    def total_input(self) -> int:
        return self.raw_input + self.cache_read + self.cache_write

    @property
    def hit_ratio(self) -> float | None:
        total = self.total_input
        return self.cache_read / total if total else None


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What the session remembers of one request (for ``explain``)."""

    index: int
    api: Api
    engine: str
    body: Mapping[str, Any]
    prepared: Prepared | None
    usage: UsageReport | None = None


class Session:
    """One conversation. Create it with ``telos_wrap.session(...)``.

    Thread-safe: requests of one session are prepared one at a time under its lock.
    """

    def __init__(
        self,
        session_id: str | None = None,
        *,
        hints: TelosHints | None = None,
        strict: bool | None = None,
        implicit: bool = False,
        history_limit: int = 64,
    ) -> None:
        self.id = session_id or f"s-{uuid.uuid4().hex[:16]}"
        self.hints = hints or TelosHints()
        self.strict = strict
        self.implicit = implicit
        self.stats = SessionStats()
        self._lock = threading.RLock()
        self._history: OrderedDict[int, RequestRecord] = OrderedDict()
        self._history_limit = history_limit
        self._tokens: list[contextvars.Token[Session | None]] = []

    # -- context manager ------------------------------------------------------------------------

    def __enter__(self) -> Session:
        self._tokens.append(_current.set(self))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        _current.reset(self._tokens.pop())

    async def __aenter__(self) -> Session:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- the request path (called by the patch layer) -------------------------------------------

    def hooks(self) -> SessionHooks:
        """What this session adds to the pipeline (stateless for now)."""
        return SessionHooks()

    def prepare_request(
        self, api: Api, body: Mapping[str, Any], options: PrepareOptions
    ) -> tuple[int, Prepared]:
        """Run the pipeline for one request of this session; returns ``(request index, prepared)``."""
        with self._lock:
            prepared = prepare(api, body, options, self.hooks())
            index = self._remember(api, options.engine, body, prepared)
            return index, prepared

    def note_passthrough(self, api: Api, engine: str, body: Mapping[str, Any]) -> int:
        """Record a request telos sent unchanged (disabled or fail-open)."""
        with self._lock:
            return self._remember(api, engine, body, None)

    def _remember(self, api: Api, engine: str, body: Mapping[str, Any], prepared: Prepared | None) -> int:
        index = self.stats.requests
        self.stats.requests += 1
        self.stats.by_engine[engine] = self.stats.by_engine.get(engine, 0) + 1
        self._history[index] = RequestRecord(
            index=index, api=api, engine=engine, body=body, prepared=prepared
        )
        while len(self._history) > self._history_limit:
            self._history.popitem(last=False)
        return index

    def record_usage(self, index: int, report: UsageReport | None) -> None:
        """Add a response's usage to the stats (exactly once per request)."""
        with self._lock:
            record = self._history.get(index)
            if record is not None:
                if record.usage is not None:
                    return
                self._history[index] = RequestRecord(
                    record.index, record.api, record.engine, record.body, record.prepared, report
                )
            if report is None or report.raw_input is None:
                self.stats.unreported += 1
                return
            self.stats.responses_with_usage += 1
            self.stats.raw_input += report.raw_input
            self.stats.cache_read += report.cache_read or 0
            self.stats.cache_write += report.cache_write or 0
            self.stats.output += report.output or 0

    def explain(self, n: int = -1) -> str:
        """What was sent for the n-th request of this session (default: the latest) and why."""
        with self._lock:
            if not self._history:
                return f"session {self.id}: no requests yet"
            index = n if n >= 0 else self.stats.requests + n
            record = self._history.get(index)
        if record is None:
            return f"session {self.id}: request {n} is not in the retained history"
        lines = [f"session {self.id} request {record.index} ({record.api}, engine {record.engine})"]
        if record.prepared is None:
            lines.append("  sent unchanged (telos disabled for it, or it failed open)")
        else:
            for bp in record.prepared.plan.breakpoints:
                where = bp.segment if bp.message is None else f"messages[{bp.message}]"
                lines.append(f"  breakpoint {bp.name:7} at {where}[{bp.block}] ttl={bp.ttl}")
            lines.extend(f"  note: {note}" for note in record.prepared.plan.notes)
            lines.extend(
                f"  {t.kind}: {t.where} ({t.chars} chars) — {t.detail}" for t in record.prepared.ir.records
            )
        if record.usage is not None:
            u = record.usage
            lines.append(
                f"  usage: uncached={u.raw_input} read={u.cache_read} write={u.cache_write} output={u.output}"
            )
        return "\n".join(lines)


def session(
    session_id: str | None = None,
    *,
    hints: TelosHints | Mapping[str, Any] | None = None,
    strict: bool | None = None,
) -> Session:
    """Create a session to use as ``with telos_wrap.session(...):`` (or ``async with``).

    Args:
        session_id: a stable id; generated when omitted.
        hints: default ``TelosHints`` for every call in the session (a dict is validated).
        strict: raise instead of failing open, for this session's calls.
    """
    return Session(session_id, hints=parse_hints(hints), strict=strict)


def current_session() -> Session | None:
    """The session active in this context, if any."""
    return _current.get()


_implicit: OrderedDict[str, Session] = OrderedDict()
_implicit_lock = threading.Lock()


def implicit_session(api: Api, body: Mapping[str, Any]) -> Session:
    """The implicit session of a request made outside any ``session()``.

    Keyed by what stays fixed for a whole conversation (API, model, the set of tools, the first
    message) — not the system prompt, which careless harnesses rebuild with a clock every turn —
    so every turn of one conversation lands in the same session; bounded LRU.
    """
    messages = body.get("messages")
    first = messages[0] if isinstance(messages, list) and messages else None
    tools = body.get("tools")
    try:
        key_material = {
            "api": api,
            "model": body.get("model"),
            # Sorted so a harness that shuffles its tools still lands in one session.
            "tools": sorted(canonical_json(tool) for tool in tools) if isinstance(tools, list) else None,
            "first": first,
        }
        digest = hashlib.sha256(canonical_bytes(key_material)).hexdigest()[:16]
    except (TypeError, ValueError):
        digest = "unhashable"
    with _implicit_lock:
        found = _implicit.get(digest)
        if found is None:
            found = Session(f"implicit-{digest}", implicit=True)
            _implicit[digest] = found
            while len(_implicit) > _IMPLICIT_LIMIT:
                _implicit.popitem(last=False)
        else:
            _implicit.move_to_end(digest)
        return found


_named: OrderedDict[str, Session] = OrderedDict()


def named_session(session_id: str) -> Session:
    """The session a ``telos_hint={"session": id}`` names: the live one with that id, or a new one.

    Bounded LRU, like implicit sessions: state that must outlive it belongs in a session store.
    """
    with _implicit_lock:
        found = _named.get(session_id)
        if found is None:
            found = Session(session_id)
            _named[session_id] = found
            while len(_named) > _IMPLICIT_LIMIT:
                _named.popitem(last=False)
        else:
            _named.move_to_end(session_id)
        return found
