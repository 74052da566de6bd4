"""The OpenAI Responses wire: the body for an IR lifted by ``telos_wrap.lift.openai_responses``.

Shared by every engine behind ``/v1/responses`` (OpenAI/Azure, vLLM, SGLang, generic); each engine's
``plan`` decides its own extras, this module only writes (docs/engines.md, "OpenAI Responses"):

* ``instructions``: the text of the remaining system blocks, joined (a DROP envelope moved to the
  latest turn is no longer in it); omitted when nothing is left of it;
* ``input``: one item per IR message, in order. Message items get ``role`` + ``content`` (a string
  when it was sent as one and is still one plain text part); every other item is re-emitted from
  what it carried, canonical JSON of the item as sent. A string ``input`` stays a string while its
  one message is still one plain text part;
* ``tools``: the (canonicalized, stably ordered) tool definitions;
* ``prompt_cache_breakpoint``: the caller's own markers are put back on their parts, the plan's own
  added (input parts only: ``instructions`` is a string and cannot carry one);
* every other top-level key as sent, then ``plan.extras``. Keys are canonical (sorted), like chat.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from telos_wrap.engines.base import Breakpoint, EmitPlan, PrefixTables
from telos_wrap.engines.openai_markers import Location, _with_marker
from telos_wrap.ir.model import TelosIR, TelosMessage

__all__ = ["INPUT_FORM", "RESPONSES_TEXT_PARTS", "emit_responses", "instructions_text"]

#: Shared with the lift (``telos_wrap.lift.openai_responses.INPUT_FORM``); engines may not import it.
INPUT_FORM = "oai_input_form"
#: Plain text part types of the Responses wire.
RESPONSES_TEXT_PARTS = frozenset({"input_text", "output_text"})


def instructions_text(ir: TelosIR) -> str:
    """The ``instructions`` string of ``ir``: the text of its system blocks, in order."""
    texts: list[str] = []
    for block in ir.system:
        payload = block.payload
        text = payload.get("text") if isinstance(payload, Mapping) else None
        if isinstance(text, str):
            texts.append(text)
    return "".join(texts)


def _plain(part: Any) -> str | None:
    if (
        isinstance(part, Mapping)
        and set(part) == {"type", "text"}
        and part.get("type") in RESPONSES_TEXT_PARTS
        and isinstance(part.get("text"), str)
    ):
        return str(part["text"])
    return None


def _emit_item(
    message: TelosMessage, m_index: int, ours: Mapping[Location, Breakpoint]
) -> tuple[dict[str, Any], bool]:
    """``(wire item, still a plain string)`` for one IR message."""
    wire = {key: value for key, value in message.extra.items() if key != INPUT_FORM}
    if wire.get("type", "message") != "message" or message.role == "item":
        # A non-message item, as it came (canonical): an item the lift does not model (``role``
        # "item": an unknown type, or no type and no role, such as ``{"id": "ref_fixture"}``) is
        # never given a role.
        return dict(sorted(wire.items())), False
    wire["role"] = message.role
    string = False
    if message.content_form not in ("absent", "null"):
        parts = [
            _with_marker(block.payload, block, ours.get(("messages", m_index, b_index)))
            for b_index, block in enumerate(message.blocks)
        ]
        text = _plain(parts[0]) if len(parts) == 1 else None
        if message.content_form == "string" and text is not None:
            wire["content"] = text
            string = True
        else:
            wire["content"] = parts
    return dict(sorted(wire.items())), string


def emit_responses(ir: TelosIR, plan: EmitPlan, reuse: PrefixTables | None = None) -> dict[str, Any]:
    """The Responses body for ``ir`` with ``plan``'s breakpoints and extras (see module docstring).

    ``reuse`` is accepted for the engine contract; the Responses lift has no settled history (each
    request carries only what it sends), so nothing is reused.
    """
    ours: dict[Location, Breakpoint] = {
        (bp.segment, bp.message, bp.block): bp
        for bp in plan.breakpoints
        if bp.name != "caller" and bp.segment == "messages"
    }
    body: dict[str, Any] = dict(ir.params)
    if ir.system_form == "string":
        instructions = instructions_text(ir)
        if instructions:
            body["instructions"] = instructions
    if ir.tools_form == "list":
        body["tools"] = [tool.payload for tool in ir.tools]
    if ir.messages:
        items = [_emit_item(message, index, ours) for index, message in enumerate(ir.messages)]
        if len(items) == 1 and items[0][1] and INPUT_FORM in ir.messages[0].extra:
            body["input"] = items[0][0]["content"]
        else:
            body["input"] = [item for item, _ in items]
    body.update(plan.extras)
    return dict(sorted(body.items()))
