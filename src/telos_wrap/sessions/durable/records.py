"""Small frozen records a session keeps durably: folds, learned volatile spans, cache breaks.

Every record converts to and from plain JSON (``to_json`` / ``from_json``) so it can live in a
session store; none of them holds conversation content except the summaries the application wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "FILE_CALL_PREFIX",
    "MAX_LEARNED",
    "THINKING_CALL",
    "BreakReason",
    "CacheBreak",
    "ClearFold",
    "RangeFold",
    "SlugFold",
    "SpanKind",
    "VolatileSpan",
]

#: Session-wide cap on learned volatile spans (``SessionState.volatile``): learning stops there
#: (``sessions/learning/volatility.py``) and a merge of two workers' spans keeps no more
#: (``sessions/durable/merge.py``).
MAX_LEARNED = 32

#: ``ClearFold.call`` of a fold that clears the thinking blocks of an assistant message (a tool
#: call's key is a hex digest, so the two never meet).
THINKING_CALL = "thinking"

#: ``ClearFold.call`` of a fold that clears the content of a ``<file path=…>`` block of a message
#: starts with this: ``file:`` and a digest of the path (``sessions/turns/files.file_key``; the
#: path itself is never stored).
FILE_CALL_PREFIX = "file:"

#: How a volatile span was found (``VolatileSpan.kind``).
SpanKind = Literal["value", "lines", "region", "list", "present"]

BreakReason = Literal[
    "model_changed",
    "tools_changed",
    "system_changed",
    "history_rewritten",
    "params_changed",
    "ttl_expired",
    "telos_rewrote",
    "context_folded",
]


@dataclass(frozen=True, slots=True)
class SlugFold:
    """``session.fold(slugs=[slug], summary=...)``: the ref-pool entry ``slug`` now renders ``summary``.

    Attributes:
        slug: the frozen ref-pool slug (its ``[ref:slug]`` bytes never change).
        summary: the text that replaces the entry's content.
        at: the request index the fold was recorded before (the first request that uses it).
    """

    slug: str
    summary: str
    at: int

    def to_json(self) -> dict[str, Any]:
        """The fold as a stored state holds it: ``{slug, summary, at}``."""
        return {"slug": self.slug, "summary": self.summary, "at": self.at}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SlugFold:
        """The fold of a stored ``to_json`` object; a malformed one raises (a missing key, a value of the
        wrong type), and a session that reads it starts again from a fresh state (docs/sessions.md, "When a
        store entry is malformed")."""
        return cls(slug=str(data["slug"]), summary=str(data["summary"]), at=int(data["at"]))


@dataclass(frozen=True, slots=True)
class RangeFold:
    """``session.fold(message_range=(start, end), summary=...)``: messages ``start..end-1`` → a summary.

    Indices are positions in the message list *the application sends* (it keeps sending its full
    history; the session swaps the span for the summary on every later request).

    Attributes:
        start / end: the half-open range of application message indices.
        digest: hash of those messages when the fold was recorded; a request whose messages in the
            range differ (the application rewrote them) does not get the fold (recorded, not silent).
        summary: the summary text the model sees instead.
        at: the request index the fold was recorded before.
    """

    start: int
    end: int
    digest: str
    summary: str
    at: int

    def to_json(self) -> dict[str, Any]:
        """The fold as a stored state holds it: ``{start, end, digest, summary, at}`` (the summary is the
        application's text, the rest positions and a hash)."""
        return {
            "start": self.start,
            "end": self.end,
            "digest": self.digest,
            "summary": self.summary,
            "at": self.at,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RangeFold:
        """The fold of a stored ``to_json`` object; a malformed one raises (a missing key, a value of the
        wrong type), and a session that reads it starts again from a fresh state (docs/sessions.md, "When a
        store entry is malformed")."""
        return cls(
            start=int(data["start"]),
            end=int(data["end"]),
            digest=str(data["digest"]),
            summary=str(data["summary"]),
            at=int(data["at"]),
        )


@dataclass(frozen=True, slots=True)
class ClearFold:
    """One tool result the session's context policy cleared, the thinking blocks of one earlier
    assistant message (``call == THINKING_CALL``), or the content of the ``<file path=…>`` blocks
    of one path in one message (``call`` starts with ``FILE_CALL_PREFIX``;
    ``sessions/turns/pressure.py``).

    Positions and digests only: no text of the caller's but the summary its own summarizer wrote.

    Attributes:
        message: the application message index holding the result (or the thinking).
        call: digest of the tool call's id (``short_hash``), naming the result within the message;
            ``THINKING_CALL`` for the message's thinking blocks; ``file:`` and a digest of the path
            for its file blocks.
        digest: the application hash of that message when the fold was decided; a request whose
            message differs does not get the fold (recorded as ``fold-not-applied``).
        tokens: estimated tokens of the cleared result or file (what the placeholder says was there).
        at: the request index the fold was decided for (the first request that carries it).
        use_message: with ``clear_tool_inputs``, the message holding the tool call, else -1.
        use_digest: that message's application hash.
        summary: the caller's summarizer's text for this result ("" for the placeholder).
    """

    message: int
    call: str
    digest: str
    tokens: int
    at: int
    use_message: int = -1
    use_digest: str = ""
    summary: str = ""

    def key(self) -> tuple[int, str]:
        """``(message, call)``: the cleared unit this fold names, compared with the keys of a request's
        clearable units (``turns/pressure.py``, ``turns/turn.py``) and of its summaries."""
        return self.message, self.call

    @property
    def thinking(self) -> bool:
        """Whether this fold clears the thinking blocks of an assistant message (``call`` is
        ``THINKING_CALL``) rather than one tool result."""
        return self.call == THINKING_CALL

    @property
    def file(self) -> bool:
        """Whether this fold clears the content of a message's file blocks of one path."""
        return self.call.startswith(FILE_CALL_PREFIX)

    def to_json(self) -> dict[str, Any]:
        """The fold as a stored state holds it; ``use`` (``[use_message, use_digest]``) and ``summary`` are
        written only when set."""
        data: dict[str, Any] = {
            "message": self.message,
            "call": self.call,
            "digest": self.digest,
            "tokens": self.tokens,
            "at": self.at,
        }
        if self.use_message >= 0:
            data["use"] = [self.use_message, self.use_digest]
        if self.summary:
            data["summary"] = self.summary
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClearFold:
        """The fold of a stored ``to_json`` object (no ``use``: ``-1`` and ``""``; no ``summary``: ``""``); a
        malformed one raises (a missing key, a value of the wrong type), and a session that reads it starts
        again from a fresh state (docs/sessions.md, "When a store entry is malformed")."""
        use = data.get("use") or [-1, ""]
        return cls(
            message=int(data["message"]),
            call=str(data["call"]),
            digest=str(data["digest"]),
            tokens=int(data["tokens"]),
            at=int(data["at"]),
            use_message=int(use[0]),
            use_digest=str(use[1]),
            summary=str(data.get("summary", "")),
        )


@dataclass(frozen=True, slots=True)
class VolatileSpan:
    """A span of the system prompt the session learned is volatile (treated as DROP from then on).

    It holds no text and no pattern built from text: positions, and keyed digests of line
    *skeletons* (a line with its digit-bearing tokens masked; ``sessions/learning/digests.py``)
    that find the span again on a later request's text (``sessions/learning/spans.py``, ``locate``).

    Attributes:
        block: index of the system block it was learned in.
        line: first line (0-based) of the span in that block when it was learned.
        lines: how many lines the span covered then.
        learned_at: the request index whose comparison with its predecessor taught it (for a
            suspect: the request that first saw it change).
        kind: ``"present"`` (a whole line that states the present, ``Today is …``, learned on
            sight), ``"value"`` (a line whose digit-bearing value changed, learned at its first
            change), ``"list"`` (lines carrying values that came and went, learned at their first
            change), ``"lines"`` (a run of lines) or ``"region"`` (lines replaced by another number
            of lines) — the last two are learned when the same place changes a second time. Every
            span is whole lines, widened to the unit they belong to (``lift/text_units.py``).
        own: the keyed digest of the span's one line (a line found by itself), else ``""``.
        before / after: the keyed digest of the line before / after the span, ``"^"`` / ``"$"``
            where the span starts / ends its block, ``""`` where that side does not place it.
        origin: ``""`` when this conversation learned it; ``"fleet"`` when another conversation of
            the same application learned it (``learned_at`` is then that conversation's request)
            and this one adopted it after verifying it (``sessions/learning/fleet.py``).
        local: learned (or first suspected) comparing two requests that were not one conversation
            (the later one's messages did not extend the earlier one's): kept by the session,
            never shared with the fleet.
    """

    block: int
    line: int
    lines: int
    learned_at: int
    kind: SpanKind = "lines"
    own: str = ""
    before: str = ""
    after: str = ""
    origin: Literal["", "fleet"] = ""
    local: bool = False

    @property
    def where(self) -> tuple[int, str, str, str, bool]:
        """What finds the span (two spans with the same ``where`` cut the same lines)."""
        return (self.block, self.own, self.before, self.after, self.lines == 1 and self.kind != "list")

    def describe(self) -> str:
        """Positions only: ``system block 0 line 3 (2 lines, value)``."""
        count = "1 line" if self.lines == 1 else f"{self.lines} lines"
        return f"system block {self.block} line {self.line} ({count}, {self.kind})"

    def to_json(self) -> dict[str, Any]:
        """The span as a stored state holds it: positions and digests, never text; ``origin`` and ``local``
        are written only when set."""
        data: dict[str, Any] = {
            "block": self.block,
            "line": self.line,
            "lines": self.lines,
            "learned_at": self.learned_at,
            "kind": self.kind,
            "own": self.own,
            "before": self.before,
            "after": self.after,
        }
        if self.origin:  # written only when set
            data["origin"] = self.origin
        if self.local:
            data["local"] = True
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VolatileSpan:
        """The span of a stored record; ``ValueError`` when it is not one (the state is then unread)."""
        kind = data.get("kind", "lines")
        anchors = [data.get(name, "") for name in ("own", "before", "after")]
        if not all(_anchor_ok(value) for value in anchors):
            raise ValueError("a learned span holds digests and block edges only")
        own, before, after = (str(value) for value in anchors)
        if own in ("^", "$") or before == "$" or after == "^":
            raise ValueError("a learned span's edges are misplaced")
        return cls(
            block=int(data["block"]),
            line=int(data["line"]),
            lines=int(data["lines"]),
            learned_at=int(data["learned_at"]),
            kind=kind if kind in ("value", "lines", "region", "list", "present") else "lines",
            own=own,
            before=before,
            after=after,
            origin="fleet" if data.get("origin") == "fleet" else "",
            local=data.get("local") is True,
        )


def _anchor_ok(value: object) -> bool:
    return isinstance(value, str) and (
        value in ("", "^", "$") or (len(value) == 8 and all(c in "0123456789abcdef" for c in value))
    )


@dataclass(frozen=True, slots=True)
class CacheBreak:
    """A request whose prompt diverged from its predecessor's before the point that one cached.

    Attributes:
        request: index of the request that broke the cache (in its session).
        reason: ``model_changed``, ``tools_changed``, ``system_changed``, ``history_rewritten``,
            ``params_changed`` (``tool_choice`` / ``thinking`` / ``speed``), ``ttl_expired``, or
            ``telos_rewrote``: telos itself did not re-send a settled message byte for byte (a telos
            bug, never the caller's doing; ``sessions/turns/wire_i2.py``), or ``context_folded``: the
            session's context policy folded old tool results or thinking here on purpose (one
            rewrite after the fold point, counted in ``stats.context_folds``; never the caller's
            edit, never a bug).
        segment: where the divergence starts: ``"tools"``, ``"system"`` or ``"messages"``.
        message: the message index (``segment == "messages"``), else ``None``.
        block: the block index within the tools / system list or that message.
        tokens_at_risk: estimated tokens the previous request cached after the divergence point,
            which this request has to write again (≈ bytes / 4).
        detail: one human sentence.
    """

    request: int
    reason: BreakReason
    segment: Literal["tools", "system", "messages"]
    message: int | None
    block: int
    tokens_at_risk: int
    detail: str

    @property
    def where(self) -> str:
        """``"tools[2]"``, ``"system[0]"`` or ``"messages[3][1]"``."""
        if self.segment == "messages":
            return f"messages[{self.message}][{self.block}]"
        return f"{self.segment}[{self.block}]"

    def to_json(self) -> dict[str, Any]:
        """The break as a stored state holds it (``detail`` is telos's own sentence: positions, counts and
        model names, never conversation text)."""
        return {
            "request": self.request,
            "reason": self.reason,
            "segment": self.segment,
            "message": self.message,
            "block": self.block,
            "tokens_at_risk": self.tokens_at_risk,
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CacheBreak:
        """The break of a stored ``to_json`` object (``reason`` and ``segment`` are taken as stored, not
        checked against their literals); a malformed one raises (a missing key, a value of the wrong type),
        and a session that reads it starts again from a fresh state (docs/sessions.md, "When a store entry is
        malformed")."""
        message = data.get("message")
        return cls(
            request=int(data["request"]),
            reason=data["reason"],
            segment=data["segment"],
            message=None if message is None else int(message),
            block=int(data["block"]),
            tokens_at_risk=int(data["tokens_at_risk"]),
            detail=str(data["detail"]),
        )
