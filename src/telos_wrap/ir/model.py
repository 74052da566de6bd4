"""The TELOS intermediate representation: bands, blocks, messages, the request, and usage.

Every type here is a frozen value. The bridge never edits an IR in place: each pass returns a new
one (``dataclasses.replace``), so a request can be compared with the one before it and every change
is visible. Block ``payload`` objects are the wire-shaped JSON values of the block; they are shared,
never mutated, by convention (deep-freezing a 10 MB tool result on every call would cost more than
the whole rewrite).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "Api",
    "Band",
    "BlockKind",
    "ContentForm",
    "FilteredOutput",
    "TelosBlock",
    "TelosIR",
    "TelosMessage",
    "Transformation",
    "UsageReport",
]

Api = Literal["anthropic", "openai_chat", "openai_responses"]
ContentForm = Literal["string", "list", "absent", "null"]
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


class Band(enum.IntEnum):
    """A block's cache lifetime. The integer value is its rank: ``PIN < FOLD < DROP``.

    PIN:  tool definitions, system prompt, the current question — the immutable base of the prefix.
    FOLD: history, tool results, large documents (ref-pool) — cacheable, compactable by summary.
    DROP: per-turn volatile envelope (timestamps, cwd, reminders) — kept after every breakpoint.
    """

    PIN = 0
    FOLD = 1
    DROP = 2


class BlockKind(str, enum.Enum):
    """What a block is. ``PASSTHROUGH`` is anything the IR does not model: it travels verbatim."""

    TEXT = "text"
    TOOL_DEF = "tool_def"
    TOOL_USE = "tool_use"
    TOOL_RESULT = "tool_result"
    IMAGE = "image"
    DOCUMENT = "document"
    THINKING = "thinking"
    PASSTHROUGH = "passthrough"


@dataclass(frozen=True, slots=True)
class TelosBlock:
    """One content block of the prompt.

    Attributes:
        id: where the block came from (``"system[0]"``, ``"messages[4][1]"``, ``"ref:system-doc-0"``).
        band: PIN, FOLD or DROP.
        kind: the block kind.
        payload: the engine-agnostic content — the wire-shaped JSON value of the block (for a text
            block ``{"type": "text", "text": ...}``, for a tool def the tool object).
        ref_slug: set when the block is a ref-pool entry (or a stub pointing at one).
        source_tag: which rule banded it (diagnostics only, e.g. ``"user-split:drop"``).
        extra: stable side information an engine needs (e.g. ``{"moved_from": "system[0]"}``).
    """

    id: str
    band: Band
    kind: BlockKind
    payload: Any
    ref_slug: str | None = None
    source_tag: str | None = None
    extra: Mapping[str, Any] = field(default_factory=_empty)

    # Direct constructors: ``dataclasses.replace`` introspects fields on every call, which shows up
    # in profiles of 1,000-message conversations.
    def with_band(self, band: Band) -> TelosBlock:
        """This block in another band."""
        return TelosBlock(self.id, band, self.kind, self.payload, self.ref_slug, self.source_tag, self.extra)

    def with_payload(self, payload: Any) -> TelosBlock:
        """This block with another payload."""
        return TelosBlock(self.id, self.band, self.kind, payload, self.ref_slug, self.source_tag, self.extra)

    def with_extra(self, extra: Mapping[str, Any]) -> TelosBlock:
        """This block with other side information (e.g. the caller's cache marker)."""
        return TelosBlock(self.id, self.band, self.kind, self.payload, self.ref_slug, self.source_tag, extra)


@dataclass(frozen=True, slots=True)
class TelosMessage:
    """One conversation message: a role and its blocks (``pin* → fold* → drop*``).

    Attributes:
        role: ``"user"``, ``"assistant"``, ``"system"``/``"developer"`` (OpenAI), ``"tool"`` (OpenAI).
        blocks: the content blocks.
        content_form: ``"string"`` if the caller sent ``content`` as a plain string (re-emitted as a
            string when nothing forces the list form), ``"list"`` for a block list, ``"absent"`` when
            the message had no ``content`` key or ``content: null`` (OpenAI assistant tool calls).
        extra: every other key of the wire message (``name``, ``tool_calls``, ``tool_call_id``...),
            re-emitted unchanged.
    """

    role: str
    blocks: tuple[TelosBlock, ...]
    content_form: ContentForm = "list"
    extra: Mapping[str, Any] = field(default_factory=_empty)

    def with_blocks(
        self, blocks: tuple[TelosBlock, ...], content_form: ContentForm | None = None
    ) -> TelosMessage:
        """This message with other blocks (and optionally another content form)."""
        return TelosMessage(self.role, blocks, content_form or self.content_form, self.extra)


@dataclass(frozen=True, slots=True)
class Transformation:
    """A change telos made to what the model sees (beyond byte layout), recorded for explanation.

    Attributes:
        kind: ``"drop-moved"``, ``"drop-pruned"``, ``"ref-stub"``, ``"fold"``, ``"summary"``,
            ``"reordered"``, ``"tools-sorted"``, ``"markers-trimmed"``, ``"learned-volatile"``...
        where: the block or segment it applies to.
        detail: a human sentence saying what happened and why.
        chars: how many characters of content were moved, pruned or replaced (0 for reorders).
    """

    kind: str
    where: str
    detail: str
    chars: int = 0


@dataclass(frozen=True, slots=True)
class FilteredOutput:
    """One tool result the output filter changed (or meant to and left whole), for the session's
    record and ``explain``: positions, digests and sizes, never text (docs/output-filter.md).

    Attributes:
        where: the message (and block) of the result, ``"messages[4][0]"``.
        tool: the tool the result answers (``""`` when its call is not in the request).
        key: digest of the result's call id and original text: what the session records it under.
        filter_id: the filter applied (``"aggressive/1"``...), ``None`` when sent whole.
        before / after: characters of the result before and after.
        fresh: decided in this request (else re-applied from the session's record).
        fallback: a filter raised, or a recorded one is not available: sent whole.
    """

    where: str
    tool: str
    key: str
    filter_id: str | None
    before: int
    after: int
    fresh: bool
    fallback: bool = False


@dataclass(frozen=True, slots=True)
class TelosIR:
    """A whole request in TELOS form.

    Attributes:
        session_id: the session this request belongs to.
        api: which wire API it was lifted from (and is emitted back to).
        tools: tool definitions, all PIN.
        system: system segment, ``pin* → fold*(incl. rendered ref-pool) → drop*``.
        messages: the conversation.
        ref_pool: slug → FOLD block, the pointer table for large content.
        params: every other top-level request key (model, max_tokens, ...), re-emitted unchanged.
        system_form: how ``system`` was sent: absent, a string, or a block list (Anthropic), so it
            is re-emitted in the same form unless a breakpoint needs the list form.
        tools_form: whether the request had a ``tools`` list (re-emitted even when empty).
        settled: how many leading messages are settled history reused from an earlier turn of
            the session (already canonical, banded FOLD and pruned); the bridge leaves them as
            they are. Always 0 for a stateless call.
        records: the transformations applied so far (see ``Transformation``).
        outputs: the tool results the output filter changed in this request's unsettled messages
            (``FilteredOutput``; empty unless an output filter is on or recorded).
    """

    session_id: str
    api: Api
    tools: tuple[TelosBlock, ...] = ()
    system: tuple[TelosBlock, ...] = ()
    messages: tuple[TelosMessage, ...] = ()
    ref_pool: Mapping[str, TelosBlock] = field(default_factory=_empty)
    params: Mapping[str, Any] = field(default_factory=_empty)
    system_form: Literal["absent", "string", "list"] = "absent"
    tools_form: Literal["absent", "list"] = "absent"
    records: tuple[Transformation, ...] = ()
    settled: int = 0
    outputs: tuple[FilteredOutput, ...] = ()


@dataclass(frozen=True, slots=True)
class UsageReport:
    """Normalized cache usage of one response.

    The convention (written down because vendors disagree): ``raw_input``, ``cache_read`` and
    ``cache_write`` are *disjoint* — every input token is counted in exactly one of them — so
    ``total_input = raw_input + cache_read + cache_write``. Anthropic reports them that way;
    OpenAI's ``prompt_tokens`` includes cached and written tokens and is split here; DeepSeek's
    hit/miss partition maps to ``cache_read``/``raw_input``.

    ``None`` means *not reported* (a vLLM server without ``--enable-prompt-tokens-details``, a chat
    stream without usage) and is never the same as ``0`` (reported, and nothing cached).

    Attributes:
        engine: the engine adapter that produced the request (``"anthropic"``, ``"openai"``...).
        raw_input: input tokens neither read from nor written to the cache.
        cache_read: input tokens read from the cache.
        cache_write: input tokens written to the cache by this request.
        output: output tokens.
        cache_write_by_ttl: writes per TTL (``{"5m": n, "1h": m}`` or ``{"30m": n, "12h": m}``).
        cache_miss_reason: the server's own diagnosis when requested (Anthropic ``diagnostics``).
        raw: the vendor's usage fields as received, for diagnostics.
        reasoning: output tokens spent on reasoning, *included* in ``output`` (OpenAI Responses
            ``output_tokens_details.reasoning_tokens``); ``None`` when not reported.
    """

    engine: str
    raw_input: int | None
    cache_read: int | None
    cache_write: int | None
    output: int | None
    cache_write_by_ttl: Mapping[str, int] | None = None
    cache_miss_reason: Mapping[str, Any] | None = None
    raw: Mapping[str, Any] = field(default_factory=_empty)
    reasoning: int | None = None

    @property
    def total_input(self) -> int | None:
        """All input tokens of the request, or ``None`` when the vendor did not report input."""
        if self.raw_input is None:
            return None
        return self.raw_input + (self.cache_read or 0) + (self.cache_write or 0)

    @property
    def hit_ratio(self) -> float | None:
        """``cache_read / total_input``; ``None`` if either is unreported or the input is empty."""
        total = self.total_input
        if total is None or self.cache_read is None or total == 0:
            return None
        return self.cache_read / total
