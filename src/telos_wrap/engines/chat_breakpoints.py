"""Chat Completions routes to a model that caches at breakpoints: Claude behind OpenRouter, a LiteLLM
proxy, or LiteLLM's own providers (``anthropic/``, ``bedrock/``, ``vertex_ai/``).

Such a route speaks the OpenAI wire format but translates it to the Anthropic Messages API, and the
model behind it writes cache entries only at ``cache_control`` breakpoints (docs/engines.md, *Routes*):
without one a careless harness reads nothing. Vendor and route facts this module relies on
(sources named in docs/engines.md, *Routes*):

* the breakpoint is ``cache_control: {"type": "ephemeral"[, "ttl": "1h"]}`` on a content part (text
  parts of ``system``, ``user`` and ``tool`` messages); the route moves it onto the Anthropic block
  the part becomes (a ``tool`` message's part lands on, or inside, its ``tool_result``);
* every ``system`` message, wherever it stands, is hoisted into Anthropic's ``system`` prompt, so a
  volatile envelope must join the latest user/tool turn, never a trailing system message (the
  pipeline asks ``system_messages_hoisted``);
* the Anthropic rules hold after translation: ≤ 4 breakpoints counting the caller's own, a 20-position
  lookback (an assistant's ``tool_calls`` become a run of ``tool_use`` blocks, consecutive ``tool``
  messages one run of ``tool_result`` blocks), longer TTLs first.

Placement is the Anthropic engine's own planner (``engines.anthropic``) run on an *Anthropic view* of
the chat IR: the same tools, system and messages, block for block, where a caller's part-level
``cache_control`` is a marker (counted, kept), a block this route cannot mark (assistant parts, images,
anything but a text part of a system/user/tool message) is not markable, and an assistant's
``tool_calls`` count as one lookback position. BP-T (the end of the tools) goes on the last tool's own
``cache_control`` only where the route reads it (LiteLLM); OpenRouter documents no marker on an
OpenAI-format tool, so there the tools are covered only by the markers after them. The plan's
locations are the chat IR's own, so ``emit_chat`` writes them back as part-level ``cache_control``.
With breakpoints on, the string content of ``system``, ``user`` and ``tool`` messages is sent as one
text part on every turn (I2 on the wire, docs/engines.md).

A model that is not Claude on these routes (OpenAI, Gemini, Llama ... models behind the router) caches
automatically: the request gets the generic treatment, canonical bytes and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from telos_wrap.engines._openai_compat import Location, OpenAICompatEngine, emit_chat, is_chat
from telos_wrap.engines.anthropic import AnthropicEngine
from telos_wrap.engines.base import EmitPlan, EngineProfile, PrefixTables
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Band, BlockKind, TelosBlock, TelosIR, TelosMessage

__all__ = [
    "BREAKPOINT_ROLES",
    "BreakpointChatEngine",
    "LiteLLMEngine",
    "OpenRouterEngine",
    "caches_at_breakpoints",
]

#: The part-level marker field these routes read (the Anthropic name, on an OpenAI content part).
CACHE_CONTROL = "cache_control"
#: Roles whose text parts can carry a breakpoint on these routes; their string content is always
#: sent as one text part while breakpoints are on (docs/engines.md, *Wire shapes*).
BREAKPOINT_ROLES = frozenset({"system", "developer", "user", "tool"})
#: What the planner sees for a block this route cannot mark (not a type that accepts cache_control).
_UNMARKABLE: Mapping[str, Any] = {"type": "unmarkable"}
_VIEW_TABLE = "chat-breakpoints.view"


def caches_at_breakpoints(model: object) -> bool:
    """True for a Claude model by any route's name for it (``anthropic/claude-sonnet-4.5``,
    ``claude-sonnet-4-5@20250929``, ``us.anthropic.claude-...-v1:0``, a proxy alias ``claude-fast``)."""
    return isinstance(model, str) and "claude" in model.lower()


def _marker_view(block: TelosBlock, markable: bool) -> TelosBlock:
    """``block`` as the Anthropic planner reads it: the caller's ``cache_control`` as a marker."""
    payload = block.payload
    has_marker = isinstance(payload, Mapping) and payload.get(CACHE_CONTROL) is not None
    if not has_marker and markable:
        return block
    extra = dict(block.extra)
    if has_marker:
        extra[CACHE_CONTROL] = payload[CACHE_CONTROL]
        payload = {key: value for key, value in payload.items() if key != CACHE_CONTROL}
    if not markable:
        payload = _UNMARKABLE
    return TelosBlock(block.id, block.band, block.kind, payload, block.ref_slug, block.source_tag, extra)


def _markable_part(block: TelosBlock, role: str) -> bool:
    payload = block.payload
    return role in BREAKPOINT_ROLES and isinstance(payload, Mapping) and payload.get("type") == "text"


def _view_message(message: TelosMessage) -> TelosMessage:
    blocks = tuple(_marker_view(block, _markable_part(block, message.role)) for block in message.blocks)
    if message.role == "assistant" and message.extra.get("tool_calls"):
        # The route renders the calls as a run of tool_use blocks: one lookback position.
        blocks += (TelosBlock(f"{message.role}.tool_calls", Band.FOLD, BlockKind.TOOL_USE, _UNMARKABLE),)
    if all(a is b for a, b in zip(blocks, message.blocks, strict=False)) and len(blocks) == len(
        message.blocks
    ):
        return message
    return TelosMessage(message.role, blocks, message.content_form, message.extra)


def anthropic_view(ir: TelosIR, reuse: PrefixTables | None = None) -> TelosIR:
    """The chat IR as the Anthropic planner reads it (module docstring); block indices unchanged.

    With ``reuse`` the view of each settled message is made once and shared by later turns, so the
    planner's own per-message tables keep being reused (they are keyed on message identity).
    """
    rows: list[TelosMessage] = reuse.rows(_VIEW_TABLE, ir.messages) if reuse is not None else []
    for message in ir.messages[len(rows) :]:
        rows.append(_view_message(message))
    tools = tuple(_marker_view(tool, True) for tool in ir.tools)
    system = tuple(_marker_view(block, _markable_part(block, "system")) for block in ir.system)
    return replace(ir, tools=tools, system=system, messages=tuple(rows))


class BreakpointChatEngine(OpenAICompatEngine):
    """Engine adapter for a Chat Completions route to a breakpoint-caching model (module docstring)."""

    profile = EngineProfile(
        name="breakpoint-chat",
        caching="explicit",
        max_breakpoints=4,
        read_multiplier=0.1,  # the Anthropic prices the route passes on
        write_multiplier=1.25,
    )
    stream_options_accepted: ClassVar[bool] = False
    #: Whether the route reads ``cache_control`` on an OpenAI-format tool definition (BP-T).
    tool_markers: ClassVar[bool] = False
    _planner: ClassVar[AnthropicEngine] = AnthropicEngine()

    def breakpoints_on(self, ir: TelosIR) -> bool:
        """Whether this request gets breakpoints: a chat request to a Claude model."""
        return is_chat(ir) and caches_at_breakpoints(ir.params.get("model"))

    def system_messages_hoisted(self, model: object) -> bool:
        """Whether the route moves every system message into the system prompt (module docstring)."""
        return caches_at_breakpoints(model)

    def plan(
        self,
        ir: TelosIR,
        hints: TelosHints,
        *,
        reuse: PrefixTables | None = None,
        fork: int | None = None,
        final: int | None = None,
    ) -> EmitPlan:
        """The Anthropic planner's breakpoints on the chat IR, or the generic plan for other models."""
        if not self.breakpoints_on(ir):
            return super().plan(ir, hints, reuse=reuse, fork=fork)
        planned = self._planner.plan(anthropic_view(ir, reuse), hints, reuse=reuse, fork=fork, final=final)
        if self.tool_markers:
            return planned
        kept = tuple(bp for bp in planned.breakpoints if bp.name == "caller" or bp.segment != "tools")
        notes = planned.notes
        if len(kept) < len(planned.breakpoints):
            notes += (f"BP-T not placed: {self.profile.name} documents no marker on an OpenAI-format tool",)
        return EmitPlan(breakpoints=kept, extras=planned.extras, notes=notes)

    def parts_roles(self, ir: TelosIR) -> frozenset[str]:
        """With breakpoints on, system/user/tool string content always goes out as one text part."""
        return BREAKPOINT_ROLES if self.breakpoints_on(ir) else frozenset()

    def emit(self, ir: TelosIR, plan: EmitPlan, *, reuse: PrefixTables | None = None) -> dict[str, Any]:
        """The chat body with the plan's breakpoints as part-level ``cache_control``."""
        if not self.breakpoints_on(ir):
            return super().emit(ir, plan, reuse=reuse)
        markers: dict[Location, Any] = {}
        strip: set[Location] = set()
        tool_marks: dict[int, Any] = {}
        for bp in plan.breakpoints:
            if bp.segment == "tools":
                if bp.name != "caller":  # the caller's own stays on its tool, as sent
                    tool_marks[bp.block] = _ephemeral(bp.ttl)
                continue
            location: Location = (bp.segment, bp.message, bp.block)
            if bp.name != "caller":
                markers[location] = _ephemeral(bp.ttl)
            elif bp.origin is not None and bp.origin[0] != "tools":
                # A caller's marker the planner moved (longer TTLs first): off its block, onto the new one.
                origin: Location = (bp.origin[0], bp.origin[1], bp.origin[2])
                markers[location] = _payload_at(ir, origin).get(CACHE_CONTROL)
                strip.add(origin)
        body = emit_chat(
            ir,
            plan,
            reuse,
            parts_roles=BREAKPOINT_ROLES,
            part_markers=(CACHE_CONTROL, markers, frozenset(strip)),
        )
        tools = body.get("tools")
        if tool_marks and isinstance(tools, list):
            body["tools"] = [
                dict(sorted({**tool, CACHE_CONTROL: tool_marks[index]}.items()))
                if index in tool_marks and isinstance(tool, Mapping)
                else tool
                for index, tool in enumerate(tools)
            ]
        return body


def _ephemeral(ttl: str | None) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def _payload_at(ir: TelosIR, location: Location) -> Mapping[str, Any]:
    segment, message, block = location
    payload = (
        ir.system[block].payload if segment == "system" else ir.messages[message or 0].blocks[block].payload
    )
    return payload if isinstance(payload, Mapping) else {}


class OpenRouterEngine(BreakpointChatEngine):
    """``openrouter.ai``: part-level ``cache_control`` for Claude models; canonical bytes otherwise."""

    profile = replace(BreakpointChatEngine.profile, name="openrouter")


class LiteLLMEngine(BreakpointChatEngine):
    """A LiteLLM proxy (named, never guessed) and LiteLLM's own providers (``patch/litellm.py``).

    LiteLLM also reads ``cache_control`` on a tool definition (LiteLLM 1.110 ``AnthropicConfig``'s
    tool mapping: the tool's own ``cache_control``), so BP-T is placed here too.
    """

    profile = replace(BreakpointChatEngine.profile, name="litellm")
    tool_markers = True
