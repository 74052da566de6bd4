"""Cache budgets for tests: replay the requests a test sent through telos and the emulator, and judge.

A test's own HTTP answers (a cassette, a mock, a real vendor) say nothing reliable about caching, so
the hit ratio of a budget always comes from the built-in emulator (``telos_wrap.emulator``, offline,
no key): the requests the application sent — its bodies *before* telos rewrote them — are replayed
through the real SDKs, ``patch()`` and a fresh emulator by ``telos_wrap.replay.replay``, and the
replay's sessions report the cache breaks. ``pytest_plugin`` (the ``telos_cache`` fixture and
marker) and ``cassettes.replay_cassette`` are built on this module; it has no pytest dependency.

Requests are grouped into conversations by what telos' implicit session keys on (API, model, tool
names, first message; ``docs/sessions.md``) within the session they were sent in, so two
conversations of one test are not judged as one. See ``docs/testing.md``.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import telos_wrap
from telos_wrap.ir.canon import canonical_bytes
from telos_wrap.ir.model import UsageReport
from telos_wrap.replay.pruned import pruned_patterns
from telos_wrap.replay.results import RunResult
from telos_wrap.replay.runner import SERVED_APIS, TELOS, patched, replay
from telos_wrap.sessions import CacheBreak, MemoryStore, Session
from telos_wrap.traces import TraceRequest

__all__ = [
    "BreakReport",
    "Budget",
    "CacheBudgetError",
    "CacheReport",
    "RequestCapture",
    "conversation_key",
    "replay_requests",
]

#: Engines a budget may name; an API's requests go to its own engine when none is named.
_API_ENGINES = {
    api: tuple(engine for engine, apis in SERVED_APIS.items() if api in apis)
    for api in ("anthropic", "openai", "responses")
}


class CacheBudgetError(AssertionError):
    """A cache budget was not met; the message lists each violation and each cache break explained.

    An ``AssertionError`` so that pytest (and unittest) report it as a test failure.
    """


@dataclass(frozen=True, slots=True)
class Budget:
    """What a test allows: every limit is optional (``None`` = not checked).

    Attributes:
        min_hit_ratio: cache-read tokens / all input tokens over every replayed request, at least.
            The first request of a conversation can only write, so a 4-request conversation whose
            prompt never changes reaches at most about 3/4.
        max_breaks: cache breaks (``telos_wrap.sessions.CacheBreak``) over every conversation, at most.
        max_cost_ratio: input cost relative to sending the same tokens uncached, at most.
    """

    min_hit_ratio: float | None = None
    max_breaks: int | None = None
    max_cost_ratio: float | None = None

    def __post_init__(self) -> None:
        if self.min_hit_ratio is not None and not 0.0 <= self.min_hit_ratio <= 1.0:
            raise ValueError(f"min_hit_ratio must be between 0 and 1, got {self.min_hit_ratio!r}")
        if self.max_breaks is not None and (
            isinstance(self.max_breaks, bool) or not isinstance(self.max_breaks, int) or self.max_breaks < 0
        ):
            raise ValueError(f"max_breaks must be a non-negative integer, got {self.max_breaks!r}")
        if self.max_cost_ratio is not None and self.max_cost_ratio < 0:
            raise ValueError(f"max_cost_ratio must be non-negative, got {self.max_cost_ratio!r}")

    @property
    def empty(self) -> bool:
        """True when nothing is checked."""
        return self.min_hit_ratio is None and self.max_breaks is None and self.max_cost_ratio is None


# -- capturing what a test sends ---------------------------------------------------------------------


class RequestCapture:
    """A ``telos_wrap.patch`` request observer that keeps every body as the application sent it.

    ``with RequestCapture() as capture:`` — while active (and ``patch()`` in effect) each request telos
    handles is appended to ``capture.requests`` as a ``TraceRequest`` whose ``session`` is the telos
    session it was sent in; usage reports go to ``capture.usage`` by ``(session, index)``.
    """

    def __init__(self) -> None:
        self.requests: list[TraceRequest] = []
        self.usage: dict[tuple[str, int], UsageReport | None] = {}
        self._lock = threading.Lock()

    def on_request(self, api: str, session_id: str, index: int, body: Mapping[str, Any]) -> None:
        """Keep a deep copy of ``body`` (the caller may mutate its lists after the call)."""
        copied = _plain_copy(body)
        with self._lock:
            self.requests.append(TraceRequest(session_id, index, api, copied))

    def on_usage(self, session_id: str, index: int, report: UsageReport | None) -> None:
        with self._lock:
            self.usage[(session_id, index)] = report

    def __enter__(self) -> RequestCapture:
        from telos_wrap.patch.observers import OBSERVERS

        OBSERVERS.append(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        from telos_wrap.patch.observers import OBSERVERS

        try:
            OBSERVERS.remove(self)
        except ValueError:
            pass


def _plain_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _plain_copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_copy(item) for item in value]
    return value


# -- grouping into conversations ---------------------------------------------------------------------


def _tool_name(tool: Any) -> str:
    if not isinstance(tool, Mapping):
        return ""
    function = tool.get("function")
    name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
    return name if isinstance(name, str) else str(tool.get("type", ""))


def _conversation_items(api: str, body: Mapping[str, Any]) -> Any:
    """The conversation of a request: ``messages``, or a Responses request's ``input`` items."""
    if api != "responses":
        return body.get("messages")
    items = body.get("input")
    return [{"role": "user", "content": items}] if isinstance(items, str) else items


_MARKERS = ("cache_control", "prompt_cache_breakpoint")


def _without_envelopes(message: Any, patterns: Sequence[str]) -> Any:
    """``message``'s role and content, markers left out and text matching ``patterns`` removed."""
    if not isinstance(message, Mapping):
        return message
    content = message.get("content")
    blocks = [content] if isinstance(content, str) else content if isinstance(content, list) else None
    if blocks is None:
        return message
    kept: list[Any] = []
    for block in blocks:
        if isinstance(block, Mapping):
            block = {key: value for key, value in block.items() if key not in _MARKERS}
        text = block if isinstance(block, str) else block.get("text") if isinstance(block, Mapping) else None
        if not isinstance(text, str):
            kept.append(block)
            continue
        for pattern in patterns:
            text = re.sub(pattern, "", text, flags=re.MULTILINE)
        if text.strip():
            kept.append(text.strip())
    return {"role": message.get("role"), "content": kept}


def _first_turn(messages: Any) -> Any:
    if not isinstance(messages, list):
        return None
    for message in messages:
        if not (isinstance(message, Mapping) and message.get("role") in ("system", "developer")):
            return message
    return None


def conversation_key(api: str, body: Mapping[str, Any], drop_patterns: Sequence[str] = ()) -> str:
    """What stays fixed for a conversation: API, model, tool names (sorted), first non-system message.

    Like telos' implicit session (``docs/sessions.md``), minus OpenAI system/developer messages, which
    harnesses rebuild every turn (a clock in the system message must not split a conversation).
    With ``drop_patterns`` the first message is compared by its content only: cache markers left
    out, a string equal to one text block, and text matching a pattern (an envelope) removed.
    """
    tools = body.get("tools")
    first = _first_turn(_conversation_items(api, body))
    material = {
        "api": api,
        "model": body.get("model"),
        "tools": sorted(map(_tool_name, tools)) if isinstance(tools, list) else None,
        "first": _without_envelopes(first, drop_patterns) if drop_patterns else first,
    }
    try:
        return hashlib.sha256(canonical_bytes(material)).hexdigest()[:12]
    except (TypeError, ValueError):
        return "unhashable"


def _conversations(
    requests: Iterable[TraceRequest], drop_patterns: Sequence[str] = ()
) -> list[list[TraceRequest]]:
    groups: dict[tuple[str, str, str], list[TraceRequest]] = {}
    for request in requests:
        key = (
            request.session,
            request.api,
            conversation_key(request.api, request.kwargs, drop_patterns=drop_patterns),
        )
        groups.setdefault(key, []).append(request)
    out: list[list[TraceRequest]] = []
    for (session, _, digest), group in groups.items():
        name = f"{session}~{digest}"
        out.append([TraceRequest(name, turn, r.api, r.kwargs) for turn, r in enumerate(group)])
    return out


# -- explaining a break in the application's own terms -------------------------------------------------


def _texts(value: Any) -> list[str]:
    """The text of a system prompt / message content, one entry per caller block."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        out: list[str] = []
        for block in value:
            if isinstance(block, str):
                out.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                out.append(block["text"])
            else:
                out.append(canonical_bytes(block).decode("utf-8") if _canonicalizable(block) else repr(block))
        return out
    if value is None:
        return []
    return [canonical_bytes(value).decode("utf-8") if _canonicalizable(value) else repr(value)]


def _canonicalizable(value: Any) -> bool:
    try:
        canonical_bytes(value)
    except (TypeError, ValueError):
        return False
    return True


def _clip(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _line_change(where: str, before: str, after: str) -> str:
    old, new = before.splitlines(), after.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace":
            was, now = " / ".join(old[i1:i2]), " / ".join(new[j1:j2])
            return f"{where} line {i1 + 1} changed: {_clip(was)} → {_clip(now)}"
        if tag == "delete":
            return f"{where} line {i1 + 1} removed: {_clip(' / '.join(old[i1:i2]))}"
        return f"{where} line {i1 + 1} inserted: {_clip(' / '.join(new[j1:j2]))}"
    return f"{where} changed (whitespace or line endings only)"


def _system_of(request: TraceRequest) -> list[str]:
    body = request.kwargs
    if request.api == "anthropic":
        return _texts(body.get("system"))
    if request.api == "responses":
        return _texts(body.get("instructions"))
    listed = body.get("messages")
    messages: list[Any] = listed if isinstance(listed, list) else []
    out: list[str] = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") not in ("system", "developer"):
            break
        out.append("\n".join(_texts(message.get("content"))))
    return out


def _tools_change(before: TraceRequest, after: TraceRequest) -> str | None:
    old, new = before.kwargs.get("tools") or [], after.kwargs.get("tools") or []
    if not isinstance(old, list) or not isinstance(new, list):
        return None
    old_names, new_names = [_tool_name(t) for t in old], [_tool_name(t) for t in new]
    if sorted(old_names) != sorted(new_names):
        added = sorted(set(new_names) - set(old_names))
        removed = sorted(set(old_names) - set(new_names))
        return f"tools changed: added {added or 'none'}, removed {removed or 'none'}"
    if old_names != new_names:
        return f"tools reordered: {old_names} → {new_names}"
    for name, a, b in zip(new_names, old, new, strict=True):
        if _canonicalizable(a) and _canonicalizable(b) and canonical_bytes(a) != canonical_bytes(b):
            return f"tool {name!r} definition changed"
    return None


def _caller_change(before: TraceRequest, after: TraceRequest) -> str:
    """The first difference between two requests as the application sent them, in its own terms."""
    if before.kwargs.get("model") != after.kwargs.get("model"):
        return f"model changed: {before.kwargs.get('model')!r} → {after.kwargs.get('model')!r}"
    tools = _tools_change(before, after)
    if tools is not None:
        return tools
    old_system, new_system = _system_of(before), _system_of(after)
    for index, (a, b) in enumerate(zip(old_system, new_system, strict=False)):
        if a != b:
            return _line_change(f"system[{index}]", a, b)
    if len(old_system) != len(new_system):
        return f"system prompt went from {len(old_system)} to {len(new_system)} blocks"
    old_messages = _conversation_items(before.api, before.kwargs) or []
    new_messages = _conversation_items(after.api, after.kwargs) or []
    where = "input" if after.api == "responses" else "messages"
    skip = len(old_system) if before.api == "openai" else 0
    for index in range(skip, min(len(old_messages), len(new_messages))):
        a, b = old_messages[index], new_messages[index]
        if _canonicalizable(a) and _canonicalizable(b) and canonical_bytes(a) == canonical_bytes(b):
            continue
        a_text = "\n".join(_texts(a.get("content") if isinstance(a, Mapping) else a))
        b_text = "\n".join(_texts(b.get("content") if isinstance(b, Mapping) else b))
        if a_text != b_text:
            return _line_change(f"{where}[{index}]", a_text, b_text)
        return f"{where}[{index}] changed (role, name or non-text fields)"
    if len(new_messages) < len(old_messages):
        return f"history was cut from {len(old_messages)} to {len(new_messages)} {where} items"
    keys = sorted(
        k for k in set(before.kwargs) | set(after.kwargs) if before.kwargs.get(k) != after.kwargs.get(k)
    )
    return f"request fields changed: {keys}" if keys else "nothing the application sent changed"


@dataclass(frozen=True, slots=True)
class BreakReport:
    """One cache break of a replayed conversation, with what the application changed.

    Attributes:
        conversation: the replayed conversation's name (``<session>~<key>``).
        cache_break: the session's own ``CacheBreak`` (telos' view of the emitted prompt).
        change: the first difference between this request and the previous one as the application
            sent them (``system[0] line 2 changed: 'Date: 10:01' → 'Date: 10:02'``).
        explain: ``Session.explain`` of the request (what telos sent and why).
    """

    conversation: str
    cache_break: CacheBreak
    change: str
    explain: str

    def summary(self) -> str:
        """``cache break at request 3: system[0] line 2 changed: … (system_changed at system[0], …)``."""
        brk = self.cache_break
        return (
            f"cache break at request {brk.request}: {self.change} "
            f"({brk.reason} at {brk.where}, ~{brk.tokens_at_risk} tokens at risk): {brk.detail}"
        )


# -- the report --------------------------------------------------------------------------------------


@dataclass(slots=True)
class CacheReport:
    """What the emulator measured for a set of requests replayed through telos.

    Attributes:
        runs: one ``RunResult`` per engine used (per-request usage in ``turns``).
        breaks: the cache breaks, explained (a session keeps its last 16).
        break_count: every cache break, counted (``SessionStats.cache_breaks``).
        conversations: how many conversations were replayed.
        skipped: requests that could not be replayed, with the reason.
        learn_volatility: whether the replay sessions learned volatile system lines.
    """

    runs: list[RunResult] = field(default_factory=list)
    breaks: list[BreakReport] = field(default_factory=list)
    break_count: int = 0
    conversations: int = 0
    skipped: list[str] = field(default_factory=list)
    learn_volatility: bool = True

    @property
    def requests(self) -> int:
        return sum(len(run.turns) for run in self.runs)

    @property
    def input(self) -> int:
        return sum(run.input for run in self.runs)

    @property
    def cache_read(self) -> int:
        return sum(run.read for run in self.runs)

    @property
    def cache_write(self) -> int:
        return sum(run.write for run in self.runs)

    @property
    def hit_ratio(self) -> float:
        """Cache-read tokens / all input tokens (0.0 with no input)."""
        return self.cache_read / self.input if self.input else 0.0

    @property
    def cost_ratio(self) -> float:
        """Input cost relative to the same tokens uncached, per engine prices (1.0 with no input)."""
        total = sum(run.cost for run in self.runs)
        return total / self.input if self.input else 1.0

    @property
    def errors(self) -> list[str]:
        """Requests the emulator refused (``status: message``)."""
        return [t.error for run in self.runs for t in run.turns if t.error is not None]

    def violations(self, budget: Budget) -> list[str]:
        """One line per limit of ``budget`` that is not met (empty when it is)."""
        out: list[str] = []
        if budget.min_hit_ratio is not None and self.hit_ratio < budget.min_hit_ratio:
            out.append(f"hit ratio {self.hit_ratio:.1%} is below min_hit_ratio={budget.min_hit_ratio:.1%}")
        if budget.max_breaks is not None and self.break_count > budget.max_breaks:
            out.append(f"{self.break_count} cache break(s), more than max_breaks={budget.max_breaks}")
        if budget.max_cost_ratio is not None and self.cost_ratio > budget.max_cost_ratio:
            out.append(
                f"input cost {self.cost_ratio:.1%} of uncached is above "
                f"max_cost_ratio={budget.max_cost_ratio:.1%}"
            )
        return out

    def summary(self) -> str:
        """One line: requests, conversations, hit ratio, cost, breaks (emulated engines named)."""
        engines = ", ".join(run.engine for run in self.runs) or "none"
        return (
            f"{self.requests} request(s) in {self.conversations} conversation(s) replayed through telos "
            f"and the emulator ({engines}): hit ratio {self.hit_ratio:.1%}, input cost {self.cost_ratio:.1%} "
            f"of uncached, {self.break_count} cache break(s)"
            + ("" if self.learn_volatility else " (learn_volatility=False)")
        )

    def explain(self, *, full: bool = True) -> str:
        """The summary, each break explained (with ``Session.explain`` when ``full``), skips and errors."""
        lines = [self.summary()]
        for report in self.breaks:
            lines.append(report.summary())
            if full:
                lines.extend("    " + line for line in report.explain.splitlines())
        lines.extend(f"skipped: {reason}" for reason in self.skipped)
        lines.extend(f"refused by the emulator: {error}" for error in self.errors)
        return "\n".join(lines)

    def check(self, budget: Budget) -> None:
        """Raise ``CacheBudgetError`` (the violations, then ``explain()``) unless ``budget`` is met."""
        problems = self.violations(budget)
        if self.requests == 0 and not budget.empty:
            problems = [
                "no request reached telos: the budget has nothing to measure (is the SDK call made "
                "inside the test, with the anthropic/openai SDK?)"
            ]
        if problems:
            raise CacheBudgetError(
                "telos cache budget not met: " + "; ".join(problems) + "\n" + self.explain()
            )


# -- replaying ---------------------------------------------------------------------------------------


def _engine_for(api: str, engine: str | None) -> str:
    if engine is None:
        return _API_ENGINES[api][0]
    if engine not in _API_ENGINES[api]:
        raise ValueError(
            f"engine {engine!r} cannot serve {api}-API requests; use one of {list(_API_ENGINES[api])} "
            "(or leave engine unset: anthropic requests → anthropic, openai and responses requests → "
            "openai)"
        )
    return engine


def _replayable(request: TraceRequest) -> str | None:
    if request.api == "responses":
        if request.kwargs.get("previous_response_id") or request.kwargs.get("conversation"):
            # The earlier turns live on the server: the request alone is not the prompt.
            return (
                f"responses request {request.turn} of {request.session}: continues server-held state "
                "(previous_response_id / conversation), which a replay does not have"
            )
        if isinstance(request.kwargs.get("input"), (str, list)):
            return None
        return f"responses request {request.turn} of {request.session}: no `input`"
    messages = request.kwargs.get("messages")
    if not isinstance(messages, list):
        return (
            f"{request.api} request {request.turn} of {request.session}: "
            "no `messages` list (not a chat request)"
        )
    return None


def replay_requests(
    requests: Sequence[TraceRequest],
    *,
    engine: str | None = None,
    learn_volatility: bool = True,
) -> CacheReport:
    """Replay ``requests`` (bodies as the application sent them) through telos and a fresh emulator.

    Args:
        requests: in the order they were sent; grouped into conversations by ``session`` and
            ``conversation_key``.
        engine: the emulated engine for every request (``"anthropic"``; OpenAI-API requests:
            ``"openai"``, ``"deepseek"``, ``"vllm"``, ``"sglang"``); unset, each API uses its own.
        learn_volatility: let the replay sessions learn untagged volatile system lines
            (``docs/sessions.md``), as telos does by default.

    ``patch()`` is applied for the replay if it is not in effect, and the previous state restored.
    Nothing goes to the network; the replay sessions live in a private ``MemoryStore``.
    """
    report = CacheReport(learn_volatility=learn_volatility)
    kept: list[TraceRequest] = []
    for request in requests:
        reason = _replayable(request)
        if reason is None:
            kept.append(request)
        else:
            report.skipped.append(reason)
    # Envelopes the recording itself pruned from past turns (telos' output, recorded under the
    # marker) are DROP for the replay too: neither a rewritten history nor another conversation.
    pruned = pruned_patterns(kept)
    conversations = _conversations(kept, pruned)
    report.conversations = len(conversations)
    by_engine: dict[str, list[list[TraceRequest]]] = {}
    for group in conversations:
        by_engine.setdefault(_engine_for(group[0].api, engine), []).append(group)
    store = MemoryStore()
    made: dict[str, Session] = {}

    def factory(session_id: str) -> Session:
        made[session_id] = made_session = telos_wrap.session(
            session_id,
            store=store,
            learn_volatility=learn_volatility,
            # They sit in past user turns, so they apply to messages too (drop_scope="all").
            hints={"drop_patterns": pruned, "drop_scope": "all"} if pruned else None,
        )
        return made_session

    with patched():
        for name, groups in by_engine.items():
            report.runs.append(replay(groups, TELOS, engine=name, session_factory=factory))
    originals = {f"{c[0].session}": c for c in conversations}
    for session_id, made_session in made.items():
        report.break_count += made_session.stats.cache_breaks
        conversation = originals.get(session_id.split("-", 2)[-1])
        if conversation is None:
            continue
        for brk in sorted(made_session.cache_breaks, key=lambda b: b.request):
            if 0 < brk.request < len(conversation):
                change = _caller_change(conversation[brk.request - 1], conversation[brk.request])
            else:
                change = "the previous request's cache is gone"
            report.breaks.append(
                BreakReport(conversation[0].session, brk, change, made_session.explain(brk.request))
            )
    return report
