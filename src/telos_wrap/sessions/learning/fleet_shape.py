"""What an application's system prompts share, and what per-conversation text early in them costs.

Many applications write who is being helped early in the system prompt ("You are helping Ana Lopez
(account 1000)."), before instructions every conversation shares. A prefix cache then reads the
shared text only within a conversation: every conversation writes it again. telos does not move
stable caller text on its own (docs/sessions.md, "Learned volatility"), so it says so instead, in
``explain`` (issue 34).

To tell, the fleet keeps per application (``fleet.application_key``, in the tenant's namespace) the
*shape* of one conversation's system prompt: per line a keyed 6-byte digest of the line with its
digit-bearing tokens masked (``prints``) — never its text; the key is the namespace, so digests of
one tenant say nothing in another. A later conversation compares its own prompt with it
(``early_text``): the first line found nowhere in the other prompt is per-conversation text, and the
lines after it that the other prompt also holds are what every conversation writes instead of
reading. Reported only when that is at least ``MIN_SHARED_TOKENS`` (the smallest prefix a vendor
caches; less would not be read anyway). Pure; the store I/O is ``fleet_io.py``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_PRINTS", "MIN_SHARED_TOKENS", "EarlyText", "decode_prints", "early_text", "prints"]

#: Lines of one prompt kept (a larger prompt keeps its first ones).
MAX_PRINTS = 2_000
#: The least shared text worth a note (tokens, at the emulator's 4 bytes per token).
MIN_SHARED_TOKENS = 1_024
#: A whitespace-delimited token holding a digit. The look-behind lets a match start only where a
#: token starts, so a long run without digits is read a bounded number of times, not once from each
#: of its positions (``\S*\d\S*`` alone is quadratic there: tests/security/test_linear_time.py).
_VALUE_TOKEN = re.compile(r"(?<!\S)\S*\d\S*")
_DIGIT = re.compile(r"\d")
_PRINT = re.compile(r"^[0-9a-f]{12}$")


def digit_free(text: str) -> bool:
    """Whether ``text`` holds no decimal digit (what ``\\d`` matches). ASCII text is checked with ten
    substring scans (C ``memchr``-speed: ~0.5 ms for a 1 MB prompt, against ~18 ms for the regex,
    timeit), other text with the regex."""
    if text.isascii():
        return not any(digit in text for digit in "0123456789")
    return _DIGIT.search(text) is None


def _lines(texts: Sequence[str]) -> list[tuple[int, int, str]]:
    found = []
    for block, text in enumerate(texts):
        # Most system texts' long lines hold no digit: one C-level scan then skips the masking.
        masked = text if digit_free(text) else _VALUE_TOKEN.sub("#", text)
        for number, line in enumerate(masked.split("\n")):
            found.append((block, number, line))
    return found[:MAX_PRINTS]


def prints(space: str, texts: Sequence[str]) -> tuple[str, ...]:
    """The shape of a system prompt (``texts``, one per block): a keyed digest per line (module docstring)."""
    return _prints_of(space, _lines(texts))


def _prints_of(space: str, lines: Sequence[tuple[int, int, str]]) -> tuple[str, ...]:
    key = hashlib.blake2b(f"shape\x00{space}".encode("utf-8", "surrogatepass"), digest_size=32).digest()
    return tuple(
        hashlib.blake2b(
            f"{block}\x00{line}".encode("utf-8", "surrogatepass"), key=key, digest_size=6
        ).hexdigest()
        for block, _, line in lines
    )


def decode_prints(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The well-formed prints of a stored entry (anything else: none; never raises)."""
    found = data.get("prints") if isinstance(data, Mapping) else None
    if not isinstance(found, list) or len(found) > MAX_PRINTS:
        return ()
    if not all(isinstance(item, str) and _PRINT.match(item) for item in found):
        return ()
    return tuple(found)


@dataclass(frozen=True, slots=True)
class EarlyText:
    """Per-conversation text at ``block``/``line`` of this prompt, followed by ``shared_tokens`` of
    system text the application's other conversations also send."""

    block: int
    line: int
    shared_tokens: int

    def note(self) -> str:
        """The advice explain() shows for the request (``RequestRecord.application``, through ``fleet_io``):
        the block, the line and a token count, no text of the caller's. Advice only: telos moves no stable
        text of the caller's."""
        return (
            f"system block {self.block} line {self.line} is text of this conversation (it is in no other "
            f"conversation of this application, e.g. a user's name) and ~{self.shared_tokens:,} tokens of "
            "system text after it are the same in every conversation: each conversation writes them to "
            "the cache again instead of reading what the others wrote. Putting per-conversation text "
            "after the shared text (the end of the system prompt, or the first user message) lets every "
            "conversation read it; telos does not move stable caller text on its own"
        )


def early_text(space: str, texts: Sequence[str], theirs: Sequence[str]) -> EarlyText | None:
    """What per-conversation text early in ``texts`` costs, against another conversation's ``theirs``
    prints (``None``: nothing to say)."""
    if not theirs:
        return None
    known = set(theirs)
    lines = _lines(texts)
    mine = _prints_of(space, lines)  # the lines masked once, not again inside prints()
    first = next((n for n, digest in enumerate(mine) if digest not in known and lines[n][2].strip()), None)
    if first is None:
        return None
    shared = sum(len(lines[n][2]) + 1 for n in range(first + 1, len(mine)) if mine[n] in known)
    tokens = shared // 4
    if tokens < MIN_SHARED_TOKENS:
        return None
    return EarlyText(lines[first][0], lines[first][1], tokens)
