"""Token-granular prefix store shared by the automatic-caching engines.

Used by the flavours that match "the longest common token prefix" (OpenAI before GPT-5.6,
DeepSeek, vLLM, SGLang).  It is a radix tree over positions: a node is one position of a
stored prompt, identified by its chained prefix hash, so walking a new prompt's hashes finds
the fully shared positions; inside the first differing position the common prefix of the
rendered bytes gives the extra whole tokens (see :func:`render.partial_match_tokens`).

Not thread-safe on its own: each flavour guards its trees with its own lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .render import Position, partial_match_tokens


@dataclass
class _Node:
    header: bytes
    data: bytes
    expires_at: float | None  # None = never expires


@dataclass(frozen=True)
class PrefixMatch:
    """Longest common prefix of a prompt with the stored prompts.

    ``full_positions`` positions matched completely, then ``partial_tokens`` whole tokens of
    the next position; ``tokens`` is the total.
    """

    full_positions: int
    partial_tokens: int
    tokens: int


@dataclass
class PrefixTree:
    """Stored prompts of one cache namespace (one model + salt/key combination)."""

    _nodes: dict[bytes, _Node] = field(default_factory=dict)
    _children: dict[bytes, list[bytes]] = field(default_factory=dict)

    def _alive(self, node: _Node | None, now: float) -> bool:
        return node is not None and (node.expires_at is None or now < node.expires_at)

    def match(self, positions: Sequence[Position], now: float) -> PrefixMatch:
        """Longest prefix of ``positions`` (in tokens) shared with any unexpired stored prompt."""
        full = 0
        for pos in positions:
            if not self._alive(self._nodes.get(pos.hash), now):
                break
            full += 1
        tokens = positions[full - 1].cum_tokens if full else 0
        partial = 0
        if full < len(positions):
            pos = positions[full]
            for child in self._children.get(pos.parent_hash, ()):
                node = self._nodes[child]
                if self._alive(node, now):
                    partial = max(partial, partial_match_tokens(pos, node.header, node.data))
        return PrefixMatch(full, partial, tokens + partial)

    def insert(self, positions: Sequence[Position], now: float, ttl: float | None = None) -> None:
        """Store (or refresh) every position of a prompt; ``ttl`` seconds from ``now``, None = forever."""
        expires = None if ttl is None else now + ttl
        for pos in positions:
            node = self._nodes.get(pos.hash)
            if node is None:
                self._nodes[pos.hash] = _Node(pos.header, pos.data, expires)
                self._children.setdefault(pos.parent_hash, []).append(pos.hash)
            elif node.expires_at is not None:
                node.expires_at = None if expires is None else max(node.expires_at, expires)
