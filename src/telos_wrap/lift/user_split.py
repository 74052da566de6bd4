"""Split one text into PIN (the question), FOLD (history echo) and DROP (the per-turn envelope).

Harnesses wrap volatile context into user (and sometimes system) text: an ``<environment_info>``
block, ``<system-reminder>``s, slash-command envelopes, a ``Current time: …`` line. Left in place,
they change the bytes of the prompt every turn. The splitter finds them with a set of patterns the
application can extend, and returns spans that tile the input exactly: no character is lost,
added or changed, only assigned a band.

Whitespace rule: a matched envelope takes the whitespace that follows it up to and including its
last line break (so removing it leaves no blank gap, and the indentation of the line after it stays
with that line), or all of it when there is no line break; a whitespace-only piece of PIN text
between envelopes goes with the next envelope.

Scopes: ``drop`` patterns apply to every text (system and messages); ``system_drop`` patterns and the
``layers`` a session learned apply to system text only (``for_messages`` leaves them out), so a
pattern meant for the system prompt never edits what the user wrote.

A clock that ends the system prompt (``SplitPatterns.clock_in_place``, set by a session): a
``Current time: …`` line to the second that ends the system segment stays where it is, PIN
(``split_text(ends_system=True)``), while it has not changed; the session learns it at its first change
(docs/sessions.md, *A clock that ends the system prompt*).

Moved text (``TextSplit.moved``): the DROP pieces of one text joined in order, each on lines of its
own, a piece cut by a learned layer preceded by the heading line(s) it sat under
(``text_units.context_of``): ``git status:`` travels with its counts.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Protocol

from telos_wrap.ir.model import Band
from telos_wrap.ir.shared import BoundedMemo, share, shared_texts
from telos_wrap.lift.text_units import context_of

__all__ = [
    "DEFAULT_PATTERNS",
    "Span",
    "SplitPatterns",
    "TextSplit",
    "split_text",
    "to_the_second",
]


@dataclass(frozen=True, slots=True)
class TagMatch:
    """One envelope found by a ``TagPattern``: the part of ``re.Match`` the split uses."""

    begin: int
    finish: int

    def start(self) -> int:
        return self.begin

    def end(self) -> int:
        return self.finish


@dataclass(frozen=True, slots=True)
class TagPattern:
    """An XML-like envelope ``<name …>…</name>``: ``finditer`` finds exactly the matches of

        ``<name\\b[^>]*>.*?</name\\s*>`` (DOTALL)

    in linear time. That expression, run by a backtracking engine, reads the rest of the text from
    every opening tag that has no closing tag after it (20,000 ``<system-reminder>`` took 64 s; any
    end user can type them). Here every opening and every closing tag is found once; an opening ends
    at the first ``>`` after its name, its envelope at the first closing tag after that, and once an
    opening has no closing tag after it, no later one has either.
    """

    name: str
    pattern: str = field(init=False)

    def __post_init__(self) -> None:
        name = re.escape(self.name)
        object.__setattr__(self, "pattern", rf"<{name}\b[^>]*>.*?</{name}\s*>")

    def finditer(self, text: str) -> Iterator[TagMatch]:
        name = re.escape(self.name)
        closings = [(m.start(), m.end()) for m in _compiled(rf"</{name}\s*>").finditer(text)]
        if not closings:
            return
        starts = [start for start, _ in closings]
        cursor, gt = 0, -1
        for opening in _compiled(rf"<{name}\b").finditer(text):
            if opening.start() < cursor:
                continue
            if gt < opening.end():
                gt = text.find(">", opening.end())
                if gt < 0:
                    return
            index = bisect.bisect_left(starts, gt + 1)
            if index == len(closings):
                return
            cursor = closings[index][1]
            yield TagMatch(opening.start(), cursor)

    def sub(self, replacement: str, text: str) -> str:
        """``text`` with every envelope replaced by ``replacement`` (taken literally)."""
        out: list[str] = []
        cursor = 0
        for match in self.finditer(text):
            out += (text[cursor : match.begin], replacement)
            cursor = match.finish
        out.append(text[cursor:])
        return "".join(out)


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


class Matcher(Protocol):
    """A DROP pattern found by other means than a regular expression (a session's learned span,
    found by keyed digests of lines: ``sessions/learning/spans.py``): ``finditer`` gives its places.
    Hashable and compared by value (split results are memoized by their patterns)."""

    def finditer(self, text: str) -> Iterator[TagMatch]: ...

    def sub(self, replacement: str, text: str) -> str: ...


#: A DROP / FOLD pattern: a compiled expression (the caller's own), an envelope, or a learned span.
Pattern = re.Pattern[str] | TagPattern | Matcher


def _tag(name: str) -> TagPattern:
    return TagPattern(name)


@dataclass(frozen=True, slots=True)
class SplitPatterns:
    """The patterns that classify text. Extend with ``extended(drop=[...])``."""

    drop: tuple[Pattern, ...]
    fold: tuple[Pattern, ...]
    #: DROP patterns applied after the others, layer by layer: the patterns of a layer apply together
    #: to the PIN text the patterns before them left (the text a session learned them on). System
    #: text only.
    layers: tuple[tuple[Pattern, ...], ...] = ()
    #: DROP patterns for system text only (``telos_hint`` ``drop_patterns`` with the default
    #: ``drop_scope="system"``).
    system_drop: tuple[Pattern, ...] = ()
    #: System text only: a ``Current time: …`` line to the second that ends the system segment stays
    #: in place (the lifters pass ``split_text(ends_system=True)`` for the segment's last text). A
    #: session sets it where its engine reads any prefix without anchors (docs/sessions.md, *A clock
    #: that ends the system prompt*); once the line changed, a learned span cuts it.
    clock_in_place: bool = False
    #: The hash, computed once: the patterns are part of memo keys looked up several times per
    #: request, and a compiled pattern hashes its whole program every time.
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        cached = self._hash
        if not cached:
            cached = hash((self.drop, self.fold, self.layers, self.system_drop, self.clock_in_place)) or 1
            object.__setattr__(self, "_hash", cached)
        return cached

    def extended(
        self,
        drop: Iterable[str | Pattern] = (),
        fold: Iterable[str | Pattern] = (),
        system_drop: Iterable[str | Pattern] = (),
    ) -> SplitPatterns:
        """A copy with more DROP / FOLD patterns (strings are compiled with ``re.MULTILINE``)."""
        return SplitPatterns(
            drop=self.drop + _compile_all(drop),
            fold=self.fold + _compile_all(fold),
            layers=self.layers,
            system_drop=self.system_drop + _compile_all(system_drop),
            clock_in_place=self.clock_in_place,
        )

    def layered(self, layers: Iterable[Iterable[str | Pattern]]) -> SplitPatterns:
        """A copy with more DROP layers (see ``layers``), applied after the existing ones."""
        added = tuple(layer for layer in (_compile_all(items) for items in layers) if layer)
        return SplitPatterns(
            drop=self.drop,
            fold=self.fold,
            layers=self.layers + added,
            system_drop=self.system_drop,
            clock_in_place=self.clock_in_place,
        )

    def with_clock_in_place(self) -> SplitPatterns:
        """A copy whose system segment keeps a final clock line in place (``clock_in_place``)."""
        return self if self.clock_in_place else _with_clock(self)

    def for_messages(self) -> SplitPatterns:
        """The patterns for message text: without the system-only ones and the learned layers."""
        return _for_messages(self)


@functools.lru_cache(maxsize=64)
def _for_messages(patterns: SplitPatterns) -> SplitPatterns:
    if not patterns.layers and not patterns.system_drop and not patterns.clock_in_place:
        return patterns
    return SplitPatterns(drop=patterns.drop, fold=patterns.fold)


@functools.lru_cache(maxsize=64)
def _with_clock(patterns: SplitPatterns) -> SplitPatterns:
    return replace(patterns, clock_in_place=True)


def _compile_all(items: Iterable[str | Pattern]) -> tuple[Pattern, ...]:
    return tuple(re.compile(item, re.MULTILINE) if isinstance(item, str) else item for item in items)


DEFAULT_PATTERNS = SplitPatterns(
    drop=(
        _tag("environment_info"),
        _tag("system-reminder"),
        _tag("command-message"),
        _tag("command-name"),
        # A clock line, also right after an envelope's closing tag ("...</system-reminder>Current time:"),
        # so what the first pass leaves behind never starts with a clock line the next pass would take.
        re.compile(r"(?:^|(?<=>))[ \t]*Current time:[^\n]*", re.MULTILINE),
    ),
    fold=(_tag("prev"),),
)

#: A ``Current time: …`` line (the default clock envelope) and a time of day to the second in it.
_CLOCK_LINE = re.compile(r"\s*Current time:[^\n]*\s*")
_SECONDS = re.compile(r"(?<![\d:])\d{1,2}:\d{2}:\d{2}(?![\d:])")


def to_the_second(text: str) -> bool:
    """Whether ``text`` holds a time of day to the second (``10:02:07``, ``10:02:07.123``).

    A clock rendered for each request at that resolution changes by the next request (a model turn
    takes longer than a second), so one that comes back unchanged was rendered once for the run."""
    return _SECONDS.search(text) is not None


def _clock_kept(spans: tuple[Span, ...]) -> tuple[Span, ...]:
    """``spans`` (a flat split) with a final ``Current time: …`` envelope back in place (PIN).

    Only the last piece, a default clock line to the second that nothing but whitespace follows
    (``SplitPatterns.clock_in_place``, for the system segment's last text, before learned layers)."""
    if not spans or spans[-1].band is not Band.DROP:
        return spans
    last = spans[-1].text
    if _CLOCK_LINE.fullmatch(last) is None or not to_the_second(last):
        return spans
    return (*spans[:-1], Span(Band.PIN, last))


@dataclass(frozen=True, slots=True)
class Span:
    """A piece of the input text and its band."""

    band: Band
    text: str
    #: For a piece cut by a learned layer: the heading line(s) it sat under ("" if none); ``None``
    #: for any other piece.
    context: str | None = None


@dataclass(frozen=True, slots=True)
class TextSplit:
    """The result of a split. ``"".join(s.text for s in spans)`` is exactly the input."""

    spans: tuple[Span, ...]

    def joined(self, band: Band) -> str:
        """The concatenated text of every span of ``band``."""
        return "".join(span.text for span in self.spans if span.band is band)

    @property
    def pin(self) -> str:
        return self.joined(Band.PIN)

    @property
    def fold(self) -> str:
        return self.joined(Band.FOLD)

    @property
    def drop(self) -> str:
        return self.joined(Band.DROP)

    @property
    def moved(self) -> str:
        """The DROP pieces as they are rendered where they move (see module docstring).

        A piece a learned layer cut (whole lines) starts on a line of its own, preceded by its context
        lines when it has any, and what follows it starts on a new line; other pieces (tagged
        envelopes) are joined as they are. The form depends only on the text, so it is the same on
        every turn.
        """
        out: list[str] = []
        learned = False
        for span in self.spans:
            if span.band is not Band.DROP:
                continue
            if out and (learned or span.context is not None) and not out[-1].endswith("\n"):
                out.append("\n")
            if span.context:
                out.append(span.context + "\n")
            out.append(span.text)
            learned = span.context is not None
        return "".join(out)

    @property
    def is_plain(self) -> bool:
        """True when nothing was found: the whole text is one PIN span."""
        return all(span.band is Band.PIN for span in self.spans)


def _matches(text: str, patterns: SplitPatterns, with_fold: bool) -> list[tuple[int, int, Band]]:
    found: list[tuple[int, int, Band]] = []
    groups = [(patterns.drop + patterns.system_drop, Band.DROP)] + (
        [(patterns.fold, Band.FOLD)] if with_fold else []
    )
    for group, band in groups:
        for pattern in group:
            found.extend((m.start(), m.end(), band) for m in pattern.finditer(text) if m.end() > m.start())
    # Earliest first; on equal start the longest wins; overlapping later matches are dropped.
    found.sort(key=lambda item: (item[0], -item[1]))
    chosen: list[tuple[int, int, Band]] = []
    end = 0
    for start, stop, band in found:
        if start >= end:
            chosen.append((start, stop, band))
            end = stop
    return chosen


def split_text(
    text: str,
    patterns: SplitPatterns = DEFAULT_PATTERNS,
    *,
    with_fold: bool = True,
    ends_system: bool = False,
) -> TextSplit:
    """Split ``text`` into banded spans (PIN for everything no pattern matched).

    ``with_fold=False`` looks for DROP envelopes only (used for system text, where ``<prev>`` has no
    meaning). ``ends_system``: ``text`` is the system segment's last (with
    ``patterns.clock_in_place``, a final clock line stays in place). Results are memoized by the text
    itself (content-addressed: a string changed in place between turns is a different key), so
    history already split on an earlier turn costs a lookup.
    """
    key = (hash(text), len(text), patterns, with_fold, ends_system and patterns.clock_in_place)
    if patterns.layers:
        # Not memoized: learned spans note what they cut when they run (``explain`` names it); a hit on
        # a text split earlier would leave another's cut there. Such a text changes per request anyway.
        return _split_keyed(key, text)
    found = _split_memo(key, text)
    if found.spans and "".join([span.text for span in found.spans]) != text:
        return _split(text, patterns, with_fold, key[4])  # another text with the same hash: not memoized
    return found


#: Splits kept (most recent first). What recurs is recent: the system text every request lifts, the
#: latest turn lifted again when a span is learned; settled history is the history memo's job. A
#: larger cache only kept old texts alive: every entry is five objects every full garbage collection
#: walks (mini-swe-agent through patch(): 148 hits, 50 misses over 67 requests, none beyond the 50th
#: most recent text).
_SPLIT_MEMO_SIZE = 1024
#: ... and at most this many characters of split text (1,024 system prompts of 50 KB were 100 MB).
#: The memo is keyed by the text's hash and length, never the text (a caller's string that differs
#: per call, a clock in it, is not kept alive by the memo); a hit is checked against the text
#: (``TextSplit``'s spans join to exactly the input). A system text's spans (``with_fold=False``)
#: are shared (``ir.shared``): the prompt text many conversations send is held once.
_SPLIT_MEMO_BYTES = 8 << 20


def _split_keyed(key: tuple[int, int, SplitPatterns, bool, bool], text: str) -> TextSplit:
    split = _split(text, key[2], key[3], key[4])
    if key[3] or not split.spans:
        return split
    return TextSplit(spans=tuple(replace(span, text=share(span.text)) for span in split.spans))


def _split_size(key: object, split: TextSplit) -> int:
    return 64 * len(split.spans) + sum(
        0 if shared_texts.holds(span.text) else len(span.text) for span in split.spans
    )


_split_memo: BoundedMemo[tuple[int, int, SplitPatterns, bool, bool], TextSplit] = BoundedMemo(
    _split_keyed, max_entries=_SPLIT_MEMO_SIZE, max_bytes=_SPLIT_MEMO_BYTES, sizer=_split_size
)


def _split(text: str, patterns: SplitPatterns, with_fold: bool, keep_clock: bool = False) -> TextSplit:
    if not text:
        return TextSplit(spans=())
    spans = _split_flat(text, patterns, with_fold)
    if keep_clock:
        spans = _clock_kept(spans)
    for layer in patterns.layers:
        spans = _cut_layer(spans, layer)
    return TextSplit(spans=spans)


def _cut_layer(spans: tuple[Span, ...], layer: tuple[Pattern, ...]) -> tuple[Span, ...]:
    """``spans`` with ``layer``'s DROP matches in the PIN text they leave (joined) cut out too."""
    view = "".join(span.text for span in spans if span.band is Band.PIN)
    if not view:
        return spans
    cut = _split_flat(view, SplitPatterns(drop=layer, fold=()), with_fold=False)
    if all(piece.band is Band.PIN for piece in cut):
        return spans
    cut = _with_context(view, cut)
    pieces = iter(cut)
    piece, used = next(pieces), 0
    out: list[Span] = []
    for span in spans:
        if span.band is not Band.PIN:
            out.append(span)
            continue
        pos = 0
        while pos < len(span.text):
            if used == len(piece.text):
                piece, used = next(pieces), 0
            take = min(len(span.text) - pos, len(piece.text) - used)
            context = piece.context if used == 0 or piece.context is None else ""
            out.append(Span(piece.band, span.text[pos : pos + take], context))
            pos += take
            used += take
    return tuple(out)


def _with_context(view: str, cut: tuple[Span, ...]) -> tuple[Span, ...]:
    """``cut`` with the heading line(s) of each DROP piece that starts a line (``context_of``)."""
    lines: list[str] | None = None
    out: list[Span] = []
    offset = 0
    for piece in cut:
        if piece.band is Band.DROP:
            context = ""
            if offset == 0 or view[offset - 1] == "\n":
                lines = view.split("\n") if lines is None else lines
                first = view.count("\n", 0, offset)
                context = context_of(lines, first) if first < len(lines) else ""
            piece = Span(piece.band, piece.text, context)
        out.append(piece)
        offset += len(piece.text)
    return tuple(out)


def _split_flat(text: str, patterns: SplitPatterns, with_fold: bool) -> tuple[Span, ...]:
    """The split by ``patterns.drop`` / ``fold`` (all matched on ``text`` itself), layers aside."""
    matches = _matches(text, patterns, with_fold)
    if not matches:
        return (Span(Band.PIN, text),)
    raw: list[Span] = []
    cursor = 0
    for start, stop, band in matches:
        if start < cursor:  # whitespace absorption below may have consumed the start
            start = cursor
        if start > cursor:
            raw.append(Span(Band.PIN, text[cursor:start]))
        # Take the whitespace that follows the envelope, up to its last line break if it has one.
        end = stop
        while end < len(text) and text[end] in " \t\r\n":
            end += 1
        newline = text.rfind("\n", stop, end)
        stop = newline + 1 if newline >= 0 else end
        raw.append(Span(band, text[start:stop]))
        cursor = stop
    if cursor < len(text):
        raw.append(Span(Band.PIN, text[cursor:]))
    return tuple(_merge_blank_pin(raw))


def _merge_blank_pin(spans: list[Span]) -> list[Span]:
    """Give whitespace-only PIN pieces to the next non-PIN span (or the previous one at the end)."""
    merged: list[Span] = []
    carry = ""
    for span in spans:
        if span.band is Band.PIN and not span.text.strip() and len(spans) > 1:
            carry += span.text
            continue
        if carry and span.band is not Band.PIN:
            span = Span(span.band, carry + span.text)
            carry = ""
        elif carry:
            merged.append(Span(Band.PIN, carry))
            carry = ""
        merged.append(span)
    if carry:
        if merged:
            last = merged[-1]
            merged[-1] = Span(last.band, last.text + carry)
        else:
            merged.append(Span(Band.PIN, carry))
    return merged
