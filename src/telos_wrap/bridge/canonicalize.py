"""Bridge pass: canonical bytes (R5).

Sorted keys everywhere, schema ``required`` sorted, tools in a stable order.
"""

from __future__ import annotations

from dataclasses import replace

from telos_wrap.ir.canon import canonicalize_payload, canonicalize_tool_def, tool_sort_key
from telos_wrap.ir.model import TelosBlock, TelosIR, TelosMessage, Transformation

__all__ = ["canonicalize"]


def _canonical_block(block: TelosBlock) -> TelosBlock:
    payload = canonicalize_payload(block.payload)
    return block if payload is block.payload else block.with_payload(payload)


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
    messages = ir.messages[: ir.settled] + tuple(
        TelosMessage(
            role=message.role,
            blocks=tuple(_canonical_block(block) for block in message.blocks),
            content_form=message.content_form,
            extra=canonicalize_payload(dict(message.extra)) if message.extra else message.extra,
        )
        for message in ir.messages[ir.settled :]
    )
    return replace(
        ir,
        tools=tools,
        system=tuple(_canonical_block(block) for block in ir.system),
        messages=messages,
        params=canonicalize_payload(dict(ir.params)),
        records=tuple(records),
    )
