"""Where a learned span is on a request's text, found by keyed digests (no pattern built from text).

A ``VolatileSpan`` says where it is by the keyed skeleton digests of its own line and of the lines
around it (``digests.py``). ``locate`` finds it on a block of system text, in one of three ways:

* **its own line** (``own`` set): the one line of that digest; where several lines have it, the one
  whose neighbours have the digests ``before`` / ``after`` (or that starts / ends the block: ``^`` /
  ``$``);
* **one line between anchors** (one line, not a list): the one line whose neighbour(s) have the
  digests given;
* **a run between anchors** (several lines, or a list): the lines after a line of digest ``before``
  (or from the block's start) up to the next line of digest ``after`` (or the block's end) — as many
  as there are now (a list grows and shrinks).

Exactly one place, or none: a span that fits two places cuts nothing. ``SpanPattern`` gives the lift
a span as a DROP pattern (``lift/user_split.py`` calls its ``finditer``): the lift applies the spans
learned at one request as one layer, to the text the earlier layers left. Pure.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

from telos_wrap.lift.user_split import TagMatch
from telos_wrap.sessions.durable.records import VolatileSpan
from telos_wrap.sessions.learning.digests import EDGE_AFTER, EDGE_BEFORE, BlockLines, block_lines

__all__ = ["SpanPattern", "cut_text", "locate", "pattern_of"]


def _before_ok(lines: BlockLines, number: int, before: str) -> bool:
    if before == EDGE_BEFORE:
        return number == 0
    return not before or (number > 0 and lines.digests[number - 1] == before)


def _after_ok(lines: BlockLines, number: int, after: str) -> bool:
    if after == EDGE_AFTER:
        return number == len(lines.lines) - 1
    return not after or (number + 1 < len(lines.lines) and lines.digests[number + 1] == after)


def locate(span: VolatileSpan, lines: BlockLines) -> tuple[int, int] | None:
    """``(first, last)`` line of ``span`` on ``lines``, or ``None`` unless exactly one place fits."""
    if span.own:
        found = lines.matching(span.own)
        if len(found) > 1 or (found and (span.before in ("^",) or span.after in ("$",))):
            found = [
                n for n in found if _before_ok(lines, n, span.before) and _after_ok(lines, n, span.after)
            ]
        return (found[0], found[0]) if len(found) == 1 else None
    if not (span.before or span.after):
        return None
    if span.lines == 1 and span.kind != "list":
        found = [
            n
            for n in range(len(lines.lines))
            if _before_ok(lines, n, span.before) and _after_ok(lines, n, span.after)
        ]
        return (found[0], found[0]) if len(found) == 1 else None
    if not (span.before and span.after) or (span.before, span.after) == (EDGE_BEFORE, EDGE_AFTER):
        return None
    last_line = len(lines.lines) - 1
    starts = [0] if span.before == EDGE_BEFORE else [n + 1 for n in lines.matching(span.before)]
    ends = [last_line + 1] if span.after == EDGE_AFTER else lines.matching(span.after)
    places = []
    for start in starts:
        end = next((end for end in ends if end > start), None)
        if end is not None and start <= last_line:
            places.append((start, end - 1))
        if len(places) > 1:
            return None
    return places[0] if places else None


#: The text each span cut last, by key and span (in this process only: for ``explain``'s records).
_CUTS: OrderedDict[tuple[bytes, tuple[object, ...]], str] = OrderedDict()
_CUTS_LOCK = threading.Lock()
_MAX_CUTS = 1_024


def cut_text(key: bytes, span: VolatileSpan) -> str | None:
    """The text ``span`` last cut in this process (``None``: none yet)."""
    return _CUTS.get((key, span.where))


@dataclass(frozen=True, slots=True)
class SpanPattern:
    """A learned span as a DROP pattern of the lift (``finditer``: its one place on the text, if any)."""

    key: bytes = field(repr=False)
    span: VolatileSpan

    def __hash__(self) -> int:
        return hash((self.key, self.span.where))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpanPattern) and (self.key, self.span.where) == (other.key, other.span.where)

    def finditer(self, text: str) -> Iterator[TagMatch]:
        """The span's one place on ``text`` as a ``TagMatch`` (nothing when ``locate`` cannot place it, or the
        place is empty), as the lift's DROP patterns give their matches. It also keeps the text it cut, in
        this process only, for ``cut_text`` (the last ``_MAX_CUTS`` spans)."""
        place = locate(self.span, block_lines(self.key, text))
        if place is None:
            return
        begin, finish = block_lines(self.key, text).span(*place)
        if finish <= begin:
            return
        with _CUTS_LOCK:
            _CUTS[(self.key, self.span.where)] = text[begin:finish]
            _CUTS.move_to_end((self.key, self.span.where))
            while len(_CUTS) > _MAX_CUTS:
                _CUTS.popitem(last=False)
        yield TagMatch(begin, finish)

    def sub(self, replacement: str, text: str) -> str:
        """``text`` with the span's one place (if any) replaced by ``replacement``."""
        for found in self.finditer(text):
            return text[: found.start()] + replacement + text[found.end() :]
        return text


def pattern_of(key: bytes, span: VolatileSpan) -> SpanPattern:
    """``span`` as a DROP pattern for text digested under ``key``."""
    return SpanPattern(key, span)
