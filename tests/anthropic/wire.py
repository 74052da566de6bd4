"""Reading emitted Anthropic bodies the way the prefix cache does (test helpers).

The cache compares rendered content, not JSON bytes: a ``cache_control`` marker is not content
(removing one changes nothing, docs/vendor-facts.md §1.2) and a string ``content`` renders as one
text block. ``flatten`` returns the body as its sequence of positions in render order
(tools → system → messages), each a canonical JSON string of the block without its marker.
"""

from __future__ import annotations

from typing import Any

from telos_wrap.ir.canon import canonical_json
from telos_wrap.ir.model import Band, TelosIR


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _strip(block: Any) -> str:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return canonical_json(block)


def flatten(body: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """``[(kind, canonical block, has_marker)]`` in render order; kind is tool/system/<role>/<role>:start."""
    items: list[tuple[str, str, bool]] = []
    for tool in body.get("tools") or []:
        items.append(("tool", _strip(tool), "cache_control" in tool))
    for block in _blocks(body.get("system")):
        items.append(("system", _strip(block), isinstance(block, dict) and "cache_control" in block))
    for message in body.get("messages", []):
        items.append((f"{message['role']}:start", "", False))
        for block in _blocks(message.get("content")):
            items.append(
                (message["role"], _strip(block), isinstance(block, dict) and "cache_control" in block)
            )
    return items


def first_drop_index(body: dict[str, Any], ir: TelosIR) -> int:
    """Index in ``flatten(body)`` of the first DROP block (``len`` when there is none)."""
    items = flatten(body)
    bands = [block.band for block in ir.tools] + [block.band for block in ir.system]
    for message in ir.messages:
        bands.append(Band.PIN)  # the message boundary itself
        bands.extend(block.band for block in message.blocks)
    assert len(bands) == len(items), "emitted body and IR disagree on block count"
    return next((i for i, band in enumerate(bands) if band is Band.DROP), len(items))


def lookback_positions(items: list[tuple[str, str, bool]]) -> list[int]:
    """Position of each item as the API's lookback counts (a tool_use / tool_result run is one)."""
    positions: list[int] = []
    position = -1
    previous = None
    for kind, block, _ in items:
        if kind.endswith(":start"):
            positions.append(position)
            previous = None
            continue
        block_type = block.split('"type":"', 1)[-1].split('"', 1)[0] if '"type":"' in block else None
        run = block_type in ("tool_use", "tool_result") and block_type == previous
        if not run:
            position += 1
        positions.append(position)
        previous = block_type
    return positions


def marker_count(body: dict[str, Any]) -> int:
    return sum(1 for _, _, marked in flatten(body) if marked) + (1 if body.get("cache_control") else 0)
