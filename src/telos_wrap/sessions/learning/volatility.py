"""Learned volatility: the parts of the system prompt that change from turn to turn become DROP.

The default DROP patterns only catch envelopes someone tagged (``<environment_info>``,
``Current time:``). A harness that writes ``Date: 2026-11-23 10:02`` into its system prompt, gives a
clock its own system block or its own leading ``system`` message, or rewrites a ``cwd:`` line,
changes the cached prefix on every turn. The session compares each request's **lifted system
segment** (the PIN text of ``ir.system`` as the lift produced it — Anthropic ``system`` blocks, the
leading system/developer messages of Chat Completions, Responses ``instructions`` alike, tagged
envelopes and already-learned spans removed, ref-pool stubs read as the text they stand for) with
a fingerprint of the previous request's, and learns a DROP span for what changed. Only what has
been seen to change moves, and it moves **whole**: never a piece of a line, always whole lines,
widened to the structure they belong to (a JSON block, a code fence, an XML-like element, a table's
rows, a heading whose whole section moves: ``lift/text_units.py``), or nothing moves.

* **a self-labelled statement of the present** — a whole line that is nothing but a "now" label
  and a short date or time (``Current date and time: 2026-11-23 10:02``, ``Today is Monday, 23
  November 2026``, ``Now: 10:02``, and their French, Spanish, German... forms: ``PRESENT``) is
  learned **on sight**, unless its time is a round hour (a frozen "now" such as tau-bench's). No
  other value is: a time of day in a calendar, opening hours, a log, a record stays where it is.
* **a live value** — a line whose text outside its digit-bearing tokens (its *skeleton*) is unchanged
  while one of those tokens changed (``10:02`` → ``10:09``, ``2026-11-23``, ``3 jobs``, a hex id):
  the whole line (its unit) is learned **at the first change**; a single line is found by the keyed
  digest of its skeleton, or by the digests of the stable lines around it;
* **a list** — lines that carry values came or went between stable lines (an environment dump's
  ``JOB_3=running (pid 4121)`` items): where the line diff's changed chunk has a value on every
  line and either a line kept its skeleton or at least two new lines of one skeleton came, that run
  of lines is learned **at the first change**, anchored on the stable lines around it;
* **any other change** (words changed, lines added or removed) is what a real prompt edit looks like:
  it is remembered as a *suspect* (where it changed) and learned only when **the same place
  changes again** (a one-off edit costs its one cache break and is never learned). A run of at most
  ``MAX_SPAN_LINES`` lines (same line count: line-anchored; another line count: anchored on the
  stable lines before and after), anywhere in the block, first, last or only line included.

The spans learned at one request are applied by the lift as one layer, to the text the earlier
layers left (``SplitPatterns.layered``): the text they were learned on, so an anchor may sit next
to an earlier cut. A learned span is never forgotten while its value rests (its digests mask any
value), stays capped at ``MAX_LEARNED`` per session, and is verified before use: the span,
applied by the lift to the request, must remove exactly what it removed from the lifted text here.

Nothing learned holds text (docs/security.md, E1): a span is positions and keyed digests of line
skeletons (``digests.py``, found again by ``spans.locate``); fingerprints hold keyed hashes only
(``fingerprint``): per line a hash of the line, and for lines with digit-bearing tokens a hash of
the skeleton and one short hash per value, then which key made them. Everything here is pure and
deterministic: the result depends only on the stored fingerprint, suspects and the lifted request, so
every worker of a shared session learns the same spans.

Why one module of ~640 lines: it is one algorithm with one reason to change, *what counts as
volatile*. The fingerprint, the four rules (present, value, list, suspect), the whole units and
anchored runs they widen to share one line model (``_Line``: hashes, skeletons, values), and a
change to how a span is described changes what its verification (``expected_view``, the
lift's own cut) must find; all of it must stay identical on every worker. The parts that are
reusable on their own already live elsewhere: text units in ``lift/text_units.py``, value scanning
in ``sessions/learning/values.py``, span records in ``sessions/durable/records.py``.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from telos_wrap.ir.canon import canonical_bytes
from telos_wrap.ir.model import Band, BlockKind, TelosIR
from telos_wrap.ir.refpool import entry_payload_text, parse_rendered
from telos_wrap.ir.shared import BoundedMemo, share, shared_texts
from telos_wrap.lift.text_units import regions, unit_of
from telos_wrap.lift.user_split import SplitPatterns, split_text, to_the_second
from telos_wrap.sessions.durable.records import MAX_LEARNED, SpanKind, VolatileSpan
from telos_wrap.sessions.learning.digests import (
    EDGE_AFTER,
    EDGE_BEFORE,
    SHARED_KEY,
    BlockLines,
    block_lines,
    block_print,
    key_id,
)
from telos_wrap.sessions.learning.spans import cut_text, locate, pattern_of
from telos_wrap.sessions.learning.values import ValueScanner

__all__ = [
    "MAX_LEARNED",
    "MAX_SPAN_LINES",
    "Learning",
    "expected_view",
    "fingerprint",
    "learn",
    "present_spans",
    "span_matches",
    "system_view",
    "unit_span",
]

#: The longest run of changed lines (not a live value) that is learned.
MAX_SPAN_LINES = 8
#: Cap on remembered suspects (learned spans: ``MAX_LEARNED``, a durable-state limit).
MAX_SUSPECTS = 16
#: At most this many changed lines (and values of a line) are tried per block and request: each try
#: checks a pattern against the whole block, so an unbounded count (a log of thousands of timestamped
#: lines) made a request quadratic; no more than ``MAX_LEARNED`` can be learned, and ``MAX_SUSPECTS``
#: kept, anyway.
_MAX_SPANS = MAX_LEARNED + MAX_SUSPECTS
#: A pattern without anchors needs at least this much literal (non-value) text to be specific.
_MIN_LITERAL = 10
_MIN_ANCHOR = 4

#: A digit-bearing token: whitespace-delimited, leading ``(["'<`` and trailing punctuation left out,
#: ``KEY=`` left out (``UPTIME=42s``: the value is ``42s``). Found in linear time (``values``).
VALUE = ValueScanner()
#: A time of day (``10:02``, ``10:02:07``, ``10:02:07.123456``).
CLOCK = re.compile(r"(?<![\d:])\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?![\d:])")
#: A time of day on the hour, to the second and below (``15:00``, ``15:00:00``, ``00:00:00.000``).
_ROUND_HOUR = re.compile(r"\d{1,2}:00(?::00(?:[.,]0+)?)?")
#: Span kinds learned at their first change (the others are suspects until they change again).
_LEARNED_AT_FIRST_CHANGE = frozenset({"value", "list", "present"})


@dataclass(frozen=True, slots=True)
class Learning:
    """What one comparison found: spans to use from this request on, and the suspects to keep."""

    learned: tuple[VolatileSpan, ...]
    suspects: tuple[VolatileSpan, ...]


# -- the lifted view and its fingerprint -----------------------------------------------------------


def system_view(ir: TelosIR) -> tuple[str | None, ...]:
    """The text of each PIN block of the lifted ``ir.system`` (``None`` for a non-text block).

    A ref-pool stub is read as the text it stands for (the lift moves long system text into the pool).
    DROP pieces — tagged envelopes and learned spans — are not part of it.
    """
    texts: list[str | None] = []
    for block in ir.system:
        if block.band is not Band.PIN:
            continue
        entry = ir.ref_pool.get(block.ref_slug) if block.ref_slug is not None else None
        if entry is not None:
            rendered = parse_rendered(entry_payload_text(entry))
            texts.append(rendered[1] if rendered is not None else entry_payload_text(entry))
            continue
        payload = block.payload
        text = payload.get("text") if isinstance(payload, Mapping) else None
        if block.kind is BlockKind.TEXT and isinstance(text, str):
            texts.append(text)
        else:
            texts.append("\x00" + hashlib.blake2b(canonical_bytes(payload), digest_size=4).hexdigest())
    return tuple(texts)


@dataclass(frozen=True, slots=True)
class _Line:
    line: str  # hash of the line
    skeleton: str  # hash of the line with its values masked ("" when it has no value)
    values: tuple[str, ...]  # one short hash per value


class _Lines(list[str]):
    """The lines of one block, with what every span of it needs computed once: the joined text,
    each line's offset, the structures (``text_units.regions``), the keyed line digests
    (``digests.BlockLines``). Keeps learning linear in the block however many of its lines changed."""

    def __init__(self, text: str, key: bytes = SHARED_KEY) -> None:
        super().__init__(text.split("\n"))
        self.text = text
        self.key = key
        self.offsets = list(itertools.accumulate((len(line) + 1 for line in self), initial=0))
        self._regions: list[tuple[int, int]] | None = None

    @property
    def digested(self) -> BlockLines:
        return block_lines(self.key, self.text)

    def regions(self) -> list[tuple[int, int]]:
        if self._regions is None:
            self._regions = regions(self)
        return self._regions


def _parse_line(entry: str) -> _Line:
    parts = entry.split("/")
    if len(parts) == 1:
        return _Line(parts[0], "", ())
    values = parts[2]
    return _Line(parts[0], parts[1], tuple(values[i : i + 6] for i in range(0, len(values), 6)))


def _block_print(key: bytes, text: str | None) -> str:
    return "~" if text is None else block_print(key, text)


def fingerprint(view: Sequence[str | None], key: bytes = SHARED_KEY) -> tuple[str, ...]:
    """What the state keeps of a lifted system segment: per block, per line, keyed digests only
    (``key``: the tenant's, ``digests.space_key``), then which key made them (``key_id``): a
    fingerprint made with another key is not compared line by line (nothing is learned from it)."""
    return (*("~" if text is None else block_print(key, text) for text in view), key_id(key))


# -- learning ---------------------------------------------------------------------------------------


def learn(
    previous: Sequence[str],
    view: Sequence[str | None],
    index: int,
    suspects: Sequence[VolatileSpan] = (),
    room: int = MAX_LEARNED,
    key: bytes = SHARED_KEY,
    local: bool = False,
) -> Learning:
    """Compare ``view`` (this request's lifted system segment) with ``previous`` (the last fingerprint).

    Returns the spans learned now (live values; suspects seen changing again) and the suspects to
    keep. Nothing is learned when the number of system blocks changed (a restructured prompt), or
    when ``previous`` was made with another key. ``local``: the two requests are not known to be one
    conversation; what is learned or suspected is marked ``local`` (never shared with the fleet).
    """
    kept = tuple(suspects)
    if len(previous) != len(view) + 1 or previous[-1] != key_id(key):
        return Learning((), kept)
    learned: list[VolatileSpan] = []
    for block, (old, text) in enumerate(zip(previous, view, strict=False)):
        if text is None or text.startswith("\x00") or old.startswith("~") or _block_print(key, text) == old:
            continue
        for span in _block_changes(block, old, text, index, key):
            if len(learned) >= room:
                break  # nothing more can be learned: stop looking (keeps learning linear in the block)
            if local:
                span = replace(span, local=True)
            if span.kind not in _LEARNED_AT_FIRST_CHANGE:
                again = _changed_again(span, text, kept, key)
                if again is None:
                    kept = (*kept, span)[-MAX_SUSPECTS:]
                    continue
                suspect, span = again
                if suspect.local:
                    span = replace(span, local=True)
                kept = tuple(s for s in kept if s is not suspect)
            if all(s.where != span.where for s in learned):
                learned.append(span)
    return Learning(tuple(learned[:room]), kept)


def _changed_again(
    span: VolatileSpan, text: str, suspects: Sequence[VolatileSpan], key: bytes
) -> tuple[VolatileSpan, VolatileSpan] | None:
    """``(suspect, span to learn)`` when ``span`` changed where a suspect of its block changed before.

    The same place is the same description, or lines that touch where a suspect is found
    now (a list whose items come and go changes at a different line each time): then the union of
    both is learned as one region.
    """
    for suspect in suspects:
        if suspect.block != span.block:
            continue
        if suspect.where == span.where:
            return suspect, span
        if suspect.kind != "region" or span.kind != "region":
            continue  # edits of neighbouring lines are not a list that grows and shrinks
        place = locate(suspect, block_lines(key, text))
        if place is None:
            continue
        low, high = place
        first, last = span.line, span.line + span.lines - 1
        if first > high + 1 or last < low - 1:
            continue
        lines = _Lines(text, key)
        first, last = min(first, low), max(last, high)
        if last - first + 1 > MAX_SPAN_LINES:
            continue
        union = _unit_span(span.block, lines, first, last, span.learned_at, "region")
        if union is not None:
            return suspect, union
    return None


def _block_changes(block: int, old: str, text: str, index: int, key: bytes) -> Iterator[VolatileSpan]:
    """The spans of one block's changes, in line order (lazily: the caller stops when it is full)."""
    before = [_parse_line(entry) for entry in old.split(",")]
    lines = _Lines(text, key)
    now = [_parse_line(entry) for entry in _block_print(key, text).split(",")]
    if len(before) == len(now):
        changed = [(i, i) for i, (a, b) in enumerate(zip(before, now, strict=True)) if a.line != b.line]
        yield from _aligned_changes(block, before, now, lines, changed, index)
        return
    listed = _list_changes(block, before, now, lines, index)
    if listed is not None:
        yield from listed
        return
    region = _region(block, before, now, lines, index)
    if region is not None:
        yield region


def _aligned_changes(
    block: int,
    before: Sequence[_Line],
    now: Sequence[_Line],
    lines: Sequence[str],
    changed: Sequence[tuple[int, int]],
    index: int,
) -> Iterator[VolatileSpan]:
    """Spans for changed lines paired one to one (``(old line, new line)``, in order), lazily."""
    run: list[int] = []
    for i, j in changed[:_MAX_SPANS]:
        if before[i].skeleton and before[i].skeleton == now[j].skeleton:
            yield from _value_spans(block, lines, j, before[i], now[j], index)
            continue
        if run and run[-1] != j - 1:
            yield from _run_span(block, lines, run, index)
            run = []
        run.append(j)
    if run:
        yield from _run_span(block, lines, run, index)


def _list_changes(
    block: int, before: Sequence[_Line], now: Sequence[_Line], lines: Sequence[str], index: int
) -> list[VolatileSpan] | None:
    """Spans for a block whose line count changed only where lines carrying values came and went.

    The lines are diffed; a chunk replaced line for line is read like any same-count change, and a
    chunk of another line count is a *list* (``JOB_3=running (pid 4121)`` items of an environment
    dump, a process table) when every line on both sides carries a value and either a line kept its
    skeleton (a value changed in place) or, where nothing was there before, at least two of the new
    lines share a skeleton (items of one kind): it is learned at this first change. Value lines that only
    went away leave nothing to learn. ``None`` when some chunk is not like that (words added or
    removed, one new line: what a prompt edit looks like, see ``_region``).
    """
    matcher = difflib.SequenceMatcher(None, [b.line for b in before], [n.line for n in now], autojunk=False)
    spans: list[VolatileSpan] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i2 - i1 == j2 - j1:
            pairs = list(zip(range(i1, i2), range(j1, j2), strict=True))
            spans.extend(_aligned_changes(block, before, now, lines, pairs, index))
            continue
        old, new = before[i1:i2], now[j1:j2]
        if not all(line.skeleton for line in (*old, *new)):
            return None
        if not new:
            continue  # items gone: nothing left here to cut
        kept = {line.skeleton for line in old} & {line.skeleton for line in new}
        kinds = Counter(line.skeleton for line in new)
        alike = max(kinds.values()) > 1  # at least two new lines of one kind: items of a list
        if not (kept or (not old and alike)):
            return None
        span = _list_span(block, lines, j1, j2 - 1, index)
        if span is None:
            return None
        spans.append(span)
    return spans


def _list_span(block: int, lines: Sequence[str], first: int, last: int, index: int) -> VolatileSpan | None:
    """A ``list`` span over lines ``first..last``, widened to their unit, or by a line or two where
    they anchor badly."""
    found = lines.regions() if isinstance(lines, _Lines) else regions(lines)
    tries = dict.fromkeys(
        extent
        for wider in range(3)
        for extent in ((first - wider, last), (first, last + wider), (first - wider, last + wider))
    )
    for low, high in tries:
        if low < 0 or high >= len(lines) or high - low + 1 > MAX_SPAN_LINES:
            continue
        span = _unit_span(block, lines, low, high, index, "list", found)
        if span is not None:
            return span
    return None


# -- whole units ------------------------------------------------------------------------------------


def _unit_span(
    block: int,
    lines: Sequence[str],
    first: int,
    last: int,
    index: int,
    kind: SpanKind,
    found: Sequence[tuple[int, int]] | None = None,
) -> VolatileSpan | None:
    """A span over lines ``first..last`` widened to their whole unit (``text_units.unit_of``).

    It says where it is by keyed digests (``spans.locate``): one line that is its own unit by its
    own digest when its text outside values is specific enough (``_MIN_LITERAL``; less at the
    block's edge), else by its neighbours' digests; a unit of several lines (or a list) by the
    lines around it on both sides (or the block's edge). ``None`` when no description finds exactly
    this unit again on this text (then nothing moves).
    """
    lines = lines if isinstance(lines, _Lines) else _Lines("\n".join(lines))
    if found is None:
        found = lines.regions()
    unit = unit_of(lines, first, last, found)
    if unit is None:
        return None
    low, high = unit
    digested = lines.digested
    base = VolatileSpan(block, low, high - low + 1, index, kind=kind)
    before = EDGE_BEFORE if low == 0 else _anchor(lines, digested, low - 1)
    after = EDGE_AFTER if high == len(lines) - 1 else _anchor(lines, digested, high + 1)
    candidates: list[VolatileSpan] = []
    if low == high and kind != "list":
        literal = _literal(lines[low])
        own = digested.digests[low]
        if kind in ("value", "present") and literal >= _MIN_LITERAL:
            candidates.append(replace(base, own=own, before=before.strip("^"), after=after.strip("$")))
        if kind in ("value", "present") and literal >= _MIN_ANCHOR:
            # The first or last line of the block (a system message that is only a clock): pinned to
            # the block's start / end, little literal text will do.
            if low == 0:
                candidates.append(replace(base, own=own, before=EDGE_BEFORE))
            if low == len(lines) - 1:
                candidates.append(replace(base, own=own, after=EDGE_AFTER))
        if before not in ("", EDGE_BEFORE):
            candidates.append(replace(base, before=before))
        if after not in ("", EDGE_AFTER):
            candidates.append(replace(base, after=after))
    if before and after and (before, after) != (EDGE_BEFORE, EDGE_AFTER):
        candidates.append(replace(base, before=before, after=after))
    return next((c for c in candidates if locate(c, digested) == (low, high)), None)


def _literal(line: str) -> int:
    """Characters of ``line`` outside its values."""
    return len(line) - sum(end - start for start, end in VALUE.spans(line))


def _anchor(lines: Sequence[str], digested: BlockLines, number: int) -> str:
    """Line ``number``'s digest if it is specific enough to anchor on, else ``""``."""
    literal = VALUE.sub("", lines[number]).strip()
    return digested.digests[number] if len(literal) >= _MIN_ANCHOR else ""


def _value_spans(
    block: int, lines: Sequence[str], number: int, old: _Line, new: _Line, index: int
) -> list[VolatileSpan]:
    """A line whose values changed while its skeleton stayed: the whole line (its unit) moves."""
    span = _unit_span(block, lines, number, number, index, "value")
    return [span] if span is not None else []


#: A whole line that is nothing but a self-labelled statement of the present: a label that says
#: "now" (English, French, Spanish, German, Italian, Portuguese, Chinese, Japanese), then a short
#: date or time. It reads the same wherever it stands, so it may move on sight.
PRESENT = re.compile(
    r"^[ \t]*(?:[-*][ \t]+)?(?:the[ \t]+)?(?:"
    r"current[ \t]+(?:local[ \t]+)?(?:date(?:[ \t]*(?:and|&|/)[ \t]*time)?|time(?:stamp)?|datetime)"
    r"|today(?:'s[ \t]+date)?|now|right[ \t]+now|it[ \t]+is[ \t]+now|local[ \t]+time[ \t]+now"
    r"|heure[ \t]+actuelle|date[ \t]+du[ \t]+jour|nous[ \t]+sommes[ \t]+le|aujourd'hui"
    r"|fecha(?:[ \t]+y[ \t]+hora)?[ \t]+actual(?:es)?|hora[ \t]+actual|hoy[ \t]+es"
    r"|aktuelle[ \t]+(?:uhr)?zeit|aktuelles[ \t]+datum|heute[ \t]+ist|jetzt"
    r"|data[ \t]+e[ \t]+ora[ \t]+attuali|oggi[ \t]+è|data[ \t]+atual|hoje[ \t]+é"
    r"|当前时间|现在时间|今天是|現在時刻|現在の日時"
    r")(?:[ \t]+(?:is|es|ist|est|è|é))?[ \t]*[:\uff1a=\-\u2013\u2014]?[ \t]*(?P<value>[^\n]*)$",
    re.IGNORECASE,
)
#: What follows the label: at most this many characters and words (a weekday, a month, a time
#: zone...), holding a date or a time of day.
_PRESENT_VALUE = 64
_PRESENT_WORDS = 5
_WORD = re.compile(r"[^\W\d_]{2,}")
_DATE_OR_TIME = re.compile(
    r"\d{1,2}:\d{2}|\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[./]\d{1,2}[./]\d{2,4}|\d{1,2}\s+\w{3,}\s+\d{4}|\d{4}年"
)


def _present_line(line: str) -> bool:
    """Whether ``line`` is a self-labelled statement of the present (``PRESENT``) whose time, if it
    has one, is not a round hour (``_ROUND_HOUR``)."""
    found = PRESENT.match(line)
    if found is None:
        return False
    value = found.group("value").strip()
    if not value or len(value) > _PRESENT_VALUE or _DATE_OR_TIME.search(value) is None:
        return False
    if any(mark in value for mark in ";|") or len(_WORD.findall(value)) > _PRESENT_WORDS:
        return False  # more than a date or a time: a sentence that also says something else
    clock = CLOCK.search(value)
    return clock is None or _ROUND_HOUR.fullmatch(clock.group()) is None


def present_spans(
    view: Sequence[str | None], index: int, key: bytes = SHARED_KEY, *, clock_in_place: bool = False
) -> tuple[VolatileSpan, ...]:
    """``present`` spans for every whole line of the system segment that states the present.

    ``Current date and time: 2026-11-23 10:02``, ``Today is Monday, 23 November 2026``, ``Now:
    10:02``: learned on sight (from the first request on) instead of costing the cache break of
    their first change. Any other value, a time of day included, stays where the caller wrote it
    until it is seen to change. A line inside a structure (a JSON block, a table...) is not taken.

    ``clock_in_place``: the engine reads any token prefix (no anchors): a line with a time to the
    second that ends the segment is not taken on sight; it stays in place until it changes, and is
    then learned as a value (docs/sessions.md, *A clock that ends the system prompt*).
    """
    spans: list[VolatileSpan] = []
    for block, text in enumerate(view):
        if text is not None and not text.startswith("\x00"):
            found = _present_memo((text, block, key))
            if found and clock_in_place and block == len(view) - 1:
                final = _final_clock(text)
                found = tuple(span for span in found if span.line != final)
            spans.extend(replace(span, learned_at=index) for span in found)
    return tuple(spans)


def _final_clock(text: str) -> int | None:
    """The number of ``text``'s last non-blank line when it holds a time to the second, else ``None``."""
    body = text.rstrip()
    start = body.rfind("\n") + 1
    return body.count("\n") if body and to_the_second(body[start:]) else None


def _present_spans_keyed(key: tuple[str, int, bytes]) -> tuple[VolatileSpan, ...]:
    text, block, digest_key = key
    numbers = [number for number, line in enumerate(text.split("\n")) if _present_line(line)]
    if not numbers:
        return ()
    lines = _Lines(text, digest_key)
    found = lines.regions()
    spans: list[VolatileSpan] = []
    for number in numbers:
        if any(start <= number <= end for start, end in found):
            continue
        span = _unit_span(block, lines, number, number, 0, "present", found)
        if span is not None and span.lines == 1:
            spans.append(span)
    return tuple(spans)


def _spans_size(key: tuple[str, int, bytes], spans: tuple[VolatileSpan, ...]) -> int:
    return (0 if shared_texts.holds(key[0]) else len(key[0])) + 400 * len(spans)


def _shared_key(key: tuple[str, int, bytes]) -> tuple[str, int, bytes]:
    return (share(key[0]), key[1], key[2])


#: Present-line spans by (shared) text, block and key, bounded in entries and bytes.
_present_memo: BoundedMemo[tuple[str, int, bytes], tuple[VolatileSpan, ...]] = BoundedMemo(
    _present_spans_keyed, max_entries=256, max_bytes=2 << 20, sizer=_spans_size, keep=_shared_key
)


# -- runs of lines ----------------------------------------------------------------------------------


def _run_span(block: int, lines: Sequence[str], run: Sequence[int], index: int) -> list[VolatileSpan]:
    first, last = run[0], run[-1]
    if last - first + 1 > MAX_SPAN_LINES or len(run) >= len(lines):
        return []
    span = _unit_span(block, lines, first, last, index, "lines")
    return [span] if span is not None else []


def _region(
    block: int, before: Sequence[_Line], now: Sequence[_Line], lines: Sequence[str], index: int
) -> VolatileSpan | None:
    """Lines replaced by another number of lines: one region between a common prefix and suffix."""
    prefix = 0
    while prefix < min(len(before), len(now)) and before[prefix].line == now[prefix].line:
        prefix += 1
    suffix = 0
    while suffix < min(len(before), len(now)) - prefix and before[-1 - suffix].line == now[-1 - suffix].line:
        suffix += 1
    first, last = prefix, len(now) - suffix - 1
    if last < first or last - first + 1 > MAX_SPAN_LINES or (prefix == 0 and suffix == 0):
        return None
    return _unit_span(block, lines, first, last, index, "region")


# -- for fleet learning (sessions/learning/fleet.py) --


def unit_span(
    block: int, text: str, first: int, last: int, index: int, kind: SpanKind, key: bytes = SHARED_KEY
) -> VolatileSpan | None:
    """The span this module would learn for lines ``first..last`` of ``text`` (widened to their
    unit, found by keyed digests of its text), or ``None`` (see ``_unit_span``)."""
    return _unit_span(block, _Lines(text, key), first, last, index, kind)


# -- what the model then sees --------------------------------------------------------------------------


def span_matches(span: VolatileSpan, ir: TelosIR, key: bytes = SHARED_KEY) -> tuple[str, int] | None:
    """``(block id, characters)`` of the lifted DROP text of ``ir.system`` that ``span`` cut, if any
    (the text it cut last in this process, ``spans.cut_text``)."""
    cut_off = cut_text(key, span)
    if not cut_off:
        return None
    for block in ir.system:
        text = block.payload.get("text") if isinstance(block.payload, Mapping) else None
        if block.band is Band.DROP and isinstance(text, str) and cut_off in text:
            return block.id, len(cut_off)
    return None


# -- verification -----------------------------------------------------------------------------------


def expected_view(
    view: Sequence[str | None], spans: Sequence[VolatileSpan], key: bytes = SHARED_KEY
) -> tuple[str | None, ...]:
    """``view`` with ``spans`` cut out the way the lift cuts DROP matches (for verification)."""
    patterns = SplitPatterns(drop=(), fold=()).extended(drop=[pattern_of(key, span) for span in spans])
    return tuple(
        text if text is None or text.startswith("\x00") else split_text(text, patterns, with_fold=False).pin
        for text in view
    )
