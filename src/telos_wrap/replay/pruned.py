"""Envelopes a sender pruned from past turns, read off a sequence of recorded requests.

telos moves a turn's volatile lines (a clock it learned in the system prompt) to the end of that
turn and prunes them once the turn is past (README, "What telos_wrap changes"). Requests recorded
*after* telos — a cassette recorded under the pytest marker — therefore show an earlier turn losing
its trailing text block(s) from one request to the next. Replayed as they are, that reads as
history rewritten, and an opening message that carried such a line looks like another conversation.

:func:`pruned_patterns` finds those trailing blocks — text blocks at the end of a user message that
the next request of the same recording sends without them, everything before them unchanged — and
returns one DROP pattern per line they hold (the line with every digit run generalized), so the
replay treats them as the per-turn envelopes they were.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from telos_wrap.replay.traces import TraceRequest

__all__ = ["pruned_patterns"]

_DIGITS = re.compile(r"\d+")


def _texts(content: Any) -> list[str] | None:
    """A message's text blocks, in order; ``None`` if it holds anything but text."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return None
    texts = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        else:
            return None
    return texts


def _pattern(line: str) -> str:
    """``line`` as an anchored regex, each digit run generalized (a clock, a counter)."""
    parts = _DIGITS.split(line)
    return "^" + r"\d+".join(re.escape(part) for part in parts) + "$"


def pruned_patterns(requests: Sequence[TraceRequest]) -> tuple[str, ...]:
    """DROP patterns for the trailing text blocks the recording pruned from past user turns."""
    found: dict[str, None] = {}
    for before, after in itertools.pairwise(requests):
        if before.session != after.session or before.api != after.api:
            continue
        old, new = before.kwargs.get("messages"), after.kwargs.get("messages")
        if not isinstance(old, list) or not isinstance(new, list) or len(new) <= len(old):
            continue
        for index in range(len(old)):
            if not isinstance(old[index], Mapping) or not isinstance(new[index], Mapping):
                continue
            if old[index].get("role") != "user" or new[index].get("role") != "user":
                continue
            was, now = _texts(old[index].get("content")), _texts(new[index].get("content"))
            if was is None or now is None or not now or len(now) >= len(was) or was[: len(now)] != now:
                continue
            for text in was[len(now) :]:
                for line in text.splitlines():
                    if line.strip():
                        found[_pattern(line.strip())] = None
    return tuple(found)
