"""Bridge pass: canonical bytes (R5).

Sorted keys everywhere (but never the names of a schema's ``properties``: the model writes
structured output in that order), schema ``required`` sorted, tools in a stable order, and one shape for
content the APIs define two ways (docs/engines.md, *Wire shapes*): a Chat Completions message whose
content (its DROP envelope aside) is one plain text part is sent as a string, and so is an
Anthropic ``tool_result`` whose content is one plain text block. Both APIs define the string as the
equivalent of that one part; a harness that sends a message as a string on one turn and as one part
on the next (or adds a reminder part to the newest turn for one turn) then sends the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from telos_wrap.ir.canon import (
    MARKER_KEYS,
    canonicalize_params,
    canonicalize_payload,
    canonicalize_tool_def,
    is_plain_text_part,
    tool_sort_key,
)
from telos_wrap.ir.model import Band, BlockKind, TelosBlock, TelosIR, TelosMessage, Transformation

__all__ = ["canonicalize"]


def _canonical_block(block: TelosBlock) -> TelosBlock:
    payload = canonicalize_payload(block.payload)
    return block if payload is block.payload else block.with_payload(payload)


def _one_text_part(message: TelosMessage) -> bool:
    """The message's content, its DROP envelope aside, is one plain text part (no caller marker)."""
    kept = [block for block in message.blocks if block.band is not Band.DROP]
    return (
        len(kept) == 1
        and kept[0].kind is BlockKind.TEXT
        and is_plain_text_part(kept[0].payload)
        and MARKER_KEYS.isdisjoint(kept[0].extra)
    )


def _tool_result_as_string(block: TelosBlock) -> TelosBlock:
    """An Anthropic ``tool_result`` whose content is one plain text block, with that text as content."""
    payload = block.payload
    if block.kind is not BlockKind.TOOL_RESULT or not isinstance(payload, Mapping):
        return block
    content = payload.get("content")
    if isinstance(content, list) and len(content) == 1 and is_plain_text_part(content[0]):
        return block.with_payload({**payload, "content": content[0]["text"]})
    return block


def _message_shape(ir: TelosIR, message: TelosMessage) -> tuple[TelosMessage, str | None]:
    """``message`` in its one canonical shape, and what changed (``None`` if nothing did)."""
    if ir.api == "openai_chat" and message.content_form == "list" and _one_text_part(message):
        return replace(message, content_form="string"), "its one text part sent as a string"
    if ir.api == "anthropic":
        blocks = tuple(_tool_result_as_string(block) for block in message.blocks)
        if any(new is not old for new, old in zip(blocks, message.blocks, strict=True)):
            return message.with_blocks(blocks), "a tool result's one text block sent as its string"
    return message, None


def canonicalize(ir: TelosIR) -> TelosIR:
    """Return ``ir`` with canonical payloads and tools sorted by ``tool_sort_key`` (stable)."""
    tools = tuple(tool.with_payload(canonicalize_tool_def(tool.payload)) for tool in ir.tools)
    records = list(ir.records)
    # The caller's own breakpoints on tools pin their order: sorting could put a 1h marker after
    # a 5m one (which the API rejects) or move what the caller chose to cache.
    marked = any("cache_control" in tool.extra or "prompt_cache_breakpoint" in tool.extra for tool in tools)
    order = (
        list(range(len(tools)))
        if marked
        else sorted(range(len(tools)), key=lambda i: tool_sort_key(tools[i].payload))
    )
    if marked and len(tools) > 1:
        records.append(
            Transformation(
                kind="tools-kept",
                where="tools",
                detail="tool order kept as sent: the caller's own cache markers are on tools",
            )
        )
    if order != list(range(len(tools))):
        tools = tuple(tools[i] for i in order)
        records.append(
            Transformation(
                kind="tools-sorted",
                where="tools",
                detail="tool definitions sorted builtin → mcp → user, then by server and name, "
                "so their order no longer depends on how the harness built the list",
            )
        )
    fresh: list[TelosMessage] = []
    for index in range(ir.settled, len(ir.messages)):
        message, changed = _message_shape(ir, ir.messages[index])
        if changed is not None:
            records.append(
                Transformation(
                    kind="content-shape",
                    where=f"messages[{index}]",
                    detail=f"{changed} (the API's equivalent form), so this message has one shape on "
                    "every turn whichever the caller sends",
                )
            )
        fresh.append(
            TelosMessage(
                role=message.role,
                blocks=tuple(_canonical_block(block) for block in message.blocks),
                content_form=message.content_form,
                extra=canonicalize_payload(dict(message.extra)) if message.extra else message.extra,
            )
        )
    messages = ir.messages[: ir.settled] + tuple(fresh)
    return replace(
        ir,
        tools=tools,
        system=tuple(_canonical_block(block) for block in ir.system),
        messages=messages,
        params=canonicalize_params(ir.params),
        records=tuple(records),
    )
