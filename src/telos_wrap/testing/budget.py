"""Cache budgets for tests: replay the requests a test sent through telos and the emulator, and judge.

A test's own HTTP answers (a cassette, a mock, a real vendor) say nothing reliable about caching, so
the hit ratio of a budget always comes from the built-in emulator (``telos_wrap.emulator``, offline,
no key): the requests the application sent — its bodies *before* telos rewrote them — are replayed
through the real SDKs, ``patch()`` and a fresh emulator by ``telos_wrap.replay.runner.replay``, and the
replay's sessions report the cache breaks. ``testing.pytest_plugin`` (the ``telos_cache`` fixture
and marker) and ``testing.cassettes.replay_cassette`` are built on this module; it has no pytest
dependency.

Requests are grouped into conversations by what telos' implicit session keys on (API, model, tool
names, first message; ``docs/sessions.md``) within the session they were sent in, so two
conversations of one test are not judged as one (``testing.conversations``); each break is
explained in the application's terms (``testing.changes``). See ``docs/testing.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import telos_wrap
from telos_wrap.replay.pruned import pruned_patterns
from telos_wrap.replay.results import RunResult
from telos_wrap.replay.runner import SERVED_APIS, TELOS, patched, replay
from telos_wrap.replay.traces import TraceRequest
from telos_wrap.sessions import CacheBreak, MemoryStore, Session
from telos_wrap.testing.changes import caller_change
from telos_wrap.testing.conversations import group_conversations

__all__ = [
    "BreakReport",
    "Budget",
    "CacheBudgetError",
    "CacheReport",
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
    conversations = group_conversations(kept, pruned)
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
                change = caller_change(conversation[brk.request - 1], conversation[brk.request])
            else:
                change = "the previous request's cache is gone"
            report.breaks.append(
                BreakReport(conversation[0].session, brk, change, made_session.explain(brk.request))
            )
    return report
