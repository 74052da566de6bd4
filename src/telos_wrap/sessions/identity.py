"""The identity of an implicit conversation: what stays fixed across all turns of one conversation.

A call made outside any ``session()`` belongs to an *implicit* session. Its key must be the same on
every turn of one conversation whatever the harness rebuilds each turn, and different for different
conversations. Harnesses rebuild exactly the parts that come first in a request — the system prompt
(Anthropic ``system``, the leading ``system`` / ``developer`` messages of Chat Completions, the
Responses API's ``instructions``) with a clock, an environment dump, a "jobs running" count — and
they wrap per-turn envelopes (``<system-reminder>``, ``Current time: …``) into user text, turning a
string content into a parts list. None of that may enter the key. What does not change is the
conversation's **opening message**: the first user (or assistant) message the application sent,
which every later turn re-sends as history.

The key is a digest of:

* the wire API and the model (a model switch breaks the vendor cache anyway);
* the names of the tools, sorted (a harness that reshuffles its tools stays in one conversation);
* the caller's own conversation/user identifiers when present: OpenAI ``prompt_cache_key``,
  ``safety_identifier`` and ``user``; Anthropic ``metadata.user_id`` — they only ever tell
  conversations apart, never merge them;
* the tenant signals outside the body, as one digest (``tenant_digest``): the ``isolation`` hint,
  the client's credentials and base URL — never stored in clear;
* the opening message: the first conversation message that is not a system/developer message and is
  not empty once its DROP envelopes are stripped, as ``role`` + its text (every text part joined,
  envelopes matched by the default DROP patterns and the call's ``drop_patterns`` removed, whitespace
  collapsed; it enters the key as a 128-bit digest, memoized by the text, so a long opening task
  costs a lookup per call) + the canonical JSON of its non-text parts without cache markers — so
  string vs. parts, a moved ``cache_control`` and an envelope that comes and goes all give the same
  key.

Limits (also in ``docs/sessions.md``): two conversations that open with the same message, on the
same model, tools and user fields share one implicit session; a conversation whose opening message
itself changes every turn (an untagged clock in the first user message) gets a new implicit session
per turn. Name the conversation to avoid both: ``with telos_wrap.session(thread_id):`` or the
``X-Telos-Session`` request header.

Which messages are the conversation is per wire API (``_CONVERSATION``): a small function per API,
so a new API (e.g. the Responses API's ``input`` items, with ``instructions`` left out) plugs in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from telos_wrap.ir.canon import MARKER_KEYS, canonical_bytes, tool_label
from telos_wrap.ir.shared import BoundedMemo
from telos_wrap.lift.user_split import DEFAULT_PATTERNS, SplitPatterns, split_text

__all__ = ["client_tenant", "conversation_key", "opening_message", "tells_users_apart", "tenant_digest"]

#: Roles that carry instructions, not conversation (OpenAI ``developer`` replaces ``system``).
_INSTRUCTION_ROLES = frozenset({"system", "developer"})
#: Part types whose ``text`` is conversation text (Anthropic / Chat ``text``, Responses ``input_text``
#: and ``output_text``).
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
#: Top-level fields that name a caller's conversation or end user (OpenAI Chat / Responses).
_OPENAI_IDS = ("prompt_cache_key", "safety_identifier", "user")


def _messages(body: Mapping[str, Any]) -> Sequence[Any]:
    messages = body.get("messages")
    return messages if isinstance(messages, list) else ()


def _responses_input(body: Mapping[str, Any]) -> Sequence[Any]:
    # Responses API: ``input`` is a string (one user message) or a list of items; ``instructions``
    # is the system prompt and never part of the conversation.
    value = body.get("input")
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return value if isinstance(value, list) else ()


def _anthropic_ids(body: Mapping[str, Any]) -> dict[str, Any]:
    metadata = body.get("metadata")
    user = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    return {"user_id": user} if isinstance(user, str) else {}


def _openai_ids(body: Mapping[str, Any]) -> dict[str, Any]:
    return {key: body[key] for key in _OPENAI_IDS if isinstance(body.get(key), str)}


#: Per wire API: the conversation items, and the caller's own conversation/user identifiers.
_Items = Callable[[Mapping[str, Any]], Sequence[Any]]
_Ids = Callable[[Mapping[str, Any]], dict[str, Any]]
_CONVERSATION: Mapping[str, tuple[_Items, _Ids]] = {
    "anthropic": (_messages, _anthropic_ids),
    "openai_chat": (_messages, _openai_ids),
    "openai_responses": (_responses_input, _openai_ids),
}


def _without_markers(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _without_markers(item) for key, item in value.items() if key not in MARKER_KEYS}
    if isinstance(value, list):
        return [_without_markers(item) for item in value]
    return value


def _is_text_part(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str)


def _normalized(message: Mapping[str, Any], patterns: SplitPatterns) -> dict[str, Any] | None:
    """``role`` + envelope-free text + non-text parts of ``message``; ``None`` if nothing is left."""
    content = message.get("content")
    parts: Iterable[Any] = ()
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = content
    texts: list[str] = []
    others: list[Any] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif _is_text_part(part):
            texts.append(str(part["text"]))
        else:
            others.append(_without_markers(part))
    if not isinstance(content, (str, list)) and message.get("type") not in (None, "message"):
        others.append(_without_markers(message))  # a Responses item that is not a message
    text = " ".join(_flat_pins((text, patterns)) for text in texts).strip()
    if not text and not others:
        return None
    return {"role": message.get("role"), "text": text, "parts": others}


def _flat_pin_of(key: tuple[str, SplitPatterns]) -> str:
    return " ".join(split_text(key[0], key[1], with_fold=False).pin.split())


def _flat_size(key: tuple[str, SplitPatterns], value: str) -> int:
    return 2 * len(key[0]) + 200


#: Opening messages seen recently without their envelopes, whitespace runs collapsed (keyed by their
#: text: the opening message of a conversation is the same string on every turn), bounded in entries
#: and bytes.
_flat_pins: BoundedMemo[tuple[str, SplitPatterns], str] = BoundedMemo(
    _flat_pin_of, max_entries=1024, max_bytes=4 << 20, sizer=_flat_size
)


def _text_digest_of(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


#: Digests of recent opening texts, bounded in entries and bytes.
_text_digest: BoundedMemo[str, str] = BoundedMemo(_text_digest_of, max_entries=1024, max_bytes=4 << 20)


def opening_message(
    api: str, body: Mapping[str, Any], patterns: SplitPatterns = DEFAULT_PATTERNS
) -> dict[str, Any] | None:
    """The normalized opening message of ``body``'s conversation (see module docstring), if any."""
    items, _ = _CONVERSATION.get(api, (_messages, _openai_ids))
    for item in items(body):
        if not isinstance(item, Mapping) or item.get("role") in _INSTRUCTION_ROLES:
            continue
        normalized = _normalized(item, patterns)
        if normalized is not None:
            return normalized
    return None


def _digested(opening: dict[str, Any] | None) -> dict[str, Any] | None:
    """``opening`` with its text as a digest (memoized by the text, so a long task costs a lookup)."""
    return None if opening is None else {**opening, "text": _text_digest(opening["text"])}


def tenant_digest(*signals: object) -> str:
    """A digest of the tenant signals of a call that are not in its body (the ``isolation`` hint,
    the client's credentials and base URL): they enter the implicit key hashed, never in clear."""
    material = "\x00".join(["" if s is None else s if type(s) is str else str(s) for s in signals])
    return hashlib.blake2b(material.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def client_tenant(client: Any, isolation: str | None = None) -> str:
    """``tenant_digest`` of an SDK client's tenant signals (its credentials and base URL) and
    ``isolation``: what the patch layer computes for each of its calls (``patch.turns.tenant_of``)."""
    signals = [getattr(client, name, None) for name in ("api_key", "auth_token", "organization", "project")]
    url = getattr(client, "base_url", None)
    return tenant_digest(
        isolation,
        *(s if s is None or isinstance(s, str) else None for s in signals),
        None if url is None else str(url),
    )


def tells_users_apart(api: str, body: Mapping[str, Any], isolation: str | None = None) -> bool:
    """Whether the request names its end user or conversation (OpenAI ``user`` /
    ``safety_identifier`` / ``prompt_cache_key``, Anthropic ``metadata.user_id``, the ``isolation``
    hint). Without any, two users who open alike share an implicit session, which then learns only
    from requests that extend the previous one (docs/security.md)."""
    _, ids = _CONVERSATION.get(api, (_messages, _openai_ids))
    return bool(isolation) or bool(ids(body))


def conversation_key(
    api: str, body: Mapping[str, Any], drop_patterns: Sequence[str] = (), tenant: str = ""
) -> str:
    """A 16-hex digest naming the implicit conversation of ``body`` (see module docstring).

    ``drop_patterns``: the call's extra DROP patterns (``telos_hint``), stripped like the defaults.
    ``tenant``: ``tenant_digest`` of the call's signals outside the body (isolation hint, client
    credentials and base URL): conversations of different tenants never share a key.
    Never raises: content that cannot be hashed gives the key ``"unhashable"``.
    """
    patterns = DEFAULT_PATTERNS.extended(drop=drop_patterns) if drop_patterns else DEFAULT_PATTERNS
    _, ids = _CONVERSATION.get(api, (_messages, _openai_ids))
    tools = body.get("tools")
    try:
        material = {
            "api": api,
            "model": body.get("model"),
            # Sorted so a harness that shuffles its tools still lands in one session; names only:
            # hashing every schema on every call would cost more than it adds to telling apart.
            "tools": sorted(map(tool_label, tools)) if isinstance(tools, list) else None,
            "ids": ids(body),
            "opening": _digested(opening_message(api, body, patterns)),
        }
        if tenant:
            material["tenant"] = tenant
        return hashlib.sha256(canonical_bytes(material)).hexdigest()[:16]
    except (TypeError, ValueError):
        return "unhashable"
