"""Fleet learning: what one conversation learns about its application's system prompt serves the next.

A conversation learns which system lines are volatile (``volatility.py``) the first time they change,
and pays one cache break for it. Every conversation of the same application pays that break again.
Fleet learning records what a conversation learned — where its volatile units sit, as *facts* — in
the session store, under the tenant's namespace, and offers them to every new conversation of
that tenant's applications: it starts with them as
pre-learned spans, each learned again and verified on its own prompt before use.

* **The application** (``application_key``): the tenant's namespace and the number of system
  blocks — not the system prompt's words, nor the tools (a harness offers a tool more in some
  conversations), so the conversations of an application whose prompts name their user ("You are
  helping Ana Lopez"), carry a per-user section or numbered rules share one pool of facts; which
  fact fits a prompt is decided on the prompt itself (``adopt``, below: a unit found exactly once
  where its neighbours say, whole, verified). Several applications of one tenant share the pool
  (``MAX_FACTS``). A prompt with fewer than ``MIN_TEMPLATE``
  characters of value-free text (``template_key``: its system lines that hold no digit) has no
  application: too little to share anything about. (Before, the pool was keyed by that template,
  so a name in a digit-free line made every conversation an application of its own.)
* **The facts** (``Fact``, ``facts_of``): the units this conversation learned because it *saw them
  change* — a live value or a list at its first change, a run of lines at its second (``kind``
  ``value``, ``list``, ``lines``, ``region``). Never a suspect (a one-off edit stays in its
  conversation until it changes again), never a span learned on sight (``present``: every
  conversation learns those on sight anyway), never a span adopted from the fleet. A fact holds no
  pattern and no text of the conversation: it says where the unit sits by the *skeletons* of the
  lines around it (and of its own line, for a value) — each line's text with ``\\S+`` for every
  value (``volatility.skeleton_regex``) — plus its kind, block, line count and the request that
  learned it. So no value and no conversation content (user, assistant or tool text: learning
  reads the system prompt only) is ever stored. At most ``MAX_FACTS`` per template.
* **How long its conversations run** (``lengths.Lengths``, the entry's ``reached``): how many of
  the application's conversations made at least 1, 2, ... requests — counts only — so that a
  request expected to end its conversation writes nothing nobody would read (``lengths.py``).
* **Where** (``fleet_id``): one blob (``FACTS``) of a pseudo-session ``telos-fleet:<namespace>:<template>``
  in the session's own store — so under that store's prefix (a ``RedisStore`` key
  ``P{telos-fleet:…}:blobs``: one key, one hash slot, cluster-safe; its TTL is the store's, renewed
  by each publish), bounded like every session of a ``MemoryStore`` (one process: an in-process
  fleet). ``namespace`` is a digest of the ``isolation`` hint: tenants that set it never share
  facts; without it the namespace is the store itself (docs/sessions.md, "Fleet learning").
* **Merging** (``merged``): a fact that says where a known fact's unit sits (same kind and block)
  in a prompt whose neighbouring line or own line differs in words — another user's name — does not
  become a second fact: the known one's differing lines are generalized, the differing words made
  ``\\S+`` holes (``_joined``: at most two of the three lines differ, each the same number of
  words, its own line keeps half of its words). So what the
  conversations of an application differ in is not kept as a literal once two of them were seen
  to differ there, and the neighbour then fits every user's prompt.
* **Use** (``adopt``): at the first request a process prepares for a conversation that has made no
  request yet, each fact is placed on this prompt's lifted system segment, layer by layer in the
  order it was learned: the unit must be found exactly once (its own line, or the one run between
  lines of the two skeletons), and the new conversation then learns it the way it would have
  learned it itself (``volatility.unit_span``: widened to its unit, anchored on *its own* text) —
  the unit must already be whole, and the pattern must cut nothing in another block; any other
  fact is ignored. ``run_turn`` then verifies that the lift cuts exactly that, as for the
  conversation's own spans. Facts read from the store are untrusted: malformed records are
  skipped, and a skeleton is compiled only if it is made of escaped literals and ``\\S+`` holes
  with whitespace between two holes (``_skeleton_pieces``), so a hostile regex never runs.

Why one module, over 500 lines: the facts' format, the skeleton grammar that guards what is read
back, merging and placing are one contract (what ``facts_of`` writes is what ``_skeleton_pieces``
accepts, ``merged`` generalizes and ``_place`` finds); split, each half would restate it.

Everything here is pure; the store I/O (fail open, through the store's circuit breaker) is
``fleet_io.py``.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from telos_wrap.ir.canon import canonical_json
from telos_wrap.ir.model import Api
from telos_wrap.lift.user_split import DEFAULT_PATTERNS, split_text
from telos_wrap.sessions.durable.records import SpanKind, VolatileSpan
from telos_wrap.sessions.learning.fleet_shape import decode_prints
from telos_wrap.sessions.learning.lengths import Lengths
from telos_wrap.sessions.learning.volatility import (
    MAX_SPAN_LINES,
    VALUE,
    expected_view,
    skeleton_regex,
    unit_span,
)

__all__ = [
    "FACTS",
    "MAX_FACTS",
    "MAX_PATTERN",
    "MIN_TEMPLATE",
    "Fact",
    "adopt",
    "application_key",
    "decode",
    "decode_entry",
    "encode",
    "facts_of",
    "fleet_id",
    "namespace",
    "system_pin_texts",
    "template_key",
]

logger = logging.getLogger("telos_wrap.sessions")

#: The blob key of a template's facts in its pseudo-session.
FACTS = "facts"
FLEET_PREFIX = "telos-fleet:"
#: Facts kept per template, and the longest pattern (or body) kept.
MAX_FACTS = 16
MAX_PATTERN = 2_000
#: The longest stored entry read (a larger one is ignored unread).
MAX_ENTRY = 64_000
#: Characters of value-free system text a prompt needs to have a template.
MIN_TEMPLATE = 40
#: A whole line without a digit.
_NO_DIGIT_LINE = re.compile(r"^[^\d\n]+$", re.MULTILINE)
#: Kinds learned from what was seen to change (``present`` is learned on sight by everyone).
_SHARED_KINDS = frozenset({"value", "list", "lines", "region"})
_VERSION = 1


# -- the template ------------------------------------------------------------------------------------


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        return "\n".join(texts)
    return None


def _system_texts(api: Api, body: Mapping[str, Any]) -> list[str]:
    """The system prompt of ``body`` as the application wrote it, one text per block / message."""
    if api == "anthropic":
        system = body.get("system")
        if isinstance(system, str):
            return [system]
        if isinstance(system, list):
            return [t for t in (_text_of([block]) for block in system) if t is not None]
        return []
    if api == "openai_responses":
        instructions = body.get("instructions")
        return [instructions] if isinstance(instructions, str) else []
    texts: list[str] = []
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, Mapping) or message.get("role") not in ("system", "developer"):
            break
        text = _text_of(message.get("content"))
        if text is not None:
            texts.append(text)
    return texts


def system_pin_texts(api: Api, body: Mapping[str, Any], drop_patterns: Sequence[str] = ()) -> list[str]:
    """The system prompt of ``body``, one text per block, its tagged envelopes (the default DROP
    patterns and ``drop_patterns``) left out as the lift leaves them out."""
    patterns = DEFAULT_PATTERNS.extended(drop=drop_patterns) if drop_patterns else DEFAULT_PATTERNS
    return [split_text(text, patterns, with_fold=False).pin for text in _system_texts(api, body)]


def template_key(api: Api, body: Mapping[str, Any], drop_patterns: Sequence[str] = ()) -> str | None:
    """The template of ``body``'s system prompt (see module docstring), or ``None`` if it has none.

    Tagged envelopes (the default DROP patterns and the call's ``drop_patterns``) are left out, as
    the lift leaves them out. Never raises.
    """
    try:
        patterns = DEFAULT_PATTERNS.extended(drop=drop_patterns) if drop_patterns else DEFAULT_PATTERNS
        digest = hashlib.blake2b(digest_size=16)
        stable = 0
        texts = _system_texts(api, body)
        digest.update(f"{len(texts)}\x00".encode())
        for text in texts:
            pin = split_text(text, patterns, with_fold=False).pin
            # One pass over the text (a prompt of 5,000 timestamped lines costs no per-line scan).
            for found in _NO_DIGIT_LINE.finditer(pin):
                line = found.group()
                if line.strip():
                    stable += len(line.strip())
                    digest.update(line.encode("utf-8", "surrogatepass") + b"\n")
            digest.update(b"\x00")
        return digest.hexdigest() if stable >= MIN_TEMPLATE else None
    except Exception:  # a body the lift will refuse anyway: no template
        logger.debug("telos_wrap: no fleet template for this request", exc_info=True)
        return None


def application_key(api: Api, body: Mapping[str, Any], drop_patterns: Sequence[str] = ()) -> str | None:
    """The fleet pool of ``body`` within its tenant's namespace (see module docstring): a digest of
    the number of its system blocks, or ``None`` when its system prompt has fewer than
    ``MIN_TEMPLATE`` characters of value-free text (too little to share anything about).

    It depends neither on the system prompt's words nor on the tools: conversations whose prompts
    name their user, carry a per-user section, or whose harness offers a tool more in some
    conversations, are one application. Which facts fit a prompt is decided on the prompt itself
    (``adopt``: a unit found exactly once where its neighbours say, verified). Never raises.
    """
    try:
        if template_key(api, body, drop_patterns) is None:
            return None
        material = f"app\x00{len(_system_texts(api, body))}".encode()
        return hashlib.blake2b(material, digest_size=16).hexdigest()
    except Exception:  # a body the lift will refuse anyway: no application
        logger.debug("telos_wrap: no fleet application for this request", exc_info=True)
        return None


def namespace(isolation: str | None, tenant: str | None = None) -> str:
    """The fleet namespace within a store: a digest of the call's tenant signals (``tenant``: the
    patch layer's ``identity.tenant_digest`` of the ``isolation`` hint and the client's credentials
    and base URL, already hashed), else of the ``isolation`` hint alone; ``"shared"`` with neither.
    Never a signal in clear."""
    if tenant:
        material = f"tenant\x00{tenant}".encode("utf-8", "surrogatepass")
    elif isolation:
        material = f"isolation\x00{isolation}".encode("utf-8", "surrogatepass")
    else:
        return "shared"
    return hashlib.blake2b(material, digest_size=16).hexdigest()


def fleet_id(space: str, template: str) -> str:
    """The pseudo-session id whose ``FACTS`` blob holds the facts of ``template`` in ``space``."""
    return f"{FLEET_PREFIX}{space}:{template}"


# -- the facts ---------------------------------------------------------------------------------------

#: What ``re.escape`` escapes (a backslash before anything else is not a literal).
_ESCAPED = frozenset("()[]{}?*+-|^$\\.&~# \t\n\r\v\f")
_SPECIAL = frozenset(".^$*+?{}[]\\|()")
_HOLE = r"\S+"


def _skeleton_pieces(pattern: str) -> list[str] | None:
    """The literal pieces of a line skeleton (``volatility.skeleton_regex``: escaped or plain literal
    characters and ``\\S+`` holes, with whitespace between two holes), or ``None`` for anything else."""
    pieces: list[str] = []
    current: list[str] = []
    i, hole = 0, False  # a hole since the last literal whitespace
    while i < len(pattern):
        if pattern.startswith(_HOLE, i):
            if hole:
                return None
            pieces.append("".join(current))
            current.clear()
            hole = True
            i += len(_HOLE)
            continue
        char = pattern[i]
        if char == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1] not in _ESCAPED:
                return None
            char = pattern[i + 1]
            i += 2
        elif char in _SPECIAL:
            return None
        else:
            i += 1
        current.append(char)
        hole = hole and not char.isspace()
    pieces.append("".join(current))
    return pieces


def _skeleton_ok(pattern: str | None) -> bool:
    """A well-formed skeleton with no value in its literal text (``None``: the block's edge)."""
    if pattern is None:
        return True
    if len(pattern) > MAX_PATTERN:
        return False
    pieces = _skeleton_pieces(pattern)
    return pieces is not None and all(VALUE.search(piece) is None for piece in pieces)


@dataclass(frozen=True, slots=True)
class Fact:
    """What a conversation learned about its template, without its text: where a unit that was seen
    to change sits, described by the *skeletons* (``volatility.skeleton_regex``: the line's text
    with ``\\S+`` for each value) of the lines around it.

    Attributes:
        kind: how it was learned (``value`` / ``list`` at the first change, ``lines`` / ``region``
            at the second).
        block: the system block.
        lines: how many lines the unit had.
        learned_at: the request of the conversation that learned it.
        before / after: the skeleton of the line before / after the unit; ``None`` where the unit
            starts / ends the block.
        own: the skeleton of the unit's one line (a ``value`` unit), else ``None``.
    """

    kind: SpanKind
    block: int
    lines: int
    learned_at: int
    before: str | None
    after: str | None
    own: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "block": self.block,
            "lines": self.lines,
            "learned_at": self.learned_at,
            "before": self.before,
            "after": self.after,
            "own": self.own,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fact | None:
        """The fact of a stored record, or ``None`` if it is malformed (never raises)."""
        if not isinstance(data, Mapping):
            return None
        kind, block, lines, at = (
            data.get("kind"),
            data.get("block"),
            data.get("lines"),
            data.get("learned_at"),
        )
        texts = [data.get(name) for name in ("before", "after", "own")]
        if kind not in _SHARED_KINDS or not all(type(v) is int for v in (block, lines, at)):
            return None
        if not all(text is None or isinstance(text, str) for text in texts) or not all(
            map(_skeleton_ok, texts)
        ):
            return None
        assert isinstance(block, int) and isinstance(lines, int) and isinstance(at, int)
        if not (0 <= block < 64 and 0 < lines <= MAX_SPAN_LINES and at >= 0):
            return None
        before, after, own = texts
        return cls(kind, block, lines, at, before, after, own)

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.kind, self.block, self.before, self.after, self.own)


def facts_of(view: Sequence[str | None], learned: Sequence[VolatileSpan]) -> tuple[Fact, ...]:
    """The facts to share of the spans ``learned`` on the lifted system segment ``view`` (pure):
    spans this conversation learned from what it saw change, described without their text."""
    facts: list[Fact] = []
    for span in learned:
        if span.origin or span.kind not in _SHARED_KINDS or span.block >= len(view):
            continue
        text = view[span.block]
        if text is None or text.startswith("\x00"):
            continue
        lines = text.split("\n")
        first, last = span.line, span.line + span.lines - 1
        if not 0 <= first <= last < len(lines):
            continue
        fact = Fact(
            span.kind,
            span.block,
            span.lines,
            span.learned_at,
            skeleton_regex(lines[first - 1]) if first > 0 else None,
            skeleton_regex(lines[last + 1]) if last < len(lines) - 1 else None,
            skeleton_regex(lines[first]) if span.kind == "value" and span.lines == 1 else None,
        )
        if all(_skeleton_ok(t) for t in (fact.before, fact.after, fact.own)):
            facts.append(fact)
    return tuple(facts)


def encode(facts: Iterable[Fact], prints: Sequence[str] = (), reached: Lengths | None = None) -> str:
    """The stored text of an application's facts (JSON, never pickle), the shape of one of its
    system prompts (``fleet_shape.prints``: digests, no text) when known, and how long its
    conversations ran (``lengths.Lengths``: counts) when known."""
    data: dict[str, Any] = {"v": _VERSION, "facts": [fact.to_json() for fact in facts]}
    if prints:
        data["prints"] = list(prints)
    if reached:
        data["reached"] = reached.to_json()
    return canonical_json(data)


def decode_entry(text: str | None) -> tuple[tuple[Fact, ...], tuple[str, ...], Lengths]:
    """``(facts, prints, lengths)`` of a stored text (``decode``; ``fleet_shape.decode_prints``;
    ``lengths.Lengths.from_json``): anything malformed reads as none; never raises."""
    if not text or len(text) > MAX_ENTRY:
        return (), (), Lengths()
    try:
        data = json.loads(text)
    except ValueError:
        return (), (), Lengths()
    if not isinstance(data, dict) or data.get("v") != _VERSION:
        return (), (), Lengths()
    return decode(text), decode_prints(data), Lengths.from_json(data.get("reached"))


def decode(text: str | None) -> tuple[Fact, ...]:
    """The well-formed facts of a stored text; anything malformed is skipped (never raises)."""
    if not text or len(text) > MAX_ENTRY:
        return ()
    try:
        data = json.loads(text)
    except ValueError:
        return ()
    facts = data.get("facts") if isinstance(data, dict) and data.get("v") == _VERSION else None
    found: dict[tuple[Any, ...], Fact] = {}
    for record in facts if isinstance(facts, list) else ():
        fact = Fact.from_json(record)
        if fact is not None:
            found.setdefault(fact.key, fact)
        if len(found) >= MAX_FACTS:
            break
    return tuple(found.values())


_TOKEN = r"\ "  # an escaped space: where ``volatility.skeleton_regex`` separates a line's words


def _generalized(one: str | None, other: str | None) -> str | None:
    """One neighbour skeleton that fits both lines, their words that differ made ``\\S+`` holes
    (same number of words, at least one word kept), or ``None``."""
    if one is None or other is None:
        return None
    words, others = one.split(_TOKEN), other.split(_TOKEN)
    if len(words) != len(others):
        return None
    kept = [word if word == theirs else _HOLE for word, theirs in zip(words, others, strict=True)]
    if all(word in (_HOLE, "") for word in kept):
        return None
    result = _TOKEN.join(kept)
    return result if _skeleton_ok(result) else None


def _joined(known: Fact, new: Fact) -> Fact | None:
    """``known`` with what ``new`` differs in generalized (``_generalized``), when both say where one
    unit sits (same kind and block) in two conversations whose prompts differ there in words (a
    user's name in the line before it, or in its own line): at most two of its own line and its two
    neighbours differ, each generalizes, and its own line keeps at least half of its words."""
    if (known.kind, known.block) != (new.kind, new.block):
        return None
    pairs = ((known.own, new.own), (known.before, new.before), (known.after, new.after))
    differ = [one != other for one, other in pairs]
    if not any(differ) or all(differ):
        return None
    own, before, after = (
        one if not changed else _generalized(one, other)
        for (one, other), changed in zip(pairs, differ, strict=True)
    )
    if any(changed and value is None for value, changed in zip((own, before, after), differ, strict=True)):
        return None
    if own is not None and known.own is not None and differ[0]:
        words = own.split(_TOKEN)
        if 2 * sum(word != _HOLE for word in words) < len(words):
            return None
    return replace(known, own=own, before=before, after=after)


def merged(known: Sequence[Fact], new: Iterable[Fact]) -> tuple[Fact, ...]:
    """The union of ``known`` and ``new``, the known ones first, capped at ``MAX_FACTS``. A new fact
    that says where a known one's unit sits, in a conversation whose neighbouring line differs in
    words, generalizes that neighbour instead (``_joined``): what two conversations' prompts
    differ in is never kept as a literal of the application's facts."""
    found = {fact.key: fact for fact in known}
    for fact in new:
        if fact.key in found:
            continue
        for key, old in list(found.items()):
            joined = _joined(old, fact)
            if joined is not None:
                found = {
                    (joined.key if k == key else k): (joined if k == key else v) for k, v in found.items()
                }
                break
        else:
            found[fact.key] = fact
    return tuple(found.values())[:MAX_FACTS]


# -- use ---------------------------------------------------------------------------------------------


class _Text:
    """A block's text and where each of its lines starts (to find lines in one pass of a regex)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0, *(found.end() for found in re.finditer("\n", text))]

    def matching(self, pattern: str) -> list[int]:
        """The lines that ``pattern`` matches whole (one pass over the text, not one per line)."""
        rx = re.compile(f"^(?:{pattern})$", re.MULTILINE)
        return sorted(
            {bisect.bisect_right(self.starts, found.start()) - 1 for found in rx.finditer(self.text)}
        )


def _place(fact: Fact, lines: _Text) -> tuple[int, int] | None:
    """Where ``fact``'s unit is in ``lines``: its one line (a ``value``), or the one run between a line
    of skeleton ``before`` (or the block's start) and the next line of skeleton ``after`` (or the
    block's end); ``None`` unless exactly one place fits."""
    last_line = len(lines.starts) - 1
    if fact.own is not None:
        found = lines.matching(fact.own)
        if len(found) > 1:  # several lines of that skeleton: the one between the same neighbours
            before = set(lines.matching(fact.before)) if fact.before is not None else None
            after = set(lines.matching(fact.after)) if fact.after is not None else None
            found = [
                n
                for n in found
                if (n == 0 if before is None else n - 1 in before)
                and (n == last_line if after is None else n + 1 in after)
            ]
        return (found[0], found[0]) if len(found) == 1 else None
    starts = [0] if fact.before is None else [n + 1 for n in lines.matching(fact.before)]
    ends = [last_line] if fact.after is None else [n - 1 for n in lines.matching(fact.after)]
    places = []
    for start in starts:
        end = next((end for end in ends if end >= start), None)
        if end is not None and end - start + 1 <= MAX_SPAN_LINES:
            places.append((start, end))
    return places[0] if len(places) == 1 else None


def _adopt_one(view: Sequence[str | None], fact: Fact) -> VolatileSpan | None:
    """The span this conversation would have learned for ``fact``'s unit on its own text, if the unit is
    found exactly once, is whole as it is, and its pattern cuts nothing in another block."""
    if fact.block >= len(view):
        return None
    text = view[fact.block]
    if text is None or text.startswith("\x00"):
        return None
    place = _place(fact, _Text(text))
    if place is None:
        return None
    first, last = place
    span = unit_span(fact.block, text, first, last, fact.learned_at, fact.kind)
    if span is None or (span.line, span.lines) != (first, last - first + 1):
        return None
    rx = re.compile(span.pattern, re.MULTILINE)
    for number, other in enumerate(view):
        if number != fact.block and other is not None and not other.startswith("\x00") and rx.search(other):
            return None
    return replace(span, origin="fleet")


def adopt(view: Sequence[str | None], facts: Sequence[Fact]) -> tuple[VolatileSpan, ...]:
    """The spans ``facts`` give on this lifted system segment ``view``, layer by layer in the order they
    were learned (each layer on the text the earlier ones left), as ``fleet`` spans. Pure; the
    caller still checks that the lift cuts exactly this (``run_turn``)."""
    current = tuple(view)
    adopted: list[VolatileSpan] = []
    ordered = sorted(facts, key=lambda fact: fact.learned_at)
    for _, group in itertools.groupby(ordered, key=lambda fact: fact.learned_at):
        layer: list[VolatileSpan] = []
        for fact in group:
            span = _adopt_one(current, fact)
            if span is not None and all(span.pattern != s.pattern for s in (*adopted, *layer)):
                layer.append(span)
        if layer:
            current = tuple(t for t in expected_view(current, layer) if t != "")
            adopted.extend(layer)
    return tuple(adopted)


def expected_layers(view: Sequence[str | None], spans: Sequence[VolatileSpan]) -> tuple[str | None, ...]:
    """``view`` with ``spans`` cut layer by layer (by ``learned_at``), emptied blocks gone."""
    current = tuple(view)
    for _, group in itertools.groupby(spans, key=lambda span: span.learned_at):
        current = tuple(t for t in expected_view(current, list(group)) if t != "")
    return current
