"""Render a request body into an ordered list of cacheable *positions*.

A position is one block of the prompt in the vendor's render order:

* Anthropic Messages: each tool definition, then each ``system`` block, then each
  content block of each message (docs/vendor-facts.md §1.1: "tools -> system -> messages").
* OpenAI-style chat: each tool definition, then each content part of each message in order,
  then each ``tool_calls`` entry of a message.

Every position carries a chained prefix hash: ``hash_i = H(hash_{i-1} + header_i + data_i)``,
so equal hashes mean byte-identical prefixes.  Two normalisations keep the hash stable where
the vendors' rendered prompt does not change:

* cache markers (Anthropic ``cache_control``, OpenAI ``prompt_cache_breakpoint``) are removed
  before hashing, on the block and on blocks nested in its ``content`` list (a marker is
  metadata, not prompt text: §1.2 "Removing a marker does not change prompt content");
* a string ``content`` (or string ``system``) is the same as a single text block
  (SDK docstring of ``messages``: "Using a `string` for `content` is shorthand for an array
  of one content block of type "text"").

The top-level fields of a block are an envelope the server parses, so their order does not
matter (they are sorted); values nested inside a block (tool ``input_schema``,
``tool_use.input``, tool-call ``arguments``) are kept verbatim in the order sent, because the
vendors render them as-is and a key-order change there breaks the cache (§1.1: "incl. tool
definitions and tool_use JSON key order").

That is the ``"rendered"`` mode.  The ``"byte-exact"`` mode models a cache keyed on the request
bytes instead: the positions and their token counts are the same, but each position's identity is
the exact JSON of its block as the client serialized it, cache markers aside — key order and
``null`` fields included, a string ``content``/``system`` distinct from a one-part list, and the
envelope of its message (every field but ``content``/``tool_calls``, in the order sent, and
whether ``content`` was a string or a list) part of the identity of the message's first position.
Top-level request fields are not positions, so their order counts in neither mode
(docs/emulator.md, "Render modes").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .tokens import tokens_for_bytes, whole_tokens

RenderMode = Literal["rendered", "byte-exact"]
RENDER_MODES: tuple[RenderMode, ...] = ("rendered", "byte-exact")
"""How position identity is derived: the vendor's rendered prompt, or the request's JSON bytes."""


def check_mode(mode: str) -> RenderMode:
    """``mode`` as a :data:`RenderMode`, or a ``ValueError`` naming the valid ones."""
    for known in RENDER_MODES:
        if known == mode:
            return known
    raise ValueError(f"unknown render mode {mode!r}; expected one of {', '.join(RENDER_MODES)}")


ROOT_HASH = b""
"""Hash "before" the first position."""

ANTHROPIC_MARKER = "cache_control"
OPENAI_MARKER = "prompt_cache_breakpoint"


@dataclass(frozen=True)
class Position:
    """One block of a rendered prompt.

    ``header`` is structural identity (section, role, block envelope) and costs no tokens;
    ``data`` is the rendered content, costing ``tokens_for_bytes(len(data))`` tokens.
    """

    index: int
    section: str  # "tools" | "system" | "messages"
    kind: str  # block type: "text", "tool_use", "tool_result", "tool", "tool_call", ...
    message_index: int  # -1 outside the messages section
    role: str  # message role, "" outside messages
    path: str  # location in the request body, for error messages
    header: bytes
    data: bytes
    tokens: int
    cum_tokens: int  # tokens of the prefix ending with this position (inclusive)
    hash: bytes  # chained prefix hash ending with this position
    parent_hash: bytes  # chained prefix hash before this position
    markers: tuple[Mapping[str, Any], ...]  # cache markers found on the block (or nested in it)
    block: Mapping[str, Any]  # the original block, markers included

    @property
    def start_tokens(self) -> int:
        """Tokens of the prefix before this position."""
        return self.cum_tokens - self.tokens


@dataclass(frozen=True)
class RenderedPrompt:
    """Positions of one request, in render order."""

    positions: tuple[Position, ...]

    @property
    def total_tokens(self) -> int:
        """Tokens of the whole prompt."""
        return self.positions[-1].cum_tokens if self.positions else 0


def dumps(value: Any) -> bytes:
    """Compact JSON with insertion order kept (the emulator's byte form of nested values)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def chain_hash(parent: bytes, header: bytes, data: bytes) -> bytes:
    """Hash of the prefix ``parent`` extended by one block."""
    h = hashlib.blake2b(parent, digest_size=16)
    h.update(len(header).to_bytes(8, "big"))
    h.update(header)
    h.update(data)
    return h.digest()


def common_prefix_len(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of two byte strings (binary search on slices)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def partial_match_tokens(pos: Position, other_header: bytes, other_data: bytes) -> int:
    """Whole tokens of ``pos`` that match the start of another block (0 if headers differ)."""
    if pos.header != other_header:
        return 0
    return min(whole_tokens(common_prefix_len(pos.data, other_data)), pos.tokens)


def _clean_block(block: Mapping[str, Any], marker_key: str) -> tuple[dict[str, Any], list[Mapping[str, Any]]]:
    """Copy of ``block`` without markers (also inside its ``content`` list) and the markers found."""
    markers: list[Mapping[str, Any]] = []
    own = block.get(marker_key)
    if isinstance(own, Mapping):
        markers.append(own)
    clean = {k: block[k] for k in sorted(block) if k != marker_key and block[k] is not None}
    content = clean.get("content")
    if isinstance(content, list):
        items: list[Any] = []
        for item in content:
            if isinstance(item, Mapping) and marker_key in item:
                nested = item.get(marker_key)
                if isinstance(nested, Mapping):
                    markers.append(nested)
                item = {k: v for k, v in item.items() if k != marker_key}
            items.append(item)
        clean["content"] = items
    return clean, markers


def _exact_block(block: Mapping[str, Any], marker_key: str) -> dict[str, Any]:
    """``block`` as sent, key order and ``null`` fields kept, without markers (also in ``content``)."""
    exact = {k: v for k, v in block.items() if k != marker_key}
    content = exact.get("content")
    if isinstance(content, list):
        exact["content"] = [
            {k: v for k, v in item.items() if k != marker_key} if isinstance(item, Mapping) else item
            for item in content
        ]
    return exact


def _form(value: Any) -> str:
    """How a ``content``/``system`` value was sent: ``"str"``, ``"list"`` or its JSON type."""
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return "null" if value is None else type(value).__name__


def envelope(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message as sent with ``content``/``tool_calls`` replaced by their form (byte-exact identity)."""
    return {k: _form(v) if k in ("content", "tool_calls") else v for k, v in message.items()}


class _Builder:
    """Accumulates positions and their chained hashes."""

    def __init__(self, marker_key: str, mode: RenderMode = "rendered") -> None:
        self.marker_key = marker_key
        self.exact = mode == "byte-exact"
        self.positions: list[Position] = []
        self._hash = ROOT_HASH
        self._tokens = 0

    def add(
        self,
        block: Mapping[str, Any],
        *,
        section: str,
        path: str,
        message_index: int = -1,
        role: str = "",
        message_meta: Mapping[str, Any] | None = None,
        kind: str | None = None,
        exact_meta: Any = None,
    ) -> None:
        """Add one block; ``exact_meta`` is what byte-exact identity adds (envelope, string form)."""
        clean, markers = _clean_block(block, self.marker_key)
        block_kind = kind or str(clean.get("type", ""))
        text = clean.get("text")
        if block_kind == "text" and isinstance(text, str):
            del clean["text"]
            data = text.encode("utf-8")
        else:
            data = dumps(clean)
            clean = {"type": block_kind}
        tokens = tokens_for_bytes(len(data))  # the same in both modes
        if self.exact:
            exact = _exact_block(block, self.marker_key)
            if block_kind == "text" and isinstance(text, str):
                exact["text"] = 0  # the text itself is ``data``; keep where its key was
            else:
                data = dumps(exact)
                exact = {"type": block_kind}
            header = dumps([section, role, exact_meta, exact])
        else:
            header = dumps([section, role, message_meta, clean])
        parent = self._hash
        self._hash = chain_hash(parent, header, data)
        self._tokens += tokens
        self.positions.append(
            Position(
                index=len(self.positions),
                section=section,
                kind=block_kind,
                message_index=message_index,
                role=role,
                path=path,
                header=header,
                data=data,
                tokens=tokens,
                cum_tokens=self._tokens,
                hash=self._hash,
                parent_hash=parent,
                markers=tuple(markers),
                block=block,
            )
        )

    def result(self) -> RenderedPrompt:
        return RenderedPrompt(tuple(self.positions))


def _as_blocks(content: Any) -> list[Mapping[str, Any]]:
    """Content in list form; a string is one text block, ``None`` is no block."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, Sequence):
        return [
            item if isinstance(item, Mapping) else {"type": "text", "text": str(item)} for item in content
        ]
    return [{"type": "text", "text": str(content)}]


def _mappings(value: Any) -> Iterable[Mapping[str, Any]]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [v for v in value if isinstance(v, Mapping)]
    return []


def render_anthropic(body: Mapping[str, Any], *, mode: RenderMode = "rendered") -> RenderedPrompt:
    """Positions of an Anthropic Messages request: tools -> system -> messages (§1.1)."""
    b = _Builder(ANTHROPIC_MARKER, mode)
    for i, tool in enumerate(_mappings(body.get("tools"))):
        b.add(tool, section="tools", path=f"tools.{i}", kind="tool")
    system_form = _form(body.get("system"))
    for i, block in enumerate(_as_blocks(body.get("system"))):
        b.add(block, section="system", path=f"system.{i}", exact_meta=system_form)
    for m, message in enumerate(_mappings(body.get("messages"))):
        role = str(message.get("role", ""))
        for j, block in enumerate(_as_blocks(message.get("content"))):
            b.add(
                block,
                section="messages",
                path=f"messages.{m}.content.{j}",
                message_index=m,
                role=role,
                message_meta={"start": j == 0},
                exact_meta=envelope(message) if j == 0 else None,
            )
    return b.result()


def render_chat(
    body: Mapping[str, Any],
    extra_messages: Sequence[Mapping[str, Any]] = (),
    *,
    mode: RenderMode = "rendered",
) -> RenderedPrompt:
    """Positions of an OpenAI-style chat request: tools, then each message's parts in order.

    ``extra_messages`` are appended after ``body["messages"]`` (used to render the reply an
    engine keeps in its cache).
    """
    b = _Builder(OPENAI_MARKER, mode)
    for i, tool in enumerate(_mappings(body.get("tools"))):
        b.add(tool, section="tools", path=f"tools.{i}", kind="tool")
    messages = [*_mappings(body.get("messages")), *extra_messages]
    for m, message in enumerate(messages):
        role = str(message.get("role", ""))
        meta = {
            k: message[k]
            for k in sorted(message)
            if k not in ("role", "content", "tool_calls") and message[k] not in (None, "", [], {})
        }
        parts: list[tuple[Mapping[str, Any], str, str | None]] = [
            (part, f"messages.{m}.content.{j}", None)
            for j, part in enumerate(_as_blocks(message.get("content")))
        ]
        parts += [
            (call, f"messages.{m}.tool_calls.{j}", "tool_call")
            for j, call in enumerate(_mappings(message.get("tool_calls")))
        ]
        if not parts:  # an empty message still renders its role
            parts = [({"type": "text", "text": ""}, f"messages.{m}.content", None)]
        for j, (part, path, kind) in enumerate(parts):
            b.add(
                part,
                section="messages",
                path=path,
                message_index=m,
                role=role,
                message_meta={"start": j == 0, **meta} if j == 0 else {"start": False},
                kind=kind,
                exact_meta=envelope(message) if j == 0 else None,
            )
    return b.result()
