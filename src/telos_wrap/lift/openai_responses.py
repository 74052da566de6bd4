"""Lift an OpenAI Responses request body (``responses.create`` and friends) into the TELOS IR.

Shapes: openai 3.54 ``types/responses/response_create_params.py``, ``response_input_item_param.py``,
``tool_param.py``; what telos does with each is written down in docs/engines.md ("OpenAI Responses").

* ``instructions`` (a string) → the IR ``system`` segment, split like a system prompt: per-turn
  envelopes (``Current time: …``, ``<environment_info>``, learned volatile spans) become DROP pieces,
  the rest is PIN. Pieces are ``input_text`` parts; the engine joins the PIN text back into one
  ``instructions`` string. No ref-pool: ``instructions`` is one string and has no place for a stub.
* ``input`` → one IR message per input item, in order, none ever dropped, moved or merged:

  - message items (``{"role", "content"}``, ``type`` absent or ``"message"``): ``content`` as a string
    or a list of parts (``input_text``, ``input_image``, ``input_file``, ``output_text``...). A user's
    plain ``input_text`` part is split PIN / FOLD / DROP like chat user text; every other part travels
    verbatim (PIN in a user message, FOLD elsewhere);
  - every other item (``function_call``, ``function_call_output``, ``reasoning`` incl. its opaque
    ``encrypted_content``, built-in tool calls and outputs, ``item_reference``, ``compaction``...)
    is carried whole in ``TelosMessage.extra`` with no blocks: its bytes are canonical JSON of the
    item as sent, nothing else. Its IR role says who produced it: ``"tool"`` for the caller's outputs
    (``*_output``, ``mcp_approval_response``: the latest turn, like a chat tool message),
    ``"assistant"`` for the model's items, ``"item"`` for ``item_reference`` and item types this
    module does not know — those are recorded (``Transformation("passthrough-item")``).

  A string ``input`` is one user message remembered as a string (``INPUT_FORM``), re-emitted as a
  string while nothing forces the list form.
* ``tools`` → PIN ``tool_def`` blocks (function tools canonicalized like chat tools; built-in tools —
  ``web_search``, ``file_search``, ``code_interpreter``, ``computer_use_preview``, ``mcp`` — kept and
  ordered stably, see ``telos_wrap.ir.canon.tool_sort_key``).
* everything else (``model``, ``previous_response_id``, ``conversation``, ``store``, ``truncation``,
  ``context_management``, ``include``, ``prompt_cache_*``...) → ``TelosIR.params``, re-emitted as sent.

Server-held state: with ``previous_response_id`` or ``conversation`` the earlier turns live on the
server and ``input`` holds only the new items; telos lifts and stabilizes only what the request
carries and never re-sends or reorders history.

A caller's own ``prompt_cache_breakpoint`` on an input part is lifted out of the payload into the
block's ``extra`` (a marker is not content); the engine puts it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from telos_wrap.ir.canon import canonicalize_payload
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import (
    Band,
    BlockKind,
    ContentForm,
    TelosBlock,
    TelosIR,
    TelosMessage,
    Transformation,
)
from telos_wrap.ir.order import marker_carrier
from telos_wrap.lift.readable import check_responses
from telos_wrap.lift.user_split import DEFAULT_PATTERNS, SplitPatterns, split_text

__all__ = [
    "INPUT_FORM",
    "KNOWN_ITEM_TYPES",
    "MARKER",
    "item_role",
    "lift_openai_responses",
]

#: The content-part field of an explicit OpenAI cache breakpoint (openai 3.54
#: ``response_input_text_param.PromptCacheBreakpoint``, also on ``input_image`` / ``input_file``).
MARKER = "prompt_cache_breakpoint"
#: ``TelosMessage.extra`` key marking the message that stands for a string ``input`` (never sent).
INPUT_FORM = "oai_input_form"
_EMPTY: Mapping[str, Any] = MappingProxyType({})

# Part types (openai 3.54 ``response_input_content_param.py``, ``response_output_message_param.py``).
_PART_KINDS: Mapping[str, BlockKind] = {
    "input_text": BlockKind.TEXT,
    "output_text": BlockKind.TEXT,
    "input_image": BlockKind.IMAGE,
    "input_file": BlockKind.DOCUMENT,
}

#: Items the model produced (openai 3.54 ``response_input_item_param.py``); they are history (FOLD).
_MODEL_ITEMS = frozenset(
    {
        "function_call",
        "reasoning",
        "compaction",
        "web_search_call",
        "file_search_call",
        "computer_call",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "custom_tool_call",
        "tool_search_call",
        "program",
        "additional_tools",
        "configuration_update",
        "compaction_trigger",
    }
)
#: Items the caller sends back in answer to the model: each opens (or continues) a turn.
_CALLER_ITEMS = frozenset(
    {
        "function_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
        "custom_tool_call_output",
        "mcp_approval_response",
        "tool_search_output",
        "program_output",
    }
)
#: Every non-message item type this lift knows (anything else passes through and is recorded).
KNOWN_ITEM_TYPES = _MODEL_ITEMS | _CALLER_ITEMS | {"item_reference", "message"}


def item_role(item: Mapping[str, Any]) -> str:
    """The IR role of a non-message input item: ``"tool"``, ``"assistant"`` or ``"item"``."""
    kind = item.get("type")
    if kind in _CALLER_ITEMS:
        return "tool"
    if kind in _MODEL_ITEMS:
        return "assistant"
    return "item"


def _is_message(item: Mapping[str, Any]) -> bool:
    return item.get("type", "message") == "message" and isinstance(item.get("role"), str)


def _split_marker(raw: Any) -> tuple[Any, Mapping[str, Any]]:
    if isinstance(raw, Mapping) and MARKER in raw:
        marker = raw[MARKER]
        rest = {key: value for key, value in raw.items() if key != MARKER}
        return rest, ({MARKER: canonicalize_payload(marker)} if marker is not None else _EMPTY)
    return raw, _EMPTY


def _kind(payload: Any) -> BlockKind:
    kind = payload.get("type") if isinstance(payload, Mapping) else None
    return _PART_KINDS.get(kind, BlockKind.PASSTHROUGH) if isinstance(kind, str) else BlockKind.PASSTHROUGH


def _plain_input_text(payload: Any) -> str | None:
    """The text of a part that is exactly ``{"type": "input_text", "text": str}`` (only those are split)."""
    if (
        isinstance(payload, Mapping)
        and set(payload) == {"type", "text"}
        and payload.get("type") == "input_text"
        and isinstance(payload.get("text"), str)
    ):
        return str(payload["text"])
    return None


def _split(
    block_id: str,
    payload: Any,
    marker: Mapping[str, Any],
    *,
    patterns: SplitPatterns,
    with_fold: bool,
    tag: str,
    ends_system: bool = False,
) -> list[TelosBlock]:
    """PIN / FOLD / DROP pieces of a plain input_text part (a caller marker stays on the last non-DROP).

    ``ends_system``: the text is ``instructions`` (a final clock may stay in place:
    ``SplitPatterns.clock_in_place``)."""
    text = _plain_input_text(payload)
    split = (
        split_text(text, patterns, with_fold=with_fold, ends_system=ends_system) if text is not None else None
    )
    if split is None or split.is_plain:
        return [
            TelosBlock(
                id=block_id, band=Band.PIN, kind=_kind(payload), payload=payload, source_tag=tag, extra=marker
            )
        ]
    pieces: list[TelosBlock] = []
    for band in (Band.PIN, Band.FOLD, Band.DROP):
        # Moved system text is rendered whole, with its context (``TextSplit.moved``).
        piece = split.moved if band is Band.DROP and tag == "system" else split.joined(band)
        if piece:
            name = band.name.lower()
            pieces.append(
                TelosBlock(
                    id=f"{block_id}.{name}",
                    band=band,
                    kind=BlockKind.TEXT,
                    payload={"type": "input_text", "text": piece},
                    source_tag=f"{tag}:split-{name}",
                )
            )
    if marker:
        keep = marker_carrier(pieces)
        pieces[keep] = pieces[keep].with_extra({**pieces[keep].extra, **marker})
    return pieces


def _lift_instructions(text: str, patterns: SplitPatterns) -> tuple[TelosBlock, ...]:
    return tuple(
        _split(
            "instructions",
            {"type": "input_text", "text": text},
            _EMPTY,
            patterns=patterns,
            with_fold=False,
            tag="system",
            ends_system=True,
        )
    )


def _lift_message(index: int, item: Mapping[str, Any], patterns: SplitPatterns) -> TelosMessage:
    role = str(item["role"])
    extra = {key: value for key, value in item.items() if key not in ("role", "content")}
    content = item.get("content")
    text_type = "output_text" if role == "assistant" else "input_text"
    form: ContentForm
    if isinstance(content, str):
        form, raw_parts = "string", [{"type": text_type, "text": content}]
    elif isinstance(content, list):
        form, raw_parts = "list", content
    else:  # no content or a shape the SDK does not define: verbatim
        return TelosMessage(
            role=role,
            blocks=(),
            content_form="absent" if "content" not in item else "null",
            extra={**extra, **({"content": content} if "content" in item else {})},
        )
    blocks: list[TelosBlock] = []
    for position, raw in enumerate(raw_parts):
        payload, marker = _split_marker(raw)
        block_id = f"input[{index}][{position}]"
        if role == "user":
            blocks.extend(_split(block_id, payload, marker, patterns=patterns, with_fold=True, tag="user"))
            continue
        blocks.append(
            TelosBlock(
                id=block_id,
                band=Band.FOLD,
                kind=_kind(payload),
                payload=payload,
                source_tag=role,
                extra=marker,
            )
        )
    if form == "string" and len(blocks) != 1:  # a split string can no longer be one string
        form = "list"
    return TelosMessage(role=role, blocks=tuple(blocks), content_form=form, extra=extra)


def _lift_item(index: int, item: Any, patterns: SplitPatterns, records: list[Transformation]) -> TelosMessage:
    if isinstance(item, Mapping) and _is_message(item):
        return _lift_message(index, item, patterns)
    if isinstance(item, Mapping):
        role = item_role(item)
        if item.get("type") not in KNOWN_ITEM_TYPES:
            records.append(
                Transformation(
                    kind="passthrough-item",
                    where=f"input[{index}]",
                    detail=f"input item of type {item.get('type')!r} is not modelled: sent as is, in place",
                )
            )
        return TelosMessage(role=role, blocks=(), content_form="absent", extra=dict(item))
    raise TypeError(f"input[{index}] is a {type(item).__name__}, not an input item object")


def lift_openai_responses(
    body: Mapping[str, Any],
    *,
    session_id: str,
    hints: TelosHints | None = None,
    patterns: SplitPatterns = DEFAULT_PATTERNS,
) -> TelosIR:
    """Lift a plain-JSON Responses body (no SDK sentinels) into a ``TelosIR`` (api ``openai_responses``).

    ``body`` is never modified; payloads are shared with it, never mutated. Raises
    ``TelosUnreadableError`` for a shape it cannot read faithfully (``lift/readable.py``; the patch
    layer sends such a body as is).
    """
    check_responses(body)
    if hints is not None and hints.drop_patterns:
        if hints.drop_scope == "all":
            patterns = patterns.extended(drop=hints.drop_patterns)
        else:
            patterns = patterns.extended(system_drop=hints.drop_patterns)
    params: dict[str, Any] = {
        key: value for key, value in body.items() if key not in ("instructions", "input", "tools")
    }
    tools_raw = body.get("tools")
    tools: tuple[TelosBlock, ...] = ()
    if isinstance(tools_raw, list):
        tools = tuple(
            TelosBlock(
                id=f"tools[{i}]", band=Band.PIN, kind=BlockKind.TOOL_DEF, payload=tool, source_tag="tools"
            )
            for i, tool in enumerate(tools_raw)
        )
    elif "tools" in body:
        params["tools"] = tools_raw
    instructions = body.get("instructions")
    system: tuple[TelosBlock, ...] = ()
    if isinstance(instructions, str) and instructions:
        system = _lift_instructions(instructions, patterns)
    elif "instructions" in body:
        params["instructions"] = instructions
    records: list[Transformation] = []
    messages: list[TelosMessage] = []
    raw_input = body.get("input")
    if isinstance(raw_input, str):
        message = _lift_message(0, {"role": "user", "content": raw_input}, patterns.for_messages())
        messages.append(
            TelosMessage(message.role, message.blocks, message.content_form, {INPUT_FORM: "string"})
        )
    elif isinstance(raw_input, list) and raw_input:
        messages.extend(
            _lift_item(index, item, patterns.for_messages(), records) for index, item in enumerate(raw_input)
        )
    elif "input" in body:
        params["input"] = raw_input
    return TelosIR(
        session_id=session_id,
        api="openai_responses",
        tools=tools,
        system=system,
        messages=tuple(messages),
        params=params,
        system_form="string" if system else "absent",
        tools_form="list" if isinstance(tools_raw, list) else "absent",
        records=tuple(records),
    )
