"""Small builders for hand-computed prompts (4 UTF-8 bytes = 1 emulated token)."""

from __future__ import annotations

from typing import Any


def text(tokens: int, fill: str = "x") -> str:
    """A string of exactly ``tokens`` emulated tokens made of one repeated ASCII character."""
    return fill * (4 * tokens)


def block(tokens: int, fill: str = "x", ttl: str | None = None, mark: bool = False) -> dict[str, Any]:
    """An Anthropic text block; ``mark``/``ttl`` add ``cache_control``."""
    out: dict[str, Any] = {"type": "text", "text": text(tokens, fill)}
    if mark or ttl:
        out["cache_control"] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    return out


def part(tokens: int, fill: str = "x", breakpoint: str | None = None) -> dict[str, Any]:
    """An OpenAI text content part; ``breakpoint`` ("30m"/"12h"/"") adds ``prompt_cache_breakpoint``."""
    out: dict[str, Any] = {"type": "text", "text": text(tokens, fill)}
    if breakpoint is not None:
        out["prompt_cache_breakpoint"] = {"mode": "explicit", **({"ttl": breakpoint} if breakpoint else {})}
    return out
