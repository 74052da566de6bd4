"""Fleet learning: what one conversation learns about its application's system prompt serves the next.

A conversation learns which system lines are volatile (``volatility.py``) the first time they change,
and pays one cache break for it. Every conversation of the same application pays that break again.
Fleet learning records what a conversation learned — where its volatile units sit, as *facts* — in
the session store, under the tenant's namespace, and offers them to every new conversation of the
same application: it starts with those that fit its own prompt exactly, each verified before use.

* **The application** (``application_key``, issue 42): a keyed digest of the API the prompt is sent
  on (block numbering differs between ``system``, system messages and ``instructions``), the number
  of system blocks, the tool names, and the opening line of the last system block (values masked).
  Two assistants that share a trailing policy but not their opening are two applications; one
  assistant whose prompts name their user after the opening line is one. A prompt with fewer than
  ``MIN_TEMPLATE`` characters of value-free text has no application (too little to share).
* **The facts** (``Fact``, ``facts_of``): the units a conversation saw change **between two
  consecutive requests of its own** (the later request's messages extend the earlier one's; a span
  learned otherwise is ``local`` and never shared, whatever the session id says: one id misused for
  two customers teaches the fleet nothing) — a live value or a list at its first change, a run of
  lines at its second. Never a suspect, never a span learned on sight (``present``), never one
  adopted from the fleet. A fact holds no text and no pattern: the *token prints*
  (``digests.token_print``: a keyed digest per token of a line's skeleton, values masked) of the
  unit's own lines and of the line before and after it (or the block's edge), its kind, block, line
  count, the request that learned it, and its contributors (keyed digests of session ids).
* **How long its conversations run** (``lengths.Lengths``, the entry's ``reached``): counts only.
* **Where** (``fleet_id``): one blob (``FACTS``) of a pseudo-session ``telos-fleet:<namespace>:<app>``
  in the session's own store (a ``RedisStore`` key ``P{telos-fleet:…}:blobs``: one key, one hash
  slot; its TTL is the store's, renewed by each publish). ``namespace`` is a digest of the call's
  tenant signals; the digests are keyed by it (``digests.space_key``), so one tenant's digests say
  nothing in another and cannot be tested against guesses without the tenant's credentials.
* **Merging** (``merged``): a fact that says where a known fact's unit sits (same kind, block and
  size) in a prompt whose own line or neighbour differs in words — another user's name — makes the
  differing tokens holes of the known fact instead of a second fact (at most two of its own lines
  and two neighbours differ; each own line keeps half of its tokens, each neighbour one).
* **Use** (``adopt``, ``place``): at a conversation's first request, a fact is placed on this
  prompt's lifted system segment only where its own lines fit (token by token, same size — a list
  any run of its items), its neighbours fit, and exactly one place does (an anchor with holes that
  fits two lines fits none); the conversation then describes the unit as it would have learned it
  itself (``volatility.unit_span``: whole, found by its own digests) and it must be found in no
  other block. ``run_turn`` then verifies that the lift cuts exactly that. Facts read from the store
  are untrusted: malformed records are skipped; nothing read is compiled or run.
* **Erasure** (``Entry.without``, ``fleet_io.erase``): every fact a contributor taught goes whole
  (its holes may come from that contributor's text), and the prompt shape it stored.

Why one module, over 500 lines: the facts' format, merging and placing are one contract (what
``facts_of`` writes is what ``Fact.from_json`` accepts, ``merged`` generalizes and ``place``
finds). Everything here is pure; the store I/O (fail open) is ``fleet_io.py``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from telos_wrap.ir.canon import canonical_json
from telos_wrap.ir.model import Api
from telos_wrap.lift.user_split import DEFAULT_PATTERNS, split_text
from telos_wrap.sessions.durable.records import SpanKind, VolatileSpan
from telos_wrap.sessions.learning.digests import (
    EDGE_AFTER,
    EDGE_BEFORE,
    HOLE,
    SHARED_KEY,
    BlockLines,
    block_lines,
    contributor_digest,
    is_contributor,
    is_token_print,
    skeleton,
    space_key,
)
from telos_wrap.sessions.learning.fleet_shape import decode_prints, digit_free
from telos_wrap.sessions.learning.lengths import Lengths
from telos_wrap.sessions.learning.spans import locate
from telos_wrap.sessions.learning.volatility import MAX_SPAN_LINES, expected_view, unit_span

__all__ = [
    "FACTS",
    "MAX_BY",
    "MAX_FACTS",
    "MIN_TEMPLATE",
    "Entry",
    "Fact",
    "adopt",
    "application_key",
    "contributor",
    "decode",
    "decode_entry",
    "encode",
    "facts_of",
    "fleet_id",
    "namespace",
    "on_uncut_view",
    "one_layer",
    "place",
    "system_pin_texts",
    "template_key",
    "with_contributor",
]

logger = logging.getLogger("telos_wrap.sessions")

#: The blob key of a template's facts in its pseudo-session.
FACTS = "facts"
FLEET_PREFIX = "telos-fleet:"
#: Facts kept per application.
MAX_FACTS = 16
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
    return _template(api, body, drop_patterns)[0]


def _template(
    api: Api, body: Mapping[str, Any], drop_patterns: Sequence[str] = ()
) -> tuple[str | None, list[str]]:
    """``template_key`` and the system prompt's PIN text per block (``system_pin_texts``), in one
    pass over the text. Never raises: a body the lift will refuse anyway has no template."""
    try:
        patterns = DEFAULT_PATTERNS.extended(drop=drop_patterns) if drop_patterns else DEFAULT_PATTERNS
        digest = hashlib.blake2b(digest_size=16)
        stable = 0
        texts = _system_texts(api, body)
        pins = []
        digest.update(f"{len(texts)}\x00".encode())
        for text in texts:
            pin = split_text(text, patterns, with_fold=False).pin
            pins.append(pin)
            # One pass over the text (a prompt of 5,000 timestamped lines costs no per-line scan); a
            # text with no digit at all is every line of it (a 1 MB one-line prompt: no regex scan).
            lines = (
                pin.split("\n")
                if digit_free(pin)
                else (found.group() for found in _NO_DIGIT_LINE.finditer(pin))
            )
            for line in lines:
                if line.strip():
                    stable += len(line.strip())
                    digest.update(line.encode("utf-8", "surrogatepass") + b"\n")
            digest.update(b"\x00")
        return (digest.hexdigest() if stable >= MIN_TEMPLATE else None), pins
    except Exception:  # a body the lift will refuse anyway: no template
        logger.debug("telos_wrap: no fleet template for this request", exc_info=True)
        return None, []


def _lines(text: str) -> Iterable[str]:
    """The lines of ``text``, lazily (only the first few are read)."""
    start = 0
    while True:
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start:end]
        start = end + 1


#: Opening lines of the system prompt (non-blank, values masked) that name an application.
OPENING_LINES = 1
#: Characters of an opening line that count (a 1 MB one-line prompt is not masked whole per call).
OPENING_CHARS = 512


def application_key(
    api: Api, body: Mapping[str, Any], drop_patterns: Sequence[str] = (), space: str = "shared"
) -> str | None:
    """The fleet pool of ``body`` within its tenant's namespace ``space`` (see module docstring): a
    keyed digest of the API it is sent on, the number of its system blocks, its tool names, and the
    opening line of its last system block, values masked (the last: a harness that gives a clock
    or a date, ``Today is Monday …``, a block of its own puts it first); ``None`` when its
    system prompt has fewer than ``MIN_TEMPLATE`` characters of value-free text (too little to share anything
    about). Two assistants that share a policy but not their opening are two applications; one
    assistant whose prompts name their user after the opening line is one. Never raises.
    """
    try:
        template, texts = _template(api, body, drop_patterns)
        if template is None:
            return None
        opening = list(
            itertools.islice(
                (
                    skeleton(line[:OPENING_CHARS]).strip()
                    for line in _lines(texts[-1] if texts else "")
                    if line.strip()
                ),
                OPENING_LINES,
            )
        )
        tools = body.get("tools")
        names = sorted(
            str(tool.get("name") or (tool.get("function") or {}).get("name") or "")
            for tool in (tools if isinstance(tools, list) else ())
            if isinstance(tool, Mapping)
        )
        material = canonical_json(["app", api, len(texts), names, opening])
        return hashlib.blake2b(
            material.encode("utf-8", "surrogatepass"), key=space_key(space), digest_size=16
        ).hexdigest()
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

#: Contributors remembered per fact (a session that publishes a fact already held by this many
#: others is not added: nothing of its own is in it).
MAX_BY = 32


def contributor(key: bytes, session_id: str) -> str:
    """The keyed digest that names session ``session_id`` as a fact's contributor (``key``: the
    namespace's, ``digests.space_key``)."""
    return contributor_digest(key, session_id)


def _print_ok(value: object, edge: str) -> bool:
    return value == edge or is_token_print(value)


@dataclass(frozen=True, slots=True)
class Fact:
    """What a conversation learned about its application, without its text: a unit that was seen to
    change within one conversation, described by the token prints (``digests.token_print``: keyed
    digests of the tokens of each line's skeleton, holes where conversations differ) of its own
    lines and of the lines around it.

    Attributes:
        kind: how it was learned (``value`` / ``list`` at the first change, ``lines`` / ``region``
            at the second).
        block: the system block.
        lines: how many lines the unit had (a fact fits only a unit of that size).
        learned_at: the request of the conversation that learned it.
        before / after: the token print of the line before / after the unit; ``"^"`` / ``"$"``
            where the unit starts / ends the block.
        own: the token print of each of the unit's lines.
        by: the contributors (``contributor``: keyed digests of session ids) whose conversations
            taught it (``erase`` removes the facts a session contributed to).
    """

    kind: SpanKind
    block: int
    lines: int
    learned_at: int
    before: str
    after: str
    own: tuple[str, ...]
    by: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The fact as an application's stored entry holds it (``encode``): token prints and contributor
        digests, never text; ``from_json`` reads it back."""
        return {
            "kind": self.kind,
            "block": self.block,
            "lines": self.lines,
            "learned_at": self.learned_at,
            "before": self.before,
            "after": self.after,
            "own": list(self.own),
            "by": list(self.by),
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
        before, after, own, by = data.get("before"), data.get("after"), data.get("own"), data.get("by", [])
        if kind not in _SHARED_KINDS or not all(type(v) is int for v in (block, lines, at)):
            return None
        assert isinstance(block, int) and isinstance(lines, int) and isinstance(at, int)
        if not (0 <= block < 64 and 0 < lines <= MAX_SPAN_LINES and at >= 0):
            return None
        if not (_print_ok(before, EDGE_BEFORE) and _print_ok(after, EDGE_AFTER)):
            return None
        if not isinstance(own, list) or len(own) != lines or not all(map(is_token_print, own)):
            return None
        if not isinstance(by, list) or len(by) > MAX_BY or not all(map(is_contributor, by)):
            return None
        assert isinstance(before, str) and isinstance(after, str)
        return cls(kind, block, lines, at, before, after, tuple(own), tuple(by))

    @property
    def key(self) -> tuple[Any, ...]:
        """Everything but the contributors: two facts with one key say the same thing, so an entry keeps one
        of them and joins their ``by`` (``merged``, ``decode``)."""
        return (self.kind, self.block, self.lines, self.before, self.after, self.own)


def facts_of(
    view: Sequence[str | None], learned: Sequence[VolatileSpan], key: bytes = SHARED_KEY
) -> tuple[Fact, ...]:
    """The facts to share of the spans ``learned`` on the lifted system segment ``view`` (pure):
    spans this conversation learned from what it saw change between two of its consecutive
    requests (not ``local``, not adopted, not learned on sight), described by keyed digests."""
    facts: list[Fact] = []
    for span in learned:
        if span.origin or span.local or span.kind not in _SHARED_KINDS or span.block >= len(view):
            continue
        text = view[span.block]
        if text is None or text.startswith("\x00"):
            continue
        lines = block_lines(key, text)
        first, last = span.line, span.line + span.lines - 1
        if not 0 <= first <= last < len(lines.lines) or span.lines > MAX_SPAN_LINES:
            continue
        before = EDGE_BEFORE if first == 0 else lines.tokens(first - 1)
        after = EDGE_AFTER if last == len(lines.lines) - 1 else lines.tokens(last + 1)
        own = tuple(lines.tokens(n) for n in range(first, last + 1))
        facts.append(Fact(span.kind, span.block, span.lines, span.learned_at, before, after, own))
    return tuple(facts)


def with_contributor(facts: Iterable[Fact], by: str) -> tuple[Fact, ...]:
    """``facts`` naming ``by`` as their contributor."""
    return tuple(replace(fact, by=(by,)) for fact in facts)


def encode(
    facts: Iterable[Fact],
    prints: Sequence[str] = (),
    reached: Lengths | None = None,
    prints_by: str = "",
) -> str:
    """The stored text of an application's facts (JSON, never pickle), the shape of one of its
    system prompts (``fleet_shape.prints``: digests, no text) and its contributor when known, and
    how long its conversations ran (``lengths.Lengths``: counts) when known."""
    data: dict[str, Any] = {"v": _VERSION, "facts": [fact.to_json() for fact in facts]}
    if prints:
        data["prints"] = list(prints)
        if prints_by:
            data["prints_by"] = prints_by
    if reached:
        data["reached"] = reached.to_json()
    return canonical_json(data)


@dataclass(frozen=True, slots=True)
class Entry:
    """An application's stored entry: its facts, one prompt's shape (and who contributed it), lengths."""

    facts: tuple[Fact, ...] = ()
    prints: tuple[str, ...] = ()
    lengths: Lengths = field(default_factory=Lengths)
    prints_by: str = ""

    def encode(self) -> str:
        """The stored text of this entry (module function ``encode`` of its parts), what ``decode_entry``
        reads back."""
        return encode(self.facts, self.prints, self.lengths, self.prints_by)

    def without(self, by: str) -> Entry:
        """This entry without anything contributor ``by`` taught (a fact it contributed to goes whole:
        its holes may come from ``by``'s text)."""
        facts = tuple(fact for fact in self.facts if by not in fact.by)
        if self.prints_by == by:
            return Entry(facts, (), self.lengths, "")
        return replace(self, facts=facts)


def decode_entry(text: str | None) -> Entry:
    """The entry of a stored text (``decode``; ``fleet_shape.decode_prints``;
    ``lengths.Lengths.from_json``): anything malformed reads as none; never raises."""
    if not text or len(text) > MAX_ENTRY:
        return Entry()
    try:
        data = json.loads(text)
    except ValueError:
        return Entry()
    if not isinstance(data, dict) or data.get("v") != _VERSION:
        return Entry()
    by = data.get("prints_by", "")
    return Entry(
        decode(text),
        decode_prints(data),
        Lengths.from_json(data.get("reached")),
        by if is_contributor(by) else "",
    )


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


def _generalized(one: str, other: str, keep_half: bool) -> str | None:
    """One token print that fits both lines, the tokens that differ made holes (same number of
    tokens; at least one token kept, or half of them with ``keep_half``), or ``None``."""
    if one == other:
        return one
    if one in (EDGE_BEFORE, EDGE_AFTER, "-") or other in (EDGE_BEFORE, EDGE_AFTER, "-"):
        return None
    words, others = one.split("."), other.split(".")
    if len(words) != len(others):
        return None
    kept = [word if word == theirs else HOLE for word, theirs in zip(words, others, strict=True)]
    solid = sum(word != HOLE for word in kept)
    if solid == 0 or (keep_half and 2 * solid < len(kept)):
        return None
    return ".".join(kept)


def _joined(known: Fact, new: Fact) -> Fact | None:
    """``known`` with what ``new`` differs in generalized (``_generalized``), when both say where one
    unit of one size sits (same kind, block and line count) in two conversations whose prompts
    differ there in words (a user's name in the line before it, or in its own line): at most two of
    its own lines and its two neighbours differ, each generalizes, and each of its own lines keeps at
    least half of its tokens."""
    if (known.kind, known.block, known.lines) != (new.kind, new.block, new.lines):
        return None
    differ = [known.own != new.own, known.before != new.before, known.after != new.after]
    if not any(differ) or all(differ):
        return None
    own = tuple(_generalized(a, b, True) for a, b in zip(known.own, new.own, strict=True))
    before = _generalized(known.before, new.before, False)
    after = _generalized(known.after, new.after, False)
    if before is None or after is None or any(line is None for line in own):
        return None
    by = tuple(dict.fromkeys((*known.by, *new.by)))[:MAX_BY]
    return replace(
        known, own=tuple(line for line in own if line is not None), before=before, after=after, by=by
    )


def merged(known: Sequence[Fact], new: Iterable[Fact]) -> tuple[Fact, ...]:
    """The union of ``known`` and ``new``, the known ones first, capped at ``MAX_FACTS``. A new fact
    already known adds its contributor; one that says where a known one's unit sits, in a
    conversation whose lines differ there in words, generalizes them instead (``_joined``): what two
    conversations' prompts differ in is never kept of the application's facts."""
    found = {fact.key: fact for fact in known}
    for fact in new:
        if fact.key in found:
            old = found[fact.key]
            by = tuple(dict.fromkeys((*old.by, *fact.by)))
            if len(by) <= MAX_BY:
                found[fact.key] = replace(old, by=by)
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


def _anchor_fits(lines: BlockLines, number: int, printed: str) -> bool:
    if printed == EDGE_BEFORE:
        return number == -1
    if printed == EDGE_AFTER:
        return number == len(lines.lines)
    return 0 <= number < len(lines.lines) and lines.fits(number, printed)


def _unique_anchor(lines: BlockLines, printed: str) -> bool:
    """An anchor with holes must fit one line of the block (holes that fit many places fit none)."""
    if printed in (EDGE_BEFORE, EDGE_AFTER) or HOLE not in printed.split("."):
        return True
    return sum(lines.fits(n, printed) for n in range(len(lines.lines))) == 1


def place(fact: Fact, lines: BlockLines) -> tuple[int, int] | None:
    """Where ``fact``'s unit is on ``lines``: the one run of ``fact.lines`` lines whose token prints
    fit the fact's own lines, after a line that fits ``before`` (or at the block's start) and before
    one that fits ``after`` (or at its end); ``None`` unless exactly one place fits."""
    if not (_unique_anchor(lines, fact.before) and _unique_anchor(lines, fact.after)):
        return None
    if fact.kind == "list":
        return _place_list(fact, lines)
    size = fact.lines
    places = [
        start
        for start in range(len(lines.lines) - size + 1)
        if all(lines.fits(start + i, fact.own[i]) for i in range(size))
        and _anchor_fits(lines, start - 1, fact.before)
        and _anchor_fits(lines, start + size, fact.after)
    ]
    return (places[0], places[0] + size - 1) if len(places) == 1 else None


def _place_list(fact: Fact, lines: BlockLines) -> tuple[int, int] | None:
    """A list's items come and go: the one run of at most ``MAX_SPAN_LINES`` lines between its
    anchors whose every line fits one of the items seen (``fact.own``)."""
    count = len(lines.lines)
    starts = (
        [0] if fact.before == EDGE_BEFORE else [n + 1 for n in range(count) if lines.fits(n, fact.before)]
    )
    places = []
    for start in starts:
        end = start
        while (
            end < count and end - start < MAX_SPAN_LINES and any(lines.fits(end, item) for item in fact.own)
        ):
            end += 1
        if end > start and _anchor_fits(lines, end, fact.after):
            places.append((start, end - 1))
    return places[0] if len(places) == 1 else None


def _adopt_one(view: Sequence[str | None], fact: Fact, key: bytes) -> VolatileSpan | None:
    """The span this conversation would have learned for ``fact``'s unit on its own text, if the unit is
    found exactly once (its own lines, its size, its neighbours), is whole as it is, and is found
    in no other block."""
    if fact.block >= len(view):
        return None
    text = view[fact.block]
    if text is None or text.startswith("\x00"):
        return None
    found = place(fact, block_lines(key, text))
    if found is None:
        return None
    first, last = found
    span = unit_span(fact.block, text, first, last, fact.learned_at, fact.kind, key)
    if span is None or (span.line, span.lines) != (first, last - first + 1):
        return None
    for number, other in enumerate(view):
        if (
            number != fact.block
            and other is not None
            and not other.startswith("\x00")
            and locate(span, block_lines(key, other)) is not None
        ):
            return None
    return replace(span, origin="fleet")


def adopt(
    view: Sequence[str | None], facts: Sequence[Fact], key: bytes = SHARED_KEY
) -> tuple[VolatileSpan, ...]:
    """The spans ``facts`` give on this lifted system segment ``view`` (a conversation's first request:
    nothing cut yet), as ``fleet`` spans: facts are described on the text before any cut
    (``facts_of``), so they are all placed on ``view`` itself, as one layer (``one_layer``); a fact
    whose lines overlap those of one placed before it is left out. Pure; the caller still checks
    that the lift cuts exactly this (``run_turn``)."""
    adopted: list[VolatileSpan] = []
    taken: set[tuple[int, int]] = set()
    for fact in sorted(facts, key=lambda fact: fact.learned_at):
        span = _adopt_one(view, fact, key)
        if span is None or any(span.where == other.where for other in adopted):
            continue
        lines = {(span.block, span.line + n) for n in range(span.lines)}
        if lines & taken:
            continue
        taken |= lines
        adopted.append(span)
    return tuple(adopted)


def on_uncut_view(
    cut: Sequence[str | None],
    uncut: Sequence[str | None],
    spans: Sequence[VolatileSpan],
    key: bytes = SHARED_KEY,
) -> tuple[VolatileSpan, ...]:
    """``spans``, learned on the system segment ``cut`` (what earlier learned spans left), placed on
    ``uncut``, the same request's segment before any learned cut (what a conversation's first request
    shows and ``facts_of`` describes): each where it is found (``spans.locate``) in exactly one block
    of ``uncut`` with the very lines it covers on ``cut``. A span found nowhere, or twice, is left out
    (it is then not shared). Pure."""
    placed: list[VolatileSpan] = []
    for span in spans:
        if span.block >= len(cut):
            continue
        text = cut[span.block]
        if text is None or text.startswith("\x00"):
            continue
        own = text.split("\n")[span.line : span.line + span.lines]
        found = []
        for number, other in enumerate(uncut):
            if other is None or other.startswith("\x00"):
                continue
            where = locate(span, block_lines(key, other))
            if where is not None:
                found.append((number, where, other))
        if len(found) != 1:
            continue
        number, (first, last), other = found[0]
        if other.split("\n")[first : last + 1] != own or len(own) != span.lines:
            continue
        placed.append(replace(span, block=number, line=first))
    return tuple(placed)


def one_layer(spans: Sequence[VolatileSpan]) -> bool:
    """Whether ``spans`` are applied by the lift as one layer: spans adopted from the fleet are."""
    return all(span.origin == "fleet" for span in spans)


def expected_layers(
    view: Sequence[str | None], spans: Sequence[VolatileSpan], key: bytes = SHARED_KEY
) -> tuple[str | None, ...]:
    """``view`` with ``spans`` cut layer by layer (by ``learned_at``; spans adopted from the fleet are
    one layer, ``one_layer``), emptied blocks gone."""
    current = tuple(view)
    if one_layer(spans):
        return tuple(t for t in expected_view(current, spans, key) if t != "")
    for _, group in itertools.groupby(spans, key=lambda span: span.learned_at):
        current = tuple(t for t in expected_view(current, list(group), key) if t != "")
    return current
