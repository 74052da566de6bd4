"""Band-order checks: the one hard TELOS constraint, ``pin* → fold* → drop*`` (I1).

Tools and system blocks are physically ordered by band. Inside a message, only DROP is placed: it
goes last (``drop_last``), and PIN and FOLD blocks keep the order the caller wrote them in — a user
turn ``[document, search result, question]`` is read in that order (material first, question
last); sorting it would buy the cache nothing, since the whole message is cached or not as one.
Across the whole prompt, DROP blocks may only stand at the very end: once the first DROP block
appears, nothing cacheable follows it, so volatile bytes can never shift the cached prefix (I3).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from telos_wrap.errors import TelosInvariantError
from telos_wrap.ir.model import Band, TelosBlock, TelosIR, TelosMessage

__all__ = [
    "TURN_ROLES",
    "assert_band_order",
    "assert_drop_last",
    "assert_ir_invariants",
    "drop_last",
    "enforce_band_order",
    "iter_segments",
    "latest_turn_index",
    "marker_carrier",
]

#: Roles whose message opens or continues a turn from the caller's side: a user question, or a
#: tool result (OpenAI ``tool``/``function`` messages; Anthropic tool results are ``user`` messages).
TURN_ROLES = frozenset({"user", "tool", "function"})


def marker_carrier(blocks: Sequence[TelosBlock]) -> int:
    """Which of the pieces split from one block carries the caller's cache marker.

    The last non-DROP piece (the marker keeps caching what it cached), or the last piece when the
    whole block was an envelope: a caller's marker is never dropped.
    """
    for index in range(len(blocks) - 1, -1, -1):
        if blocks[index].band is not Band.DROP:
            return index
    return len(blocks) - 1


def latest_turn_index(messages: Sequence[TelosMessage]) -> int | None:
    """Index of the latest caller-side message (the current turn), or ``None``.

    Everything before it is history; an assistant message after it (a prefill) is the tail.
    """
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role in TURN_ROLES:
            return index
    return None


def enforce_band_order(blocks: Iterable[TelosBlock]) -> tuple[TelosBlock, ...]:
    """Stable-sort blocks into ``pin* → fold* → drop*``, keeping insertion order within a band."""
    ordered = tuple(blocks)
    # Already ordered is by far the common case: check in O(n) before paying for a sort.
    previous = Band.PIN
    for block in ordered:
        if block.band < previous:
            return tuple(sorted(ordered, key=lambda item: item.band))
        previous = block.band
    return ordered


def drop_last(blocks: Iterable[TelosBlock]) -> tuple[TelosBlock, ...]:
    """``blocks`` with the DROP ones moved last (stably); PIN and FOLD keep the caller's order."""
    ordered = tuple(blocks)
    seen_drop = False
    for block in ordered:
        if block.band is Band.DROP:
            seen_drop = True
        elif seen_drop:
            return tuple(b for b in ordered if b.band is not Band.DROP) + tuple(
                b for b in ordered if b.band is Band.DROP
            )
    return ordered


def assert_drop_last(blocks: Sequence[TelosBlock], where: str) -> None:
    """Raise ``TelosInvariantError`` at the first non-DROP block after a DROP block of a message."""
    seen: int | None = None
    for index, block in enumerate(blocks):
        if block.band is Band.DROP:
            seen = index if seen is None else seen
        elif seen is not None:
            raise TelosInvariantError(
                f"band order violated in {where} at index {index}: block {block.id!r} is "
                f"{block.band.name} after the DROP block at index {seen} (DROP goes last in a message)",
                segment=where,
                index=index,
            )


def assert_band_order(blocks: Sequence[TelosBlock], where: str) -> None:
    """Raise ``TelosInvariantError`` at the first block whose band ranks below its predecessor's.

    A single O(n) pass. The message names the segment (``where``), the index, and both bands.
    """
    previous = Band.PIN
    for index, block in enumerate(blocks):
        if block.band < previous:
            raise TelosInvariantError(
                f"band order violated in {where} at index {index}: block {block.id!r} is "
                f"{block.band.name} after a {previous.name} block (required: pin* -> fold* -> drop*)",
                segment=where,
                index=index,
            )
        previous = block.band


def iter_segments(ir: TelosIR, start: int = 0) -> Iterable[tuple[str, Sequence[TelosBlock]]]:
    """Yield ``(name, blocks)`` for every segment of the prompt (messages from ``start``), in render order."""
    yield "tools", ir.tools
    yield "system", ir.system
    for index in range(start, len(ir.messages)):
        yield f"messages[{index}]", ir.messages[index].blocks


def assert_ir_invariants(ir: TelosIR) -> None:
    """Validate a whole IR: tools all PIN, every segment band-ordered, DROP only at the prompt's tail.

    The tail is the latest turn's end; an assistant prefill after it may follow its DROP.
    """
    for index, tool in enumerate(ir.tools):
        if tool.band is not Band.PIN:
            raise TelosInvariantError(
                f"tools[{index}] ({tool.id!r}) is {tool.band.name}; every tool definition must be PIN",
                segment="tools",
                index=index,
            )
    # Messages after the latest user turn (an assistant prefill) are the request's own tail: they
    # may follow that turn's DROP envelope without ever being part of a cached prefix.
    latest = latest_turn_index(ir.messages)
    tail_start = len(ir.messages) if latest is None else latest + 1
    seen_drop: str | None = None
    # Settled history was checked on the turn it settled (all FOLD, no DROP): skip it.
    for segment_index, (where, blocks) in enumerate(iter_segments(ir, ir.settled)):
        if segment_index < 2:
            assert_band_order(blocks, where)
        else:
            assert_drop_last(blocks, where)
        in_tail = segment_index - 2 + ir.settled >= tail_start
        for index, block in enumerate(blocks):
            if block.band is Band.DROP:
                seen_drop = seen_drop or f"{where}[{index}]"
            elif seen_drop is not None and not in_tail:
                raise TelosInvariantError(
                    f"band order violated across the prompt: {where} index {index} ({block.id!r}) is "
                    f"{block.band.name} after the DROP block at {seen_drop}; DROP must be the prompt's tail",
                    segment=where,
                    index=index,
                )
