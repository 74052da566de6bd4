"""What every engine behind the Chat Completions wire shares: the emit, stream usage, prefix identity.

* ``emit_chat`` writes a chat body from an IR lifted by ``telos_wrap.lift.openai_chat``: the system
  segment goes back into one wire message per original system/developer message (role, other keys and
  content form as sent; blocks telos added, such as rendered ref-pool entries, join the last one),
  then the conversation, then ``plan.extras`` on top. A caller's own ``prompt_cache_breakpoint`` is
  always put back; the plan's own breakpoints are added; string content becomes a parts array only
  when a marker has to sit on it. Keys come out in canonical (sorted) order.
* ``stream_usage_extras``: chat streams report usage only with ``stream_options.include_usage``
  (openai 3.54 ``chat_completion_stream_options_param.py``); the engines whose servers accept it ask
  for it on a copy of the caller's ``stream_options`` (the patch layer hides the extra chunk).
* ``family_digest`` / ``prefix_digest``: hashes of the stable prefix, for cache keys and routing hints.
* ``OpenAICompatEngine``: the adapter base the chat engines specialise.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from telos_wrap.engines.base import Breakpoint, EmitPlan, EngineProfile, PrefixTables, emit_messages
from telos_wrap.engines.openai_markers import MARKER, ORIGIN, Location, _ttl, _with_marker
from telos_wrap.engines.openai_usage import OpenAIChatStreamUsage, parse_openai_usage
from telos_wrap.engines.responses_wire import emit_responses
from telos_wrap.ir.canon import (
    canonical_bytes,
    canonical_json,
    canonicalize_payload,
    canonicalize_tool_def,
    is_plain_text_part,
)
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Band, TelosBlock, TelosIR, TelosMessage, UsageReport

__all__ = [
    "MARKER",
    "ORIGIN",
    "Location",
    "OpenAICompatEngine",
    "SystemGroup",
    "caller_breakpoints",
    "emit_chat",
    "family_digest",
    "group_system",
    "is_chat",
    "markable",
    "merge_under_caller",
    "prefix_digest",
    "stable_prefix_end",
    "stream_usage_extras",
    "wire_pointer",
]

# Part types that accept ``prompt_cache_breakpoint`` (openai 3.54: chat text, image_url, input_audio and
# file part params; Responses input_text, input_image, input_file — never output items). System,
# developer and tool messages take text parts only.
_MARKABLE_TYPES = frozenset(
    {"text", "image_url", "input_audio", "file", "input_text", "input_image", "input_file"}
)
_TEXT_TYPES = frozenset({"text", "input_text"})
_TEXT_ONLY_ROLES = frozenset({"system", "developer", "tool"})


def markable(block: TelosBlock, role: str) -> bool:
    """True if a breakpoint may sit on ``block`` in a message of ``role`` (never on assistant parts)."""
    payload = block.payload
    if role == "assistant" or not isinstance(payload, Mapping):
        return False
    kind = payload.get("type")
    if kind not in _MARKABLE_TYPES or (role in _TEXT_ONLY_ROLES and kind not in _TEXT_TYPES):
        return False
    if kind in _TEXT_TYPES:
        text = payload.get("text")
        return isinstance(text, str) and bool(text.strip())
    return True


@dataclass(frozen=True, slots=True)
class SystemGroup:
    """One wire system/developer message rebuilt from the IR system segment.

    Attributes:
        index: the message's wire index in the original request (``-1`` for a message telos adds).
        role: ``"system"`` or ``"developer"``.
        form: ``"string"`` or ``"list"``: how its content was sent.
        fields: its other keys (``name``...).
        members: ``(index in ir.system, block)`` of its blocks, in IR order.
    """

    index: int
    role: str
    form: str
    fields: Mapping[str, Any]
    members: tuple[tuple[int, TelosBlock], ...] = field(default=())


def group_system(ir: TelosIR) -> tuple[SystemGroup, ...]:
    """Regroup ``ir.system`` into its wire messages, in wire order; messages left empty are omitted.

    A block without an origin (a rendered ref-pool entry, a block a session added) joins the message of
    the block before it, so the wire order of blocks is the IR order.
    """
    heads: dict[int, SystemGroup] = {}
    members: dict[int, list[tuple[int, TelosBlock]]] = {}
    current: int | None = None
    for position, block in enumerate(ir.system):
        origin = block.extra.get(ORIGIN)
        if isinstance(origin, Mapping) and isinstance(origin.get("index"), int):
            index = int(origin["index"])
            if index not in heads:
                fields = origin.get("fields")
                heads[index] = SystemGroup(
                    index=index,
                    role=str(origin.get("role") or "system"),
                    form=str(origin.get("form") or "list"),
                    fields=fields if isinstance(fields, Mapping) else {},
                )
            current = index
        elif current is None:
            current = -1
            heads.setdefault(-1, SystemGroup(index=-1, role="system", form="list", fields={}))
        members.setdefault(current, []).append((position, block))
    return tuple(
        SystemGroup(head.index, head.role, head.form, head.fields, tuple(members[index]))
        for index, head in sorted(heads.items())
        if members.get(index)
    )


def wire_pointer(ir: TelosIR, location: Location) -> dict[str, int] | None:
    """``{"message": i, "part": j}``: where a location lands in the emitted ``messages`` array."""
    segment, message, block = location
    groups = group_system(ir)
    if segment == "system":
        for g_index, group in enumerate(groups):
            for p_index, (position, _) in enumerate(group.members):
                if position == block:
                    return {"message": g_index, "part": p_index}
        return None
    if message is None or message >= len(ir.messages):
        return None
    return {"message": len(groups) + message, "part": block}


def stable_prefix_end(ir: TelosIR) -> Location | None:
    """The last non-DROP block of the system segment (the end of tools + system + ref-pool)."""
    for index in range(len(ir.system) - 1, -1, -1):
        if ir.system[index].band is not Band.DROP:
            return "system", None, index
    return None


def caller_breakpoints(ir: TelosIR) -> tuple[Breakpoint, ...]:
    """The caller's own ``prompt_cache_breakpoint`` markers, in render order."""
    found: list[Breakpoint] = []
    for index, block in enumerate(ir.system):
        if MARKER in block.extra:
            found.append(Breakpoint("caller", "system", None, index, _ttl(block.extra[MARKER])))
    for m_index, message in enumerate(ir.messages):
        for index, block in enumerate(message.blocks):
            if MARKER in block.extra:
                found.append(Breakpoint("caller", "messages", m_index, index, _ttl(block.extra[MARKER])))
    return tuple(found)


def _content(form: str, parts: list[Any], as_parts: bool = False, *, pieces: bool = True) -> str | list[Any]:
    """The wire content of a message's parts (docs/engines.md, *Wire shapes*).

    Chat Completions defines string content as one text part, so whichever of the two a caller sends
    (or flips between from turn to turn), one plain text part goes out as its string. A message in
    string form (sent as a string, or as one text part plus envelope parts, see
    ``bridge.canonicalize``) whose parts are all plain text goes out as their text joined: its
    envelope stays where it was, at the end of the string, and on the next turn — envelope pruned —
    the same string without it. ``as_parts``: always parts (an engine that places breakpoints on this
    role, see ``emit_chat``). ``pieces``: the parts are pieces of the message's own content (False for
    a system message, whose parts can be a ref-pool stub and the entry it stands for).
    """
    if as_parts or not all(is_plain_text_part(part) for part in parts):
        return parts
    if len(parts) == 1 or (form == "string" and pieces):
        return "".join(str(part["text"]) for part in parts)
    return parts


_WIRE_TABLE = "chat.wire"


#: A route's own part-level marker (``engines.chat_breakpoints``): ``(field, {location: marker},
#: locations whose caller's marker moved away)``; ``None`` for OpenAI's ``prompt_cache_breakpoint``.
PartMarkers = tuple[str, Mapping[Location, Any], frozenset[Location]]


def _place(
    payload: Any,
    block: TelosBlock,
    location: Location,
    ours: Mapping[Location, Breakpoint],
    markers: PartMarkers | None,
) -> Any:
    """The wire form of one part: OpenAI's marker from ``ours``, or a route's own from ``markers``."""
    if markers is None:
        return _with_marker(payload, block, ours.get(location))
    key, placed, strip = markers
    if not isinstance(payload, Mapping):
        return payload
    if location in strip:
        payload = {name: value for name, value in payload.items() if name != key}
    marker = placed.get(location)
    if marker is None:
        return payload
    return dict(sorted({**payload, key: marker}.items()))


def _emit_message(
    message: TelosMessage,
    m_index: int,
    ours: Mapping[Location, Breakpoint],
    parts_roles: frozenset[str],
    markers: PartMarkers | None = None,
) -> dict[str, Any]:
    wire = dict(message.extra)
    wire["role"] = message.role
    if message.content_form not in ("absent", "null"):
        parts = [
            _place(block.payload, block, ("messages", m_index, b_index), ours, markers)
            for b_index, block in enumerate(message.blocks)
        ]
        wire["content"] = _content(message.content_form, parts, message.role in parts_roles)
    return dict(sorted(wire.items()))


def emit_chat(
    ir: TelosIR,
    plan: EmitPlan,
    reuse: PrefixTables | None = None,
    *,
    parts_roles: frozenset[str] = frozenset(),
    part_markers: PartMarkers | None = None,
) -> dict[str, Any]:
    """The Chat Completions body for ``ir`` with ``plan``'s breakpoints and extras (see module docstring).

    With ``reuse`` (a session's ``PrefixTables``) each settled message's wire form (with the
    caller's own markers, without ours) is built once and shared, read-only, by later turns.
    ``parts_roles``: roles whose string content is always sent as one text part — an engine that
    places breakpoints passes the roles they can sit on, so a message that carried one on its own
    turn keeps the same shape on every later turn (I2 on the wire; docs/engines.md).
    ``part_markers``: a route whose marker is another field (``cache_control`` on a router to Claude,
    ``engines.chat_breakpoints``) passes its markers by location instead.
    """
    ours: dict[Location, Breakpoint] = {
        (bp.segment, bp.message, bp.block): bp
        for bp in plan.breakpoints
        if bp.name != "caller" and bp.segment != "tools"
    }
    messages: list[dict[str, Any]] = []
    for group in group_system(ir):
        parts = [
            _place(block.payload, block, ("system", None, position), ours, part_markers)
            for position, block in group.members
        ]
        wire = canonicalize_payload(dict(group.fields))
        wire["role"] = group.role
        wire["content"] = _content(group.form, parts, group.role in parts_roles, pieces=False)
        messages.append(dict(sorted(wire.items())))
    located = ours if part_markers is None else {*part_markers[1], *part_markers[2]}
    marked = {message for segment, message, _ in located if segment == "messages" and message is not None}
    unmarked: PartMarkers | None = None if part_markers is None else (part_markers[0], {}, part_markers[2])
    messages.extend(
        emit_messages(
            ir,
            lambda message, index, marks: _emit_message(
                message, index, ours if marks else {}, parts_roles, part_markers if marks else unmarked
            ),
            marked,
            reuse,
            _WIRE_TABLE,
        )
    )
    body: dict[str, Any] = dict(ir.params)
    if ir.tools_form == "list":
        body["tools"] = [tool.payload for tool in ir.tools]
    body["messages"] = messages
    body.update(plan.extras)
    return dict(sorted(body.items()))


def stream_usage_extras(params: Mapping[str, Any]) -> dict[str, Any]:
    """``{"stream_options": ...}`` asking for the usage chunk when streaming, or ``{}``.

    The caller's own ``stream_options`` keys are kept (on a copy); nothing is added when the request
    does not stream or already asks for usage.
    """
    if params.get("stream") is not True:
        return {}
    caller = params.get("stream_options")
    if isinstance(caller, Mapping) and caller.get("include_usage") is True:
        return {}
    merged = dict(caller) if isinstance(caller, Mapping) else {}
    merged["include_usage"] = True
    return {"stream_options": dict(sorted(merged.items()))}


def is_chat(ir: TelosIR) -> bool:
    """True for a Chat Completions IR; False for Responses, whose streams always end with their usage
    (``response.completed``) and whose ``stream_options`` has no ``include_usage``."""
    return ir.api != "openai_responses"


def merge_under_caller(params: Mapping[str, Any], key: str, ours: Mapping[str, Any]) -> dict[str, Any]:
    """``ours`` with the caller's own ``params[key]`` sub-keys on top (a new dict; neither is modified)."""
    caller = params.get(key)
    merged = dict(ours)
    if isinstance(caller, Mapping):
        merged.update(caller)
    return dict(sorted(merged.items()))


def family_digest(ir: TelosIR, isolation: str | None = None) -> str:
    """SHA-256 (hex) of the prefix *family*: the canonical tools (and ``isolation``, a tenant key).

    It names a cache partition (OpenAI's ``prompt_cache_key`` is part of the cache identity, docs/
    engines.md), so it must not change while two requests can still share a cached prefix. Every
    rendered prompt starts with its tools; what follows them changes without the tools changing: a
    volatile span learned mid-session leaves the PIN system, a real prompt edit, a new ref-pool
    document. A family that hashed those moved the whole request to a fresh partition at exactly
    those moments, losing the reads of the tools and of the system text before the change as well
    (two- and three-request LangGraph sessions read nothing at all). Tool order and key order do not
    matter. Requests with different system prompts but the same tools share a family: their prefixes
    still differ after the tools, which the vendor's prefix match tells apart.
    """
    material: dict[str, Any] = {
        "tools": sorted(canonical_json(canonicalize_tool_def(tool.payload)) for tool in ir.tools),
    }
    if isolation is not None:
        material["isolation"] = isolation
    return hashlib.sha256(canonical_bytes(material)).hexdigest()


def prefix_digest(ir: TelosIR, end: int | None = None) -> str:
    """SHA-256 (hex) of the stable prefix *content*: canonical tools + non-DROP system blocks [: end].

    Unlike ``family_digest`` it changes when a ref-pool entry is folded (the cached path changes).
    """
    system = [block for block in ir.system if block.band is not Band.DROP]
    material = {
        "tools": [canonical_json(canonicalize_tool_def(tool.payload)) for tool in ir.tools],
        "system": [canonical_json(block.payload) for block in system[:end]],
    }
    return hashlib.sha256(canonical_bytes(material)).hexdigest()


class OpenAICompatEngine:
    """Base adapter for the Chat Completions wire: orders, canonicalizes and emits; no vendor fields.

    Subclasses set ``profile`` and ``stream_options_accepted`` and extend ``plan``.
    """

    profile = EngineProfile(name="generic", caching="automatic")
    #: Whether the server accepts ``stream_options`` (some OpenAI-compatible servers reject it:
    #: wandb/weave PR #4563, litellm PR #35290; docs/vendor-facts.md §7).
    stream_options_accepted: ClassVar[bool] = False

    def plan(
        self,
        ir: TelosIR,
        hints: TelosHints,
        *,
        reuse: PrefixTables | None = None,
        fork: int | None = None,
        final: int | None = None,
    ) -> EmitPlan:
        """The caller's own markers (kept) and, where accepted, the stream-usage request."""
        extras = stream_usage_extras(ir.params) if self.stream_options_accepted and is_chat(ir) else {}
        return EmitPlan(breakpoints=caller_breakpoints(ir), extras=extras)

    def emit(self, ir: TelosIR, plan: EmitPlan, *, reuse: PrefixTables | None = None) -> dict[str, Any]:
        """The chat body (``emit_chat``), or the Responses body for an IR lifted from Responses."""
        if ir.api == "openai_responses":
            return emit_responses(ir, plan, reuse)
        return emit_chat(ir, plan, reuse, parts_roles=self.parts_roles(ir))

    def parts_roles(self, ir: TelosIR) -> frozenset[str]:
        """Roles whose string content this engine always sends as one text part (see ``emit_chat``)."""
        return frozenset()

    def parse_usage(
        self, usage: Mapping[str, Any] | None, *, diagnostics: Mapping[str, Any] | None = None
    ) -> UsageReport | None:
        """This vendor's usage shape (Chat Completions or Responses) → ``UsageReport``.

        ``diagnostics``: a Responses ``prompt_cache_diagnostics`` object (requested with
        ``prompt_cache_options.comparison_response_id``); anything but a ``cache_hit`` becomes the
        report's ``cache_miss_reason``, as the server sent it.
        """
        report = parse_openai_usage(usage, engine=self.profile.name)
        if (
            report is not None
            and isinstance(diagnostics, Mapping)
            and diagnostics.get("type") not in (None, "cache_hit")
        ):
            report = replace(report, cache_miss_reason=dict(diagnostics))
        return report

    def stream_usage(self) -> OpenAIChatStreamUsage:
        """A fresh accumulator for one stream."""
        return OpenAIChatStreamUsage(self.profile.name)
