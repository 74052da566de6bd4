"""Learned volatility: find the one span of the system prompt that changes every turn, make it DROP.

The default DROP patterns only catch envelopes someone tagged (``<environment_info>``,
``Current time:``). A harness that writes ``Date: 2026-05-01 10:22`` or ``cwd: /tmp/x`` into its
system prompt without a tag changes the cached prefix on every turn. When two consecutive requests
of a session differ **only** in one run of at most ``MAX_SPAN_LINES`` lines of one system block,
the session learns a DROP pattern for that run, anchored on the stable line(s) right before it (or
after it, for a first line) — never on the changing bytes themselves — and uses it from the request
that taught it onward. That request misses the system cache once (the line leaves the prefix);
every later one hits.

Everything here is pure and deterministic: the pattern depends only on the stored line hashes and
the current request, so every worker of a shared session learns the same pattern.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from telos_wrap.ir.model import Api
from telos_wrap.sessions.records import VolatileSpan
from telos_wrap.sessions.state import HASH_LEN, short_hash

__all__ = [
    "MAX_SPAN_LINES",
    "learn_volatile_span",
    "stable_lines",
    "system_line_prints",
    "system_texts",
]

#: The longest run of changing lines that is learned (a longer change is a real prompt edit).
MAX_SPAN_LINES = 3
#: How many stable lines an anchor may use to be unique in its block.
MAX_ANCHOR_LINES = 4
#: A block needs at least this many stable lines besides the span for learning to make sense.
MIN_STABLE_LINES = 2
#: Session-wide cap on learned spans.
MAX_LEARNED = 16
_NON_TEXT = short_hash(b"\x00non-text")
#: Anchor lengths tried (characters of the neighbouring stable text), shortest first.
_SIZES = (24, 48, 96, 192)


def system_texts(api: Api, body: Mapping[str, Any]) -> list[str | None]:
    """The text of each system block of ``body`` (``None`` for a non-text block)."""
    if api == "anthropic":
        system = body.get("system")
        if isinstance(system, str):
            return [system]
        if not isinstance(system, list):
            return []
        return [_block_text(block) for block in system]
    if api == "openai_responses":
        instructions = body.get("instructions")
        return [instructions] if isinstance(instructions, str) and instructions else []
    texts: list[str | None] = []
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, Mapping) or message.get("role") not in ("system", "developer"):
            break
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(_block_text(part) for part in content)
        else:
            texts.append(None)
    return texts


def _block_text(block: Any) -> str | None:
    if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
        return str(block["text"])
    return None


def _drop_spans(text: str, patterns: Sequence[re.Pattern[str]]) -> list[tuple[int, int]]:
    return [m.span() for pattern in patterns for m in pattern.finditer(text) if m.end() > m.start()]


def stable_lines(text: str, patterns: Sequence[re.Pattern[str]]) -> list[tuple[int, str]]:
    """``(line number, line)`` of every line of ``text`` that no DROP match touches."""
    spans = _drop_spans(text, patterns)
    found: list[tuple[int, str]] = []
    offset = 0
    for number, line in enumerate(text.split("\n")):
        start, end = offset, offset + len(line)
        offset = end + 1
        if not any(s <= end and e > start for s, e in spans):
            found.append((number, line))
    return found


def _line_print(text: str | None, patterns: Sequence[re.Pattern[str]]) -> str:
    if text is None:
        return _NON_TEXT
    return _line_print_of(text, tuple(patterns))


@functools.lru_cache(maxsize=512)
def _line_print_of(text: str, patterns: tuple[re.Pattern[str], ...]) -> str:
    # Memoized by content (the text itself): a system prompt is fingerprinted twice per turn
    # (learning, then storing) and is usually the same string turn after turn.
    return "".join(short_hash(line.encode("utf-8")) for _, line in stable_lines(text, patterns))


def system_line_prints(
    api: Api, body: Mapping[str, Any], patterns: Sequence[re.Pattern[str]]
) -> tuple[str, ...]:
    """Per system block, the concatenated hashes of its stable lines (stored in ``AppPrint``)."""
    return tuple(_line_print(text, patterns) for text in system_texts(api, body))


def learn_volatile_span(
    previous: Sequence[str],
    api: Api,
    body: Mapping[str, Any],
    patterns: Sequence[re.Pattern[str]],
    index: int,
) -> VolatileSpan | None:
    """A new ``VolatileSpan`` if ``body``'s system differs from ``previous`` in exactly one small span."""
    texts = system_texts(api, body)
    if len(texts) != len(previous):
        return None
    changed = [i for i, text in enumerate(texts) if _line_print(text, patterns) != previous[i]]
    if len(changed) != 1:
        return None
    block = changed[0]
    text = texts[block]
    if text is None:
        return None
    stable = stable_lines(text, patterns)
    old = [previous[block][i : i + HASH_LEN] for i in range(0, len(previous[block]), HASH_LEN)]
    if len(old) != len(stable):
        return None  # lines added or removed: a real edit, not a live value
    diff = [k for k, (_, line) in enumerate(stable) if short_hash(line.encode("utf-8")) != old[k]]
    if not diff or len(diff) > MAX_SPAN_LINES or len(stable) - len(diff) < MIN_STABLE_LINES:
        return None
    if diff[-1] - diff[0] + 1 != len(diff):
        return None
    first, last = stable[diff[0]][0], stable[diff[-1]][0]
    if last - first + 1 != len(diff):
        return None
    masked = set(range(text.count("\n") + 1)) - {number for number, _ in stable}
    pattern = _anchored(text, first, last, masked)
    if pattern is None:
        return None
    return VolatileSpan(pattern=pattern, block=block, line=first, lines=len(diff), learned_at=index)


def _anchored(text: str, first: int, last: int, masked: set[int]) -> str | None:
    """A pattern matching exactly lines ``first..last`` of ``text``, anchored on stable neighbours.

    The anchor is the shortest tail of the preceding stable line(s) (or head of the following ones)
    that makes the match unique, so patterns stay short even after very long lines.
    """
    lines = text.split("\n")
    span_start = sum(len(line) + 1 for line in lines[:first])
    span_end = sum(len(line) + 1 for line in lines[: last + 1]) - 1
    body = r"[^\n]*" + r"(?:\n[^\n]*)" * (last - first)
    candidates: list[str] = []
    for k in range(first - 1, max(-1, first - 1 - MAX_ANCHOR_LINES), -1):
        if k in masked:
            break
        anchor = "\n".join(lines[k:first])
        if anchor.strip():
            candidates.extend(
                rf"(?<={re.escape(anchor[-size:])}\n){body}" for size in _SIZES if size < len(anchor)
            )
            whole = re.escape(anchor)
            candidates.append(rf"(?:(?<=\A{whole}\n)|(?<=\n{whole}\n)){body}")
    for k in range(last + 1, min(len(lines), last + 1 + MAX_ANCHOR_LINES)):
        if k in masked:
            break
        anchor = "\n".join(lines[last + 1 : k + 1])
        if anchor.strip():
            candidates.extend(
                rf"^{body}(?=\n{re.escape(anchor[:size])})" for size in _SIZES if size < len(anchor)
            )
            candidates.append(rf"^{body}(?=\n{re.escape(anchor)}(?:\n|\Z))")
    return next((c for c in candidates if _matches_exactly(c, text, span_start, span_end)), None)


def _matches_exactly(pattern: str, text: str, start: int, end: int) -> bool:
    try:
        found = [m.span() for m in re.compile(pattern, re.MULTILINE).finditer(text)]
    except re.error:  # pragma: no cover - escaped literals always compile
        return False
    return found == [(start, end)]
