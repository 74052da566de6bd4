"""Deterministic token estimate used for every count the emulator reports.

No vendor tokenizer is available offline, so the emulator uses one fixed rule:
**one token per 4 UTF-8 bytes, rounded up, per piece** (a piece is one rendered
block: a text block's text, or the canonical JSON of a non-text block).  An
empty piece costs 0 tokens.  Token ``i`` of a piece is bytes ``[4*i, 4*i+4)``,
which is what partial (token-granular) prefix matching relies on.

Examples: ``"abcd"`` -> 1, ``"abcde"`` -> 2, ``"a" * 4096`` -> 1024.
"""

from __future__ import annotations

BYTES_PER_TOKEN = 4
"""Bytes of UTF-8 that make up one emulated token."""


def tokens_for_bytes(n_bytes: int) -> int:
    """Tokens of a piece that is ``n_bytes`` long (rounded up)."""
    return (n_bytes + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN


def whole_tokens(n_bytes: int) -> int:
    """Tokens fully contained in the first ``n_bytes`` bytes of a piece (rounded down)."""
    return n_bytes // BYTES_PER_TOKEN


def estimate_tokens(text: str | bytes) -> int:
    """Token estimate of one piece; O(len(text))."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return tokens_for_bytes(len(raw))


def text_for_tokens(n_tokens: int) -> str:
    """An ASCII string that is exactly ``n_tokens`` emulated tokens long (handy in tests)."""
    return "x" * (n_tokens * BYTES_PER_TOKEN)
