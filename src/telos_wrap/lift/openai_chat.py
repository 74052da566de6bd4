"""Lift an OpenAI Chat Completions request body into the TELOS IR.

Banding rules (seeds: harness rules, adapted to the chat wire):

* ``tools[]`` → PIN ``tool_def``;
* the *leading* ``system`` / ``developer`` messages (the run of them at ``messages[0..k)``) form the
  IR ``system`` segment: their text is split for DROP envelopes (``Current time: …``, learned volatile
  spans) like the Anthropic lift, and a PIN piece longer than ``refpool_threshold`` characters moves
  into the ref-pool (``system-doc-{n}``) with a PIN stub where it stood (sent only where a fold of
  it was declared, else the text as written in its place: ``bridge/refpool_render.py``). Every
  system block carries its message of origin (``extra["oai_message"]``: wire index, role, content
  form, other keys such as ``name``), so the engine re-emits one wire message per original
  message, each with its own role: system messages are never merged and a ``developer`` message
  stays a ``developer`` message;
* user text → split into PIN (the question) / FOLD (``<prev>`` echo) / DROP (envelope); every other
  user part (``image_url``, ``input_audio``, ``file``, unknown) is PIN and travels verbatim, so a
  band sort never moves it relative to the question;
* assistant, tool, function and mid-conversation system/developer messages → FOLD, content verbatim
  (a mid-conversation system message stays a system message);
* every key of a message other than ``role`` / ``content`` (``name``, ``tool_calls``,
  ``tool_call_id``, ``refusal``, ``audio``, ``function_call``...) rides in ``TelosMessage.extra`` and
  every top-level key other than ``messages`` / ``tools`` in ``TelosIR.params``.

A caller's own ``prompt_cache_breakpoint`` on a content part is lifted out of the payload into
``extra["prompt_cache_breakpoint"]`` (a marker is not content); the engine puts it back.

Lossless: with nothing banded DROP and no ref-pool entry, the engines' emit of the lifted IR equals
the canonicalized body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from telos_wrap.ir.canon import canonicalize_payload
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Band, BlockKind, ContentForm, TelosBlock, TelosIR, TelosMessage
from telos_wrap.ir.order import marker_carrier
from telos_wrap.ir.refpool import (
    OwnReferences,
    is_own_reference,
    make_entry,
    own_stubs_only,
    parse_rendered,
    parse_stub,
    stub_text,
)
from telos_wrap.lift.readable import check_chat
from telos_wrap.lift.user_split import DEFAULT_PATTERNS, SplitPatterns, split_text

__all__ = ["MARKER", "ORIGIN", "SYSTEM_ROLES", "lift_openai_chat"]

#: The content-part field of an explicit OpenAI cache breakpoint (openai 3.54
#: ``chat_completion_content_part_text_param.PromptCacheBreakpoint``).
MARKER = "prompt_cache_breakpoint"
#: ``TelosBlock.extra`` key naming the wire system message a system-segment block came from.
ORIGIN = "oai_message"
#: Roles whose leading messages form the IR system segment (``developer`` replaces ``system`` for
#: reasoning models; both take text parts only, SDK ``chat_completion_*_message_param.py``).
SYSTEM_ROLES = frozenset({"system", "developer"})

#: System text longer than this (characters) moves into the ref-pool (seeds: _REFPOOL_THRESHOLD; the
#: same default as the Anthropic lift and ``patch(refpool_threshold=)``).
_REFPOOL_THRESHOLD = 2048
_EMPTY: Mapping[str, Any] = MappingProxyType({})

# Content-part types of the chat wire (openai 3.54 ``chat_completion_content_part_*_param.py``).
_PART_KINDS: Mapping[str, BlockKind] = {
    "text": BlockKind.TEXT,
    "image_url": BlockKind.IMAGE,
    "file": BlockKind.DOCUMENT,
}


@dataclass(frozen=True, slots=True)
class _Part:
    """One content part with the caller's marker separated from it."""

    payload: Any
    marker: Mapping[str, Any]


def _split_marker(raw: Any) -> _Part:
    if isinstance(raw, Mapping) and MARKER in raw:
        marker = raw[MARKER]
        rest = {key: value for key, value in raw.items() if key != MARKER}
        # Canonical too: the marker goes back on the wire, and its key order is bytes (R5).
        return _Part(rest, {MARKER: canonicalize_payload(marker)} if marker is not None else _EMPTY)
    return _Part(raw, _EMPTY)


def _content_parts(content: Any) -> tuple[ContentForm, Sequence[Any]] | None:
    """``(form, raw parts)`` of a message's ``content``; ``None`` when it is not str / list."""
    if isinstance(content, str):
        return "string", [{"type": "text", "text": content}]
    if isinstance(content, list):
        return "list", content
    return None


def _kind(payload: Any) -> BlockKind:
    kind = payload.get("type") if isinstance(payload, Mapping) else None
    return _PART_KINDS.get(kind, BlockKind.PASSTHROUGH) if isinstance(kind, str) else BlockKind.PASSTHROUGH


def _plain_text(payload: Any) -> str | None:
    """The text of a part that is exactly ``{"type": "text", "text": str}`` (only those may be split)."""
    if isinstance(payload, Mapping) and set(payload) == {"type", "text"} and payload.get("type") == "text":
        text = payload.get("text")
        return text if isinstance(text, str) else None
    return None


def _split_part(
    block_id: str,
    part: _Part,
    *,
    patterns: SplitPatterns,
    with_fold: bool,
    plain_band: Band,
    tag: str,
    extra: Mapping[str, Any],
    ends_system: bool = False,
) -> list[TelosBlock]:
    """Split a text part into PIN / FOLD / DROP pieces; the caller's marker stays on the last non-DROP.

    ``ends_system``: the part is the system segment's last (a final clock may stay in place:
    ``SplitPatterns.clock_in_place``)."""
    text = _plain_text(part.payload)
    split = (
        split_text(text, patterns, with_fold=with_fold, ends_system=ends_system) if text is not None else None
    )
    if split is None or split.is_plain:
        return [
            TelosBlock(
                id=block_id,
                band=plain_band,
                kind=BlockKind.TEXT,
                payload=part.payload,
                source_tag=tag,
                extra={**extra, **part.marker},
            )
        ]
    pieces: list[TelosBlock] = []
    for band in (Band.PIN, Band.FOLD, Band.DROP):
        # Moved system text is rendered whole, with its context (``TextSplit.moved``).
        piece = split.moved if band is Band.DROP and tag == "system" else split.joined(band)
        if piece:
            name = band.name.lower()
            pieces.append(
                TelosBlock(
                    id=f"{block_id}.{name}",
                    band=plain_band if band is Band.PIN else band,
                    kind=BlockKind.TEXT,
                    payload={"type": "text", "text": piece},
                    source_tag=f"{tag}:split-{name}",
                    extra=extra,
                )
            )
    if part.marker:
        keep = marker_carrier(pieces)
        pieces[keep] = pieces[keep].with_extra({**pieces[keep].extra, **part.marker})
    return pieces


def _all_envelope(part: _Part, patterns: SplitPatterns) -> bool:
    text = _plain_text(part.payload)
    if not text:
        return False
    split = split_text(text, patterns, with_fold=False)
    return bool(split.drop) and not split.pin and not split.fold


def leading_system_count(messages: Sequence[Any]) -> int:
    """How many messages at the start are system/developer messages with str or list content."""
    count = 0
    for message in messages:
        if not (
            isinstance(message, Mapping)
            and message.get("role") in SYSTEM_ROLES
            and _content_parts(message.get("content")) is not None
        ):
            break
        count += 1
    return count


class _SystemLifter:
    """Lifts the leading system messages, numbering ref-pool slugs in wire order."""

    def __init__(self, patterns: SplitPatterns, threshold: int | None, own: OwnReferences) -> None:
        self.patterns = patterns
        self.threshold = threshold
        self.own = own
        self.blocks: list[TelosBlock] = []
        self.pool: dict[str, TelosBlock] = {}
        self._text_parts = 0
        self.own_stubs: set[str] = set()  # ids of the stubs lifted from telos' own output
        self.own_entries: set[str] = set()  # slugs whose entry is telos' own output, lifted again

    def finished(self) -> list[TelosBlock]:
        """The lifted system blocks, every own stub without its own entry back to plain text."""
        if not self.own_stubs:
            return self.blocks
        return own_stubs_only(self.blocks, self.own_stubs, self.own_entries)

    def lift(self, index: int, message: Mapping[str, Any], *, last: bool = False) -> None:
        """Lift system message ``index``; ``last``: it ends the system segment."""
        parsed = _content_parts(message.get("content"))
        assert parsed is not None  # leading_system_count only admits str / list content
        form, raw_parts = parsed
        origin = {
            ORIGIN: {
                "index": index,
                "role": message.get("role"),
                "form": form,
                "fields": {key: value for key, value in message.items() if key not in ("role", "content")},
            }
        }
        for position, raw in enumerate(raw_parts):
            part = _split_marker(raw)
            block_id = f"messages[{index}][{position}]"
            if _kind(part.payload) is not BlockKind.TEXT:
                self.blocks.append(
                    TelosBlock(
                        id=block_id,
                        band=Band.PIN,
                        kind=BlockKind.PASSTHROUGH,
                        payload=part.payload,
                        source_tag="system",
                        extra={**origin, **part.marker},
                    )
                )
                continue
            slug = f"system-doc-{self._text_parts}"
            self._text_parts += 1
            if self._own_output(block_id, part, origin):
                continue
            while slug in self.pool:  # never overwrite an entry telos emitted before
                slug = f"system-doc-{self._text_parts}"
                self._text_parts += 1
            for piece in _split_part(
                block_id,
                part,
                patterns=self.patterns,
                with_fold=False,
                plain_band=Band.PIN,
                tag="system",
                extra=origin,
                ends_system=last and position == len(raw_parts) - 1,
            ):
                self.blocks.append(self._maybe_pool(piece, slug))

    def _own_output(self, block_id: str, part: _Part, origin: Mapping[str, Any]) -> bool:
        """Take a ref-pool stub or rendered entry telos itself emitted in this session as what it is
        (idempotence). Text that only has their form is the caller's, sent as written, and an entry
        never replaces one already pooled (docs/security.md)."""
        text = _plain_text(part.payload)
        if text is None or not self.own or not text.startswith("[ref:"):
            return False
        slug = parse_stub(text)
        if slug is not None:
            if not is_own_reference(slug, text, self.own):
                return False
            self.own_stubs.add(block_id)
            self.blocks.append(
                TelosBlock(
                    id=block_id,
                    band=Band.PIN,
                    kind=BlockKind.TEXT,
                    payload=part.payload,
                    ref_slug=slug,
                    source_tag="lift:ref-stub",
                    extra={**origin, **part.marker},
                )
            )
            return True
        rendered = parse_rendered(text)
        if rendered is None or rendered[0] in self.pool or not is_own_reference(rendered[0], text, self.own):
            return False
        entry = make_entry(rendered[0], rendered[1], source="lift:system-doc")
        if part.marker:
            entry = entry.with_extra(part.marker)
        self.pool[rendered[0]] = entry
        self.own_entries.add(rendered[0])
        return True

    def _maybe_pool(self, piece: TelosBlock, slug: str) -> TelosBlock:
        """Move a big PIN text piece into the ref-pool; return the block to keep in its place."""
        text = _plain_text(piece.payload)
        if (
            piece.band is not Band.PIN
            or text is None
            or self.threshold is None
            or len(text) <= self.threshold
        ):
            return piece
        entry = make_entry(slug, text, source="lift:system-doc")
        marker = {MARKER: piece.extra[MARKER]} if MARKER in piece.extra else {}
        if marker:  # the caller's breakpoint ends the document: it moves with the document
            entry = entry.with_extra(marker)
        self.pool[slug] = entry
        return TelosBlock(
            id=f"{piece.id}.stub",
            band=Band.PIN,
            kind=BlockKind.TEXT,
            payload={"type": "text", "text": stub_text(slug)},
            ref_slug=slug,
            source_tag="lift:ref-stub",
            extra={ORIGIN: piece.extra[ORIGIN], "stub_for_chars": len(text)},
        )


def _lift_message(index: int, message: Mapping[str, Any], patterns: SplitPatterns) -> TelosMessage:
    role = str(message.get("role"))
    extra = {key: value for key, value in message.items() if key not in ("role", "content")}
    parsed = _content_parts(message.get("content"))
    if parsed is None:
        # No content (assistant tool calls), ``content: null`` or a shape we do not model: verbatim.
        return TelosMessage(
            role=role,
            blocks=(),
            content_form="absent" if "content" not in message else "null",
            extra={**extra, **({"content": message["content"]} if "content" in message else {})},
        )
    form, raw_parts = parsed
    blocks: list[TelosBlock] = []
    for position, raw in enumerate(raw_parts):
        part = _split_marker(raw)
        block_id = f"messages[{index}][{position}]"
        kind = _kind(part.payload)
        if role == "user" and kind is BlockKind.TEXT:
            blocks.extend(
                _split_part(
                    block_id,
                    part,
                    patterns=patterns,
                    with_fold=True,
                    plain_band=Band.PIN,
                    tag="user",
                    extra=_EMPTY,
                )
            )
            continue
        band = Band.PIN if role == "user" else Band.FOLD
        if (
            role != "user"
            and role != "assistant"
            and kind is BlockKind.TEXT
            and _all_envelope(part, patterns)
        ):
            # A text part that is nothing but a per-turn envelope (what telos moves into the latest
            # tool message or a trailing system message) is DROP wherever it stands, so telos
            # reading its own output changes nothing.
            band = Band.DROP
        blocks.append(
            TelosBlock(
                id=block_id, band=band, kind=kind, payload=part.payload, source_tag=role, extra=part.marker
            )
        )
    # A split string stays a string: the engines send its pieces joined again (docs/engines.md).
    return TelosMessage(role=role, blocks=tuple(blocks), content_form=form, extra=extra)


_NO_OWN: OwnReferences = MappingProxyType({})


def lift_openai_chat(
    body: Mapping[str, Any],
    *,
    session_id: str,
    hints: TelosHints | None = None,
    patterns: SplitPatterns = DEFAULT_PATTERNS,
    refpool_threshold: int | None = _REFPOOL_THRESHOLD,
    settled: Sequence[TelosMessage] = (),
    own: OwnReferences = _NO_OWN,
) -> TelosIR:
    """Lift a plain-JSON Chat Completions body (no SDK sentinels) into a ``TelosIR`` (api ``openai_chat``).

    ``body`` is never modified; payloads are shared with it, never mutated. ``settled`` are the
    session's settled IR messages standing for the first conversation messages (after the leading
    system messages); they are reused as they are. ``own``: the references telos emitted in this
    session (``refpool.emitted_references``); only text exactly equal to one of them is lifted as a
    stub or pool entry, anything else is the caller's text (docs/security.md). Raises
    ``TelosUnreadableError`` for a shape it cannot read faithfully (``lift/readable.py``).
    """
    if hints is not None and hints.drop_patterns:
        if hints.drop_scope == "all":
            patterns = patterns.extended(drop=hints.drop_patterns)
        else:
            patterns = patterns.extended(system_drop=hints.drop_patterns)
    tools_raw = body.get("tools")
    tools = tuple(
        TelosBlock(
            id=f"tools[{index}]", band=Band.PIN, kind=BlockKind.TOOL_DEF, payload=tool, source_tag="tools"
        )
        for index, tool in enumerate(tools_raw if isinstance(tools_raw, list) else [])
    )
    messages_raw = body.get("messages")
    wire: Sequence[Any] = messages_raw if isinstance(messages_raw, list) else []
    leading = leading_system_count(wire)
    check_chat(body, leading + len(settled), leading)
    system = _SystemLifter(patterns, refpool_threshold, own)
    for index in range(leading):
        system.lift(index, wire[index], last=index == leading - 1)
    first = leading + len(settled)  # settled messages were checked on the turn they were fresh
    messages = tuple(settled) + tuple(
        _lift_message(index, wire[index], patterns.for_messages()) for index in range(first, len(wire))
    )
    lifted_keys = ("messages", "tools") if isinstance(tools_raw, list) else ("messages",)
    params = {key: value for key, value in body.items() if key not in lifted_keys}
    return TelosIR(
        session_id=session_id,
        api="openai_chat",
        tools=tools,
        system=tuple(system.finished()),
        messages=messages,
        ref_pool=MappingProxyType(dict(sorted(system.pool.items()))),
        params=MappingProxyType(params),
        system_form="list" if leading else "absent",
        tools_form="list" if isinstance(tools_raw, list) else "absent",
        settled=len(settled),
    )
