"""Fingerprints of a request: ``PromptPrint`` (what the cache saw) and ``AppPrint`` (what the app sent).

Both are computed from the IR, whose blocks map one-to-one onto the wire positions an engine
renders (``tools → system → messages``), and whose payloads never carry cache markers (a caller's
``cache_control`` lives in ``extra``) — so moving a breakpoint never looks like a change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from telos_wrap.engines.base import Breakpoint
from telos_wrap.history import HistoryMemo
from telos_wrap.ir.canon import canonical_bytes
from telos_wrap.ir.model import Band, BlockKind, TelosIR, TelosMessage
from telos_wrap.pipeline import Prepared
from telos_wrap.sessions.state import PromptPrint, short_hash

__all__ = ["CACHE_PARAMS", "TTL_SECONDS", "message_hash", "message_kind", "prompt_print"]

#: Request parameters that invalidate the messages cache when they change (vendor-cache-rules §1.6).
CACHE_PARAMS = ("tool_choice", "thinking", "speed")
#: Cache TTL names in seconds (a breakpoint without a TTL gets the vendor default, 5 minutes).
TTL_SECONDS: Mapping[str, int] = {"5m": 300, "1h": 3600, "30m": 1800, "12h": 43200}
_SEGMENT_RANK = {"tools": 0, "system": 1, "messages": 2}


def message_hash(message: TelosMessage) -> str:
    """Hash of one message as lifted (role, blocks, other keys)."""
    return short_hash(
        canonical_bytes(
            {
                "role": message.role,
                "blocks": [block.payload for block in message.blocks],
                "extra": dict(message.extra),
            }
        )
    )


def message_kind(message: TelosMessage) -> str:
    """``u`` user text, ``t`` user with tool results, ``a`` assistant, ``A`` assistant using tools, ``o``."""
    kinds = {block.kind for block in message.blocks}
    if message.role == "user":
        return "t" if BlockKind.TOOL_RESULT in kinds else "u"
    if message.role == "assistant":
        return "A" if BlockKind.TOOL_USE in kinds or "tool_calls" in message.extra else "a"
    return "o"


def _position(header: Any, payload: Any) -> tuple[str, int]:
    data = canonical_bytes([header, payload])
    return short_hash(data), len(data)


def _message_positions(message: TelosMessage) -> tuple[tuple[str, int, Band], ...]:
    header = [message.role, dict(message.extra), message.content_form in ("absent", "null")]
    if not message.blocks:
        return ((*_position(header, None), Band.FOLD),)
    return tuple((*_position(header, block.payload), block.band) for block in message.blocks)


def prompt_print(prepared: Prepared, engine: str, now: float, memo: HistoryMemo | None = None) -> PromptPrint:
    """The ``PromptPrint`` of a prepared request (settled history's positions come from ``memo``)."""
    ir: TelosIR = prepared.ir
    hashes: list[str] = []
    sizes: list[int] = []
    bands: list[Band] = []

    def add(header: Any, payload: Any, band: Band) -> None:
        digest, size = _position(header, payload)
        hashes.append(digest)
        sizes.append(size)
        bands.append(band)

    for tool in ir.tools:
        add("tool", tool.payload, tool.band)
    for block in ir.system:
        add("system", block.payload, block.band)
    known = memo.recall("positions", ir.settled) if memo is not None else []
    per_message = known + [_message_positions(message) for message in ir.messages[len(known) :]]
    if memo is not None:
        memo.remember("positions", per_message)
    msg_blocks: list[int] = []
    for positions in per_message:
        for digest, size, band in positions:
            hashes.append(digest)
            sizes.append(size)
            bands.append(band)
        msg_blocks.append(len(positions))

    def flat(bp: Breakpoint) -> int:
        if bp.segment == "tools":
            return bp.block
        if bp.segment == "system":
            return len(ir.tools) + bp.block
        assert bp.message is not None
        return len(ir.tools) + len(ir.system) + sum(msg_blocks[: bp.message]) + bp.block

    breakpoints = tuple(
        sorted((flat(bp), TTL_SECONDS.get(bp.ttl or "5m", 300)) for bp in prepared.plan.breakpoints)
    )
    if breakpoints:
        cached_upto = breakpoints[-1][0]
    else:
        first_drop = next((i for i, band in enumerate(bands) if band is Band.DROP), len(bands))
        cached_upto = first_drop - 1
    params = {key: ir.params.get(key) for key in CACHE_PARAMS}
    return PromptPrint(
        engine=engine,
        model=str(ir.params.get("model", "")),
        params=short_hash(canonical_bytes(params)),
        n_tools=len(ir.tools),
        n_system=len(ir.system),
        msg_blocks=tuple(msg_blocks),
        hashes="".join(hashes),
        sizes=tuple(sizes),
        cached_upto=cached_upto,
        breakpoints=breakpoints,
        at=now,
    )
