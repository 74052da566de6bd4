"""Fingerprints of a request: ``PromptPrint`` (what the cache saw) and ``AppPrint`` (what the app sent).

Both are computed from the IR, whose blocks map one-to-one onto the wire positions an engine
renders (``tools → system → messages``), and whose payloads never carry cache markers (a caller's
``cache_control`` lives in ``extra``) — so moving a breakpoint never looks like a change.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from telos_wrap.engines.base import Breakpoint
from telos_wrap.history import HistoryMemo
from telos_wrap.ir.canon import canonical_bytes
from telos_wrap.ir.model import Band, BlockKind, TelosIR, TelosMessage
from telos_wrap.pipeline import Prepared
from telos_wrap.sessions.durable.state import PromptPrint, ints, short_hash

__all__ = ["CACHE_PARAMS", "TTL_SECONDS", "kept_hash", "message_hash", "message_kind", "prompt_print"]

#: Request parameters that invalidate the messages cache when they change (docs/vendor-facts.md §1.6).
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


def kept_hash(message: TelosMessage) -> str:
    """``message_hash`` of ``message`` without its DROP-band blocks (a harness's envelope such as a
    ``<system-reminder>`` part, which it adds to the newest turn and takes away on the next): the same
    as ``message_hash`` for a message without any."""
    return short_hash(
        canonical_bytes(
            {
                "role": message.role,
                "blocks": [block.payload for block in message.blocks if block.band is not Band.DROP],
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


class _Positions(NamedTuple):
    """Messages ``0..count-1`` as the cache sees them, folded (a memo aggregate, see ``prompt_print``).

    Attributes:
        hashes: every position's hash, concatenated.
        sizes: every position's canonical byte size.
        msg_blocks: positions per message.
        first_drop: ``(message, block)`` of the first DROP block, or ``None``.
        total: the sum of ``sizes`` (kept with them: a turn adds only its new messages' sizes).
    """

    hashes: str
    sizes: array[int]
    msg_blocks: array[int]
    first_drop: tuple[int, int] | None
    total: int


_NO_POSITIONS = _Positions("", ints(), ints(), None, 0)


class _NewMessages:
    """The positions of messages ``start, start+1, ...`` appended to ``done``; folded on demand."""

    def __init__(self, done: _Positions, messages: Sequence[TelosMessage], start: int) -> None:
        self.done = done
        self.hashes: list[str] = []
        self.sizes: list[int] = []
        self.msg_blocks: list[int] = []
        self.first_drop: list[tuple[int, int] | None] = []
        first_drop = done.first_drop
        for offset, message in enumerate(messages):
            header = [message.role, dict(message.extra), message.content_form in ("absent", "null")]
            for b_index, block in enumerate(message.blocks):
                digest, size = _position(header, block.payload)
                self.hashes.append(digest)
                self.sizes.append(size)
                if first_drop is None and block.band is Band.DROP:
                    first_drop = (start + offset, b_index)
            if not message.blocks:
                digest, size = _position(header, None)
                self.hashes.append(digest)
                self.sizes.append(size)
            self.msg_blocks.append(max(len(message.blocks), 1))
            self.first_drop.append(first_drop)

    def fold(self, messages: int) -> _Positions:
        """``done`` extended by the first ``messages`` new messages."""
        if messages == 0:
            return self.done
        positions = sum(self.msg_blocks[:messages])
        return _Positions(
            self.done.hashes + "".join(self.hashes[:positions]),
            self.done.sizes + ints(self.sizes[:positions]),
            self.done.msg_blocks + ints(self.msg_blocks[:messages]),
            self.first_drop[messages - 1],
            self.done.total + sum(self.sizes[:positions]),
        )


def prompt_print(prepared: Prepared, engine: str, now: float, memo: HistoryMemo | None = None) -> PromptPrint:
    """The ``PromptPrint`` of a prepared request.

    With the session's ``memo``, the settled history's part comes from an aggregate the previous
    turn stored (a joined string and two integer tuples), so a turn hashes only its new messages and
    never walks the settled ones.
    """
    ir: TelosIR = prepared.ir
    head = [_position("tool", tool.payload) for tool in ir.tools]
    head += [_position("system", block.payload) for block in ir.system]
    head_bands = [tool.band for tool in ir.tools] + [block.band for block in ir.system]
    cached = memo.aggregate("positions", ir.messages) if memo is not None else None
    start, done = cached if cached is not None else (0, _NO_POSITIONS)
    new = _NewMessages(done, ir.messages[start:], start)
    whole = new.fold(len(ir.messages) - start)
    if memo is not None:
        count = memo.shared_prefix(ir.messages, ir.settled)
        if count > start:
            memo.keep_aggregate("positions", ir.messages, count, new.fold(count - start))
    msg_blocks = whole.msg_blocks
    n_head = len(head)

    def flat(bp: Breakpoint) -> int:
        if bp.segment == "tools":
            return bp.block
        if bp.segment == "system":
            return len(ir.tools) + bp.block
        assert bp.message is not None
        return n_head + sum(msg_blocks[: bp.message]) + bp.block

    breakpoints = tuple(
        sorted((flat(bp), TTL_SECONDS.get(bp.ttl or "5m", 300)) for bp in prepared.plan.breakpoints)
    )
    if breakpoints:
        cached_upto = breakpoints[-1][0]
    elif Band.DROP in head_bands:
        cached_upto = head_bands.index(Band.DROP) - 1
    elif whole.first_drop is not None:
        m_index, block = whole.first_drop
        cached_upto = n_head + sum(msg_blocks[:m_index]) + block - 1
    else:
        cached_upto = n_head + sum(msg_blocks) - 1
    params = {key: ir.params.get(key) for key in CACHE_PARAMS}
    head_sizes = [size for _, size in head]
    print_ = PromptPrint(
        engine=engine,
        model=str(ir.params.get("model", "")),
        params=short_hash(canonical_bytes(params)),
        n_tools=len(ir.tools),
        n_system=len(ir.system),
        msg_blocks=msg_blocks,
        hashes="".join(digest for digest, _ in head) + whole.hashes,
        sizes=ints(head_sizes) + whole.sizes,
        cached_upto=cached_upto,
        breakpoints=breakpoints,
        at=now,
    )
    return print_.with_total(sum(head_sizes) + whole.total)
