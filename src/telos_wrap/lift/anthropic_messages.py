"""Lift an Anthropic Messages request body into the TELOS IR.

Banding rules (seeds: harness rules):

* ``tools[]`` → PIN ``tool_def``;
* system text ≤ ``refpool_threshold`` characters → PIN; larger → a ref-pool FOLD entry
  ``system-doc-{i}`` plus a PIN stub ``[ref:system-doc-{i}]`` where it stood (the bridge sends the
  stub only where a fold of it was declared, else the text in the stub's place as written:
  ``bridge/refpool_render.py``); DROP envelopes found
  in system text (``Current time: …``, ``<environment_info>``, learned volatile spans) → DROP;
* user text → split into PIN (the question) / FOLD (``<prev>`` echo) / DROP (envelope); in a user
  message that carries ``tool_result`` blocks, the text is FOLD (tool results must stay first);
* ``tool_result``, assistant text, ``tool_use``, ``thinking`` → FOLD;
* anything unmodelled (server tool blocks, ``container_upload``, ``compaction``...) travels verbatim.

Every message is banded as if it were the latest; the bridge re-bands history and prunes old
envelopes, so a message's emitted bytes do not depend on how many turns followed it.

A caller's own ``cache_control`` is lifted out of the payload into ``extra["cache_control"]``: markers
are not content and must not change canonical bytes; the engine puts them back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

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
from telos_wrap.lift.readable import check_anthropic
from telos_wrap.lift.user_split import DEFAULT_PATTERNS, SplitPatterns, split_text

__all__ = ["REFPOOL_THRESHOLD", "lift_anthropic_messages"]

#: System text longer than this (characters) moves into the ref-pool (seeds: _REFPOOL_THRESHOLD).
REFPOOL_THRESHOLD = 2048

_KINDS: Mapping[str, BlockKind] = {
    "text": BlockKind.TEXT,
    "image": BlockKind.IMAGE,
    "document": BlockKind.DOCUMENT,
    "tool_use": BlockKind.TOOL_USE,
    "tool_result": BlockKind.TOOL_RESULT,
    "thinking": BlockKind.THINKING,
    "redacted_thinking": BlockKind.THINKING,
}


_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})
_NO_OWN: OwnReferences = MappingProxyType({})


def _split_marker(payload: Any) -> tuple[Any, Mapping[str, Any]]:
    """Separate a caller's ``cache_control`` from a block payload."""
    if type(payload) is dict and "cache_control" in payload:
        marker = payload["cache_control"]
        rest = {key: value for key, value in payload.items() if key != "cache_control"}
        # Canonical too: the marker goes back on the wire, and its key order is bytes (R5).
        return rest, ({"cache_control": canonicalize_payload(marker)} if marker is not None else _NO_EXTRA)
    return payload, _NO_EXTRA


def _text_block(
    block_id: str, band: Band, text: str, tag: str, extra: Mapping[str, Any] | None = None
) -> TelosBlock:
    return TelosBlock(
        id=block_id,
        band=band,
        kind=BlockKind.TEXT,
        payload={"type": "text", "text": text},
        source_tag=tag,
        extra=extra or MappingProxyType({}),
    )


def _split_text_block(
    block_id: str,
    payload: Mapping[str, Any],
    marker: Mapping[str, Any],
    *,
    patterns: SplitPatterns,
    with_fold: bool,
    plain_band: Band,
    tag: str,
) -> list[TelosBlock]:
    """Split a text block's text; the caller's marker stays on the last non-DROP piece."""
    text = payload.get("text")
    extra_keys = {key: value for key, value in payload.items() if key not in ("type", "text")}
    if not isinstance(text, str) or extra_keys:
        # Citations or other fields bind to the exact text: never split such a block.
        return [
            TelosBlock(
                id=block_id,
                band=plain_band,
                kind=BlockKind.TEXT,
                payload=payload,
                source_tag=tag,
                extra=marker,
            )
        ]
    split = split_text(text, patterns, with_fold=with_fold)
    if split.is_plain:
        return [
            TelosBlock(
                id=block_id,
                band=plain_band,
                kind=BlockKind.TEXT,
                payload=payload,
                source_tag=tag,
                extra=marker,
            )
        ]
    blocks: list[TelosBlock] = []
    for band in (Band.PIN, Band.FOLD, Band.DROP):
        # Moved system text is rendered whole, with its context (``TextSplit.moved``).
        piece = split.moved if band is Band.DROP and tag == "system" else split.joined(band)
        if piece:
            effective = plain_band if band is Band.PIN else band
            blocks.append(
                _text_block(
                    f"{block_id}.{band.name.lower()}", effective, piece, f"{tag}:split-{band.name.lower()}"
                )
            )
    if marker:
        keep = marker_carrier(blocks)
        blocks[keep] = blocks[keep].with_extra(marker)
    return blocks


def _own_output(
    block_id: str,
    payload: Mapping[str, Any],
    marker: Mapping[str, Any],
    own: OwnReferences,
    pool: Mapping[str, TelosBlock],
) -> tuple[TelosBlock | None, TelosBlock | None] | None:
    """``(stub, None)`` / ``(None, entry)`` when a system text block is exactly a ref-pool stub or
    rendered entry telos itself emitted in this session (``own``: so lifting telos' output again
    changes nothing); else ``None``: text that only looks like one is the caller's, sent as written,
    and an entry never replaces one already in ``pool`` (docs/security.md)."""
    text = payload.get("text")
    if (
        not own
        or set(payload) != {"type", "text"}
        or not isinstance(text, str)
        or not text.startswith("[ref:")
    ):
        return None
    slug = parse_stub(text)
    if slug is not None and is_own_reference(slug, text, own):
        stub = TelosBlock(
            id=block_id,
            band=Band.PIN,
            kind=BlockKind.TEXT,
            payload=payload,
            ref_slug=slug,
            source_tag="lift:ref-stub",
            extra=marker,
        )
        return stub, None
    rendered = parse_rendered(text)
    if rendered is not None and rendered[0] not in pool and is_own_reference(rendered[0], text, own):
        entry = make_entry(rendered[0], rendered[1], source="lift:system-doc")
        if marker:
            entry = entry.with_extra(marker)
        return None, entry
    return None


def _lift_system(
    system: Any, *, patterns: SplitPatterns, threshold: int | None, own: OwnReferences
) -> tuple[tuple[TelosBlock, ...], dict[str, TelosBlock], Literal["absent", "string", "list"]]:
    if system is None:
        return (), {}, "absent"
    form: Literal["string", "list"] = "string" if isinstance(system, str) else "list"
    raw_blocks: Sequence[Any] = [{"type": "text", "text": system}] if isinstance(system, str) else system
    blocks: list[TelosBlock] = []
    pool: dict[str, TelosBlock] = {}
    own_entries: set[str] = set()  # slugs whose entry is telos' own output, lifted again
    own_stubs: set[str] = set()  # ids of the stubs lifted from telos' own output
    for index, raw in enumerate(raw_blocks):
        payload, marker = _split_marker(raw)
        block_id = f"system[{index}]"
        if not (isinstance(payload, Mapping) and payload.get("type") == "text"):
            blocks.append(
                TelosBlock(
                    id=block_id, band=Band.PIN, kind=BlockKind.PASSTHROUGH, payload=payload, extra=marker
                )
            )
            continue
        recognized = _own_output(block_id, payload, marker, own, pool)
        if recognized is not None:  # a request telos emitted, lifted again: keep its stubs and entries
            stub, entry = recognized
            if stub is not None:
                blocks.append(stub)
                own_stubs.add(stub.id)
            if entry is not None and entry.ref_slug is not None:
                pool[entry.ref_slug] = entry
                own_entries.add(entry.ref_slug)
            continue
        for piece in _split_text_block(
            block_id, payload, marker, patterns=patterns, with_fold=False, plain_band=Band.PIN, tag="system"
        ):
            text = piece.payload.get("text") if isinstance(piece.payload, Mapping) else None
            big = threshold is not None and isinstance(text, str) and len(text) > threshold
            if piece.band is Band.PIN and big and set(piece.payload) == {"type", "text"}:
                slug = _free_slug(f"system-doc-{index}", pool)
                pool[slug] = make_entry(slug, str(text), source="lift:system-doc")
                if piece.extra:
                    pool[slug] = TelosBlock(
                        id=pool[slug].id,
                        band=Band.FOLD,
                        kind=BlockKind.TEXT,
                        payload=pool[slug].payload,
                        ref_slug=slug,
                        source_tag=pool[slug].source_tag,
                        extra=piece.extra,
                    )
                blocks.append(
                    TelosBlock(
                        id=f"{block_id}.stub",
                        band=Band.PIN,
                        kind=BlockKind.TEXT,
                        payload={"type": "text", "text": stub_text(slug)},
                        ref_slug=slug,
                        source_tag="lift:ref-stub",
                        extra={"stub_for_chars": len(str(text))},
                    )
                )
            else:
                blocks.append(piece)
    if own_stubs:
        blocks = own_stubs_only(blocks, own_stubs, own_entries)
    return tuple(blocks), pool, form


def _free_slug(slug: str, pool: Mapping[str, TelosBlock]) -> str:
    """``slug``, or ``slug.N`` if an entry lifted from telos' own output already holds it."""
    found, n = slug, 0
    while found in pool:
        n += 1
        found = f"{slug}.{n}"
    return found


def _lift_message(index: int, message: Mapping[str, Any], patterns: SplitPatterns) -> TelosMessage:
    role = str(message.get("role"))
    extra: Mapping[str, Any] = _NO_EXTRA
    if len(message) > 2:
        extra = {key: value for key, value in message.items() if key != "role" and key != "content"}
    content = message.get("content")
    form: ContentForm
    if isinstance(content, str):
        form = "string"
        raw_blocks: Sequence[Any] = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        form = "list"
        raw_blocks = content
    else:
        return TelosMessage(
            role=role,
            blocks=(),
            content_form="absent" if "content" not in message else "null",
            extra={**extra, **({"content": content} if "content" in message else {})},
        )
    has_tool_result = any(type(b) is dict and b.get("type") == "tool_result" for b in raw_blocks)
    blocks: list[TelosBlock] = []
    for position, raw in enumerate(raw_blocks):
        payload, marker = _split_marker(raw)
        block_id = f"messages[{index}][{position}]"
        kind_name = payload.get("type") if isinstance(payload, Mapping) else None
        kind = (
            _KINDS.get(kind_name, BlockKind.PASSTHROUGH)
            if isinstance(kind_name, str)
            else BlockKind.PASSTHROUGH
        )
        if role == "user" and kind is BlockKind.TEXT and isinstance(payload, Mapping):
            plain = Band.FOLD if has_tool_result else Band.PIN
            blocks.extend(
                _split_text_block(
                    block_id, payload, marker, patterns=patterns, with_fold=True, plain_band=plain, tag="user"
                )
            )
            continue
        # In a message with tool results everything is FOLD, so the band sort never moves a block
        # in front of a tool_result (the API requires them first).
        pinned = role == "user" and not has_tool_result and kind in (BlockKind.IMAGE, BlockKind.DOCUMENT)
        band = Band.PIN if pinned else Band.FOLD
        blocks.append(
            TelosBlock(id=block_id, band=band, kind=kind, payload=payload, source_tag=role, extra=marker)
        )
    # A string that was split can no longer be one string.
    if form == "string" and len(blocks) != 1:
        form = "list"
    return TelosMessage(role=role, blocks=tuple(blocks), content_form=form, extra=extra)


def lift_anthropic_messages(
    body: Mapping[str, Any],
    *,
    session_id: str,
    hints: TelosHints | None = None,
    patterns: SplitPatterns = DEFAULT_PATTERNS,
    refpool_threshold: int | None = REFPOOL_THRESHOLD,
    settled: Sequence[TelosMessage] = (),
    own: OwnReferences = _NO_OWN,
) -> TelosIR:
    """Lift a plain-JSON Anthropic Messages body (no SDK sentinels) into a ``TelosIR``.

    ``own``: the references telos emitted in this session (``refpool.emitted_references``); only
    text exactly equal to one of them is lifted as a stub or pool entry, anything else is the
    caller's text (docs/security.md).

    Raises ``TelosUnreadableError`` for a shape it cannot read faithfully (``lift/readable.py``).
    Lossless: every key and block of ``body`` is either modelled or carried in ``params`` /
    ``extra`` / a passthrough block, and the Anthropic engine emits it back. ``settled`` are the
    already-bridged forms of the first messages (a session's history memo); only the rest is lifted.
    """
    check_anthropic(body, len(settled))
    if hints is not None and hints.drop_patterns:
        if hints.drop_scope == "all":
            patterns = patterns.extended(drop=hints.drop_patterns)
        else:
            patterns = patterns.extended(system_drop=hints.drop_patterns)
    tools_raw = body.get("tools")
    tools: list[TelosBlock] = []
    if isinstance(tools_raw, list):
        for index, tool in enumerate(tools_raw):
            payload, marker = _split_marker(tool)
            tools.append(
                TelosBlock(
                    id=f"tools[{index}]",
                    band=Band.PIN,
                    kind=BlockKind.TOOL_DEF,
                    payload=payload,
                    source_tag="tools",
                    extra=marker,
                )
            )
    system, pool, system_form = _lift_system(
        body.get("system"), patterns=patterns, threshold=refpool_threshold, own=own
    )
    messages_raw = body.get("messages")
    raw = messages_raw if isinstance(messages_raw, list) else []
    messages = tuple(settled) + tuple(
        _lift_message(index, raw[index], patterns.for_messages()) for index in range(len(settled), len(raw))
    )
    lifted_keys = ("system", "messages", "tools") if isinstance(tools_raw, list) else ("system", "messages")
    params = {key: value for key, value in body.items() if key not in lifted_keys}
    return TelosIR(
        session_id=session_id,
        api="anthropic",
        tools=tuple(tools),
        system=system,
        messages=messages,
        ref_pool=MappingProxyType(dict(sorted(pool.items()))),
        params=MappingProxyType(params),
        system_form=system_form,
        tools_form="list" if isinstance(tools_raw, list) else "absent",
        settled=len(settled),
    )
