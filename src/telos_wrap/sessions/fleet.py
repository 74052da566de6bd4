"""Fleet learning: what one conversation learns about its application's system prompt serves the next.

A conversation learns which system lines are volatile (``volatility.py``) the first time they change,
and pays one cache break for it. Every conversation of the same application pays that break again.
Fleet learning records the *facts* a conversation learned — its learned span records — in the
session store, under the application's namespace and the system prompt's *template*, and offers them
to every new conversation whose system prompt has the same template: it starts with them as
pre-learned spans, each verified on its own prompt before use.

* **The template** (``template_key``): a digest of the number of system blocks and, per block, its
  lines that carry no value (``volatility.VALUE``: no digit-bearing token), in order. Two
  conversations of one application whose system prompts differ only in values (a clock, a job list,
  counts, ids) have one template; another application, or a prompt edited in words, has another.
  A prompt with fewer than ``MIN_TEMPLATE`` characters of value-free text has no template (it is
  too little to tell applications apart): nothing is shared for it.
* **The facts**: spans this conversation learned because it *saw them change* — a live value or a
  list at its first change, a run of lines at its second (``kind`` ``value``, ``list``, ``lines``,
  ``region``). Never a suspect (a one-off edit stays in its conversation until it changes again),
  never a span learned on sight (``present``: every conversation learns those on sight anyway),
  never a span adopted from the fleet (it is already there). A fact is a regular expression of the
  template's own text with ``\\S+`` holes for values, and its position: no literal text of it may
  hold a value (``_literals``), so no value and no conversation content (user, assistant or tool
  text: learning reads the system prompt only) is ever stored. At most ``MAX_FACTS`` per template,
  each at most ``MAX_PATTERN`` characters.
* **Where** (``fleet_id``): one blob (``FACTS``) of a pseudo-session ``telos-fleet:<namespace>:<template>``
  in the session's own store — so under that store's prefix (a ``RedisStore`` key
  ``P{telos-fleet:…}:blobs``: one key, one hash slot, cluster-safe; its TTL is the store's, renewed
  by each publish), bounded like every session of a ``MemoryStore`` (one process: an in-process
  fleet). ``namespace`` is a digest of the ``isolation`` hint: tenants that set it never share
  facts; without it the namespace is the store itself (docs/sessions.md, "Fleet learning").
* **Use** (``adopt``): at the first request a process prepares for a conversation that has made no
  request yet, each fact is checked on this prompt's lifted system segment, layer by layer as it was
  learned: its pattern must match exactly once in all the system text, in its own block, and cut
  exactly a whole unit there (whole lines, ``text_units.unit_of`` of those lines is themselves);
  any other fact is ignored. ``run_turn`` then verifies the lift cut exactly that, as it does for
  the conversation's own spans. Facts read from the store are untrusted: malformed entries are
  skipped, and a pattern is only compiled if it is made of what ``volatility`` itself writes
  (escaped literals, ``\\S+`` holes between whitespace, line / text anchors, look-arounds of
  literals, one of the two line bodies: ``_well_formed``), so a hostile regex never runs.

Store I/O here never breaks a call: it goes through the store's circuit breaker, and a failure is
counted by the breaker, logged at DEBUG and treated as "no facts" (fail open). Publishing merges by
union (capped) with a read and a write: two conversations publishing at the same moment may lose one
fact, which the next conversation that learns it publishes again.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from telos_wrap.ir.canon import canonical_json
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api
from telos_wrap.lift.text_units import regions, unit_of
from telos_wrap.lift.user_split import DEFAULT_PATTERNS, split_text
from telos_wrap.sessions.breaker import breaker_of
from telos_wrap.sessions.records import VolatileSpan
from telos_wrap.sessions.store import AsyncSessionStore, SessionStore
from telos_wrap.sessions.volatility import VALUE, expected_view

__all__ = [
    "FACTS",
    "MAX_FACTS",
    "MAX_PATTERN",
    "MIN_TEMPLATE",
    "adopt",
    "afacts_for",
    "alookup",
    "apublish",
    "apublish_learned",
    "decode",
    "encode",
    "facts_for",
    "fleet_id",
    "lookup",
    "namespace",
    "publish",
    "publish_learned",
    "publishable",
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
            for line in pin.split("\n"):
                if VALUE.search(line) is None and line.strip():
                    stable += len(line.strip())
                    digest.update(line.encode("utf-8", "surrogatepass") + b"\n")
            digest.update(b"\x00")
        return digest.hexdigest() if stable >= MIN_TEMPLATE else None
    except Exception:  # a body the lift will refuse anyway: no template
        logger.debug("telos_wrap: no fleet template for this request", exc_info=True)
        return None


def namespace(isolation: str | None) -> str:
    """The fleet namespace within a store: a digest of the ``isolation`` hint (never in clear)."""
    if not isolation:
        return "shared"
    material = f"isolation\x00{isolation}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(material, digest_size=16).hexdigest()


def fleet_id(space: str, template: str) -> str:
    """The pseudo-session id whose ``FACTS`` blob holds the facts of ``template`` in ``space``."""
    return f"{FLEET_PREFIX}{space}:{template}"


# -- the facts ---------------------------------------------------------------------------------------

#: The constructs ``volatility`` writes besides literals, longest first.
_BODIES = (r"^[^\n]*(?:\n[^\n]*)*?$", r"^[^\n]*$")
_TOKENS = (r"(?=\s*\Z)", r"\S+", r"\A", r"\Z", "^", "$")
#: What ``re.escape`` escapes (a backslash before anything else is not a literal).
_ESCAPED = frozenset("()[]{}?*+-|^$\\.&~# \t\n\r\v\f")
_SPECIAL = frozenset(".^$*+?{}[]\\|()")


def _literals(pattern: str) -> list[str] | None:
    """The literal pieces of ``pattern`` if it is made only of what ``volatility`` writes, else None.

    Allowed: escaped / plain literal characters, ``\\S+`` (with whitespace in the literal text
    between two of them: each hole stays within one token), ``^ $ \\A \\Z``, ``(?=\\s*\\Z)``,
    look-behind / look-ahead groups of literals only, and at most one of the two line bodies.
    """
    pieces: list[str] = []
    current: list[str] = []
    i, group, bodies, holes = 0, False, 0, 0
    last_hole = False  # a \S+ since the last literal with whitespace

    def flush() -> None:
        if current:
            pieces.append("".join(current))
            current.clear()

    while i < len(pattern):
        body = next((b for b in _BODIES if pattern.startswith(b, i)), None)
        if body is not None:
            if group or bodies:
                return None
            flush()
            bodies += 1
            i += len(body)
            continue
        token = next((t for t in _TOKENS if pattern.startswith(t, i)), None)
        if token is not None:
            if group:
                return None
            flush()
            if token == r"\S+":
                if last_hole:
                    return None
                holes += 1
                last_hole = True
            i += len(token)
            continue
        if pattern.startswith("(?<=", i) or pattern.startswith("(?=", i):
            if group:
                return None
            flush()
            group = True
            i += 4 if pattern.startswith("(?<=", i) else 3
            continue
        char = pattern[i]
        if char == ")" and group:
            flush()
            group = False
            i += 1
            continue
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
        if char.isspace():
            last_hole = False
    flush()
    return None if group else pieces


def _well_formed(span: VolatileSpan) -> bool:
    """A fact that may be compiled and shared: telos' own grammar, sizes capped, no value in it."""
    for text in (span.pattern, span.body) if span.body else (span.pattern,):
        if len(text) > MAX_PATTERN:
            return False
        pieces = _literals(text)
        if pieces is None or any(VALUE.search(piece) is not None for piece in pieces):
            return False
    return bool(span.pattern) and 0 <= span.block < 64 and span.line >= 0 and 0 < span.lines <= 64


def publishable(span: VolatileSpan) -> bool:
    """Whether ``span`` is a fact to share: learned here from what was seen to change, well formed."""
    return span.origin == "" and span.kind in _SHARED_KINDS and _well_formed(span)


def encode(spans: Iterable[VolatileSpan]) -> str:
    """The stored text of a template's facts (JSON, never pickle)."""
    facts = [span.to_json() for span in spans]
    return canonical_json({"v": _VERSION, "facts": facts})


def decode(text: str | None) -> tuple[VolatileSpan, ...]:
    """The well-formed facts of a stored text; anything malformed is skipped (never raises)."""
    if not text or len(text) > MAX_ENTRY:
        return ()
    try:
        data = json.loads(text)
        facts = data.get("facts") if isinstance(data, dict) and data.get("v") == _VERSION else None
    except ValueError:
        return ()
    found: dict[str, VolatileSpan] = {}
    for fact in facts if isinstance(facts, list) else ():
        try:
            span = VolatileSpan.from_json(fact)
        except (TypeError, ValueError, KeyError, AttributeError):
            continue
        span = replace(span, origin="")
        if span.kind in _SHARED_KINDS and _well_formed(span) and span.pattern not in found:
            found[span.pattern] = span
        if len(found) >= MAX_FACTS:
            break
    return tuple(found.values())


def merged(known: Sequence[VolatileSpan], new: Iterable[VolatileSpan]) -> tuple[VolatileSpan, ...]:
    """The union of ``known`` and ``new`` (by pattern), the known ones first, capped at ``MAX_FACTS``."""
    found = {span.pattern: span for span in known}
    for span in new:
        found.setdefault(span.pattern, replace(span, origin=""))
    return tuple(found.values())[:MAX_FACTS]


# -- use ---------------------------------------------------------------------------------------------


def _cuts_a_unit(view: Sequence[str | None], span: VolatileSpan) -> bool:
    """Whether ``span``'s pattern matches exactly once in the system text ``view``, in its own
    block, and there exactly a whole unit (whole lines that are their own unit)."""
    if span.block >= len(view):
        return False
    text = view[span.block]
    if text is None or text.startswith("\x00"):
        return False
    try:
        rx = re.compile(span.pattern, re.MULTILINE)
    except re.error:
        return False
    found = [m.span() for m in itertools.islice(rx.finditer(text), 2)]
    if len(found) != 1:
        return False
    start, end = found[0]
    if end <= start or (start > 0 and text[start - 1] != "\n") or (end < len(text) and text[end] != "\n"):
        return False
    for number, other in enumerate(view):
        if number != span.block and other is not None and not other.startswith("\x00") and rx.search(other):
            return False
    lines = text.split("\n")
    first, last = text.count("\n", 0, start), text.count("\n", 0, end)
    return unit_of(lines, first, last, regions(lines)) == (first, last)


def adopt(view: Sequence[str | None], facts: Sequence[VolatileSpan]) -> tuple[VolatileSpan, ...]:
    """The facts that cut exactly a whole unit of this lifted system segment ``view``, layer by layer
    in the order they were learned (each layer on the text the earlier ones left), as ``fleet`` spans.
    Pure; the caller still checks that the lift cut exactly this (``run_turn``)."""
    current = tuple(view)
    adopted: list[VolatileSpan] = []
    ordered = sorted(facts, key=lambda span: span.learned_at)
    for _, group in itertools.groupby(ordered, key=lambda span: span.learned_at):
        layer = [replace(span, origin="fleet") for span in group if _cuts_a_unit(current, span)]
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


# -- the store (fail open) --------------------------------------------------------------------------


def lookup(store: SessionStore, space: str, template: str) -> tuple[VolatileSpan, ...]:
    """The facts the fleet holds for ``template`` in ``space`` (``()`` on any failure)."""
    breaker = breaker_of(store)
    if breaker.is_open:  # left alone for the window; not counted as a session call skipped
        return ()
    try:
        text = store.get_blob(fleet_id(space, template), FACTS)
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be read", exc_info=True)
        return ()
    breaker.success()
    return decode(text)


async def alookup(store: SessionStore, space: str, template: str) -> tuple[VolatileSpan, ...]:
    """``lookup`` for async code (the store's async client; a sync-only store in a thread)."""
    breaker = breaker_of(store)
    if breaker.is_open:  # left alone for the window; not counted as a session call skipped
        return ()
    try:
        if isinstance(store, AsyncSessionStore):
            text = await store.aget_blob(fleet_id(space, template), FACTS)
        else:
            text = await asyncio.to_thread(store.get_blob, fleet_id(space, template), FACTS)
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be read", exc_info=True)
        return ()
    breaker.success()
    return decode(text)


def publish(store: SessionStore, space: str, template: str, spans: Sequence[VolatileSpan]) -> None:
    """Add ``spans`` (the publishable ones) to the facts of ``template`` in ``space``. Never raises."""
    new = [span for span in spans if publishable(span)]
    breaker = breaker_of(store)
    if not new or breaker.is_open:
        return
    key = fleet_id(space, template)
    try:
        known = decode(store.get_blob(key, FACTS))
        facts = merged(known, new)
        if facts != known:
            store.put_blob(key, FACTS, encode(facts))
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be written", exc_info=True)
        return
    breaker.success()


async def apublish(store: SessionStore, space: str, template: str, spans: Sequence[VolatileSpan]) -> None:
    """``publish`` for async code."""
    new = [span for span in spans if publishable(span)]
    breaker = breaker_of(store)
    if not new or breaker.is_open:
        return
    key = fleet_id(space, template)
    try:
        if isinstance(store, AsyncSessionStore):
            known = decode(await store.aget_blob(key, FACTS))
            facts = merged(known, new)
            if facts != known:
                await store.aput_blob(key, FACTS, encode(facts))
        else:
            await asyncio.to_thread(publish, store, space, template, new)
            return
    except Exception as exc:
        breaker.failure(exc)
        logger.debug("telos_wrap: fleet facts could not be written", exc_info=True)
        return
    breaker.success()


# -- what a session calls (the hook in ``core.py``) ------------------------------------------------


def _where(api: Api, body: Mapping[str, Any], hints: TelosHints) -> tuple[str, str] | None:
    template = template_key(api, body, hints.drop_patterns)
    return None if template is None else (namespace(hints.isolation), template)


def facts_for(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints
) -> tuple[VolatileSpan, ...]:
    """The fleet's facts for the template of ``body``'s system prompt (``()``: none, or a failure)."""
    where = _where(api, body, hints)
    return () if where is None else lookup(store, *where)


async def afacts_for(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints
) -> tuple[VolatileSpan, ...]:
    """``facts_for`` for async code."""
    where = _where(api, body, hints)
    return () if where is None else await alookup(store, *where)


def publish_learned(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints, learned: Sequence[VolatileSpan]
) -> None:
    """Publish what a request learned (the publishable spans) under its template. Never raises."""
    if any(publishable(span) for span in learned):
        where = _where(api, body, hints)
        if where is not None:
            publish(store, *where, learned)


async def apublish_learned(
    store: SessionStore, api: Api, body: Mapping[str, Any], hints: TelosHints, learned: Sequence[VolatileSpan]
) -> None:
    """``publish_learned`` for async code."""
    if any(publishable(span) for span in learned):
        where = _where(api, body, hints)
        if where is not None:
            await apublish(store, *where, learned)
