"""DeepSeek context caching on disk (docs/vendor-facts.md §3).

A hit needs a persisted *cache prefix unit* that the request fully matches; the hit is the
longest such unit.  Units are persisted (§3, kv_cache page):

1. at request boundaries: the end of the user input and the end of the model output;
2. at a common prefix the system detects across requests;
3. at fixed token intervals inside long inputs/outputs — the interval is not published, so
   the emulator does not model this rule.

Doc example: ``A+B`` then ``A+C`` misses but persists ``A``; then ``A+D`` hits ``A``.
Usage (§3): ``prompt_cache_hit_tokens`` + ``prompt_cache_miss_tokens`` = ``prompt_tokens``;
``prompt_tokens_details.cached_tokens`` repeats the hit count.  No TTL ("hours to days").
``user_id`` isolates caches ("can be used for KVCache isolation", §3 [2nd]).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .chat_flavour import ChatFlavour
from .prefix_tree import PrefixMatch, PrefixTree
from .render import Position, RenderedPrompt, render_chat
from .tokens import BYTES_PER_TOKEN


def _partial_digest(pos: Position, tokens: int) -> bytes:
    h = hashlib.blake2b(pos.parent_hash, digest_size=16)
    h.update(pos.header)
    h.update(pos.data[: tokens * BYTES_PER_TOKEN])
    return h.digest()


@dataclass
class _Units:
    """Persisted units of one namespace: whole-position ends, and ends inside a position."""

    full: set[bytes] = field(default_factory=set)
    partial: dict[bytes, set[tuple[int, bytes]]] = field(default_factory=dict)

    def add(self, positions: Sequence[Position], end: PrefixMatch) -> None:
        """Persist the unit ending ``end`` tokens into ``positions``."""
        if end.partial_tokens and end.full_positions < len(positions):
            pos = positions[end.full_positions]
            unit = (end.partial_tokens, _partial_digest(pos, end.partial_tokens))
            self.partial.setdefault(pos.parent_hash, set()).add(unit)
        elif end.full_positions:
            self.full.add(positions[end.full_positions - 1].hash)

    def longest(self, positions: Sequence[Position]) -> int:
        """Tokens of the longest persisted unit that is a prefix of ``positions``."""
        best = 0
        for pos in positions:
            for tokens, digest in self.partial.get(pos.parent_hash, ()):
                if tokens < pos.tokens and _partial_digest(pos, tokens) == digest:
                    best = max(best, pos.start_tokens + tokens)
            if pos.hash in self.full:
                best = pos.cum_tokens
        return best


class DeepSeekFlavour(ChatFlavour):
    """``api.deepseek.com`` chat completions."""

    name = "deepseek"

    def __init__(self) -> None:
        super().__init__()
        self._trees: dict[Hashable, PrefixTree] = {}
        self._units: dict[Hashable, _Units] = {}

    def reset(self) -> None:
        with self._lock:
            self._trees.clear()
            self._units.clear()

    def prompt_usage(
        self, body: Mapping[str, Any], prompt: RenderedPrompt, reply: str, now: float
    ) -> tuple[int, dict[str, Any]]:
        ns = (body.get("model"), body.get("user_id"))
        positions = prompt.positions
        with_output = render_chat(body, [{"role": "assistant", "content": reply}], mode=self.mode).positions
        with self._lock:
            tree = self._trees.setdefault(ns, PrefixTree())
            units = self._units.setdefault(ns, _Units())
            hit = units.longest(positions)  # only units persisted by earlier requests count
            shared = tree.match(positions, now)
            if shared.tokens > hit:  # rule 2: a common prefix across requests becomes a unit
                units.add(positions, shared)
            units.add(positions, PrefixMatch(len(positions), 0, prompt.total_tokens))  # end of input
            units.add(with_output, PrefixMatch(len(with_output), 0, 0))  # end of output
            tree.insert(with_output, now)
        total = prompt.total_tokens
        return total, {
            "prompt_tokens_details": {"cached_tokens": hit},
            "prompt_cache_hit_tokens": hit,
            "prompt_cache_miss_tokens": total - hit,
        }
