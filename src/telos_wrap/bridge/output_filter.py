"""The output filter, as one bridge pass over the tool results of a request (docs/output-filter.md).

Pure: the session hands in what it recorded (``recorded``: result digest → filter id), the pass
hands back the IR with results filtered and one ``FilteredOutput`` per result it touched
(``TelosIR.outputs``), which the session records. The rules that keep the cache:

* a result is decided **once**, on the request where it is new (after the conversation's last
  assistant message); from then on the session's record says which filter it got, and exactly that
  filter (by id and version, ``filters.apply``) is re-applied on every later request, whatever the
  call's mode is by then — so it is sent with the same bytes by every worker, across restarts;
* a result of history with no record was sent whole before: it stays whole;
* settled messages (``ir.settled``, reused from the session's memo) are already in the form they
  were sent in and are left alone.

Tool results are Anthropic ``tool_result`` blocks, OpenAI Chat ``tool`` messages and Responses
``function_call_output`` items whose content is text; the command comes from the tool call each
answers (``tool_use.input``, function ``arguments``, Responses ``function_call``) in the same request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from telos_wrap.filters import Decision, apply, command_of, decide
from telos_wrap.ir.model import BlockKind, FilteredOutput, TelosBlock, TelosIR, TelosMessage, Transformation

__all__ = ["MAX_RECORDED", "filter_outputs", "result_key"]

_NOTHING: Mapping[str, str] = {}
#: Results a session records at most; past it no new result is filtered (one that was could not be
#: sent alike later without its record).
MAX_RECORDED = 8192


def result_key(call_id: str, text: str) -> str:
    """The digest a session records a result under: its call id and original text (12 hex)."""
    digest = hashlib.blake2b(digest_size=6)
    digest.update(call_id.encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _calls(ir: TelosIR) -> dict[str, tuple[str, str | None]]:
    """Call id → (tool name, command) of every tool call in the request."""
    found: dict[str, tuple[str, str | None]] = {}
    for message in ir.messages:
        if message.role != "assistant":
            continue
        for block in message.blocks:
            payload = block.payload
            if block.kind is BlockKind.TOOL_USE and isinstance(payload, Mapping):
                found[str(payload.get("id", ""))] = (
                    str(payload.get("name", "")),
                    command_of(payload.get("input")),
                )
        extra = message.extra
        calls = extra.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                function = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(function, Mapping):
                    found[str(call.get("id", ""))] = (
                        str(function.get("name", "")),
                        command_of(function.get("arguments")),
                    )
        kind = extra.get("type")
        if kind in ("function_call", "custom_tool_call"):
            arguments = extra.get("arguments", extra.get("input"))
            found[str(extra.get("call_id", ""))] = (str(extra.get("name", "")), command_of(arguments))
        elif kind in ("local_shell_call", "shell_call"):
            action = extra.get("action")
            command = action.get("command", action.get("commands")) if isinstance(action, Mapping) else None
            found[str(extra.get("call_id", ""))] = (kind, command_of({"command": command}))
    return found


def _result_text(message: TelosMessage, block: TelosBlock | None) -> tuple[str, str, bool] | None:
    """``(call id, text, is_error)`` of a tool result whose content is one text, else ``None``."""
    if block is not None:
        payload = block.payload
        if block.kind is BlockKind.TOOL_RESULT and isinstance(payload, Mapping):
            content = payload.get("content")
            if isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping):
                part = content[0]
                content = (
                    part.get("text") if part.get("type") == "text" and set(part) <= {"type", "text"} else None
                )
            if isinstance(content, str):
                return str(payload.get("tool_use_id", "")), content, payload.get("is_error") is True
            return None
        if message.role == "tool" and block.kind is BlockKind.TEXT and isinstance(payload, Mapping):
            text = payload.get("text")
            if isinstance(text, str) and len(message.blocks) == 1:
                return str(message.extra.get("tool_call_id", "")), text, False
        return None
    extra = message.extra
    if (
        message.role == "tool"
        and extra.get("type") == "function_call_output"
        and isinstance(extra.get("output"), str)
    ):
        return str(extra.get("call_id", "")), extra["output"], False
    return None


def _with_text(message: TelosMessage, block: TelosBlock | None, text: str) -> TelosMessage:
    """``message`` with the result's text replaced (the block's content, or the item's output)."""
    if block is None:
        return TelosMessage(
            message.role, message.blocks, message.content_form, {**message.extra, "output": text}
        )
    payload = dict(block.payload)
    if block.kind is BlockKind.TOOL_RESULT:
        content = payload["content"]
        payload["content"] = text if isinstance(content, str) else [{**content[0], "text": text}]
    else:
        payload["text"] = text
    blocks = tuple(block.with_payload(payload) if b is block else b for b in message.blocks)
    return message.with_blocks(blocks)


def filter_outputs(ir: TelosIR, *, spec: Any = None, recorded: Mapping[str, str] = _NOTHING) -> TelosIR:
    """``ir`` with its tool results filtered (module docstring). ``spec``: the call's mode
    (``"off"``, ``"safe"``, ``"aggressive"``) or ``filters.OutputFilter``; ``None`` is ``"off"``."""
    on = spec is not None and spec != "off"
    if not on and not recorded:
        return ir
    messages = ir.messages
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    calls: dict[str, tuple[str, str | None]] | None = None
    seen: set[str] = set()
    out = list(messages)
    outputs: list[FilteredOutput] = []
    records: list[Transformation] = []
    for index, message in enumerate(messages):
        targets: tuple[TelosBlock | None, ...] = message.blocks if message.blocks else (None,)
        for position, block in enumerate(targets):
            found = _result_text(message, block)
            if found is None:
                continue
            call_id, text, is_error = found
            if index < ir.settled:
                seen.add(text)  # as it was sent: the text a repeat would point at
                continue
            key = result_key(call_id, text)
            fresh = False
            recorded_id = recorded.get(key)
            if recorded_id is not None:
                recorded_id = recorded_id.split("|", 1)[0]  # "filter_id|before|after"
            if calls is None:
                calls = _calls(ir)
            tool, command = calls.get(call_id, ("", None))
            if recorded_id is not None:
                decision = apply(recorded_id, text, command=command, tool=tool or None, user=spec)
                if decision.filter_id is None and not decision.fallback:
                    decision = Decision(text, None, "")  # recorded, but the filter leaves it as is
            elif index > last_assistant and on and len(recorded) < MAX_RECORDED:
                fresh = True
                decision = decide(text, spec, command=command, tool=tool or None, is_error=is_error)
                if text in seen or (decision.filter_id is not None and decision.text in seen):
                    # The model has this very text above (sent whole, or filtered alike): a pointer.
                    again = decide(
                        text, spec, command=command, tool=tool or None, is_error=is_error, seen_before=True
                    )
                    decision = again if again.filter_id is not None else decision
            else:
                seen.add(text)
                continue
            seen.add(decision.text)
            if decision.filter_id is None and not decision.fallback:
                continue
            where = f"messages[{index}]" + (f"[{position}]" if block is not None else "")
            outputs.append(
                FilteredOutput(
                    where,
                    tool,
                    key,
                    decision.filter_id or (recorded_id if decision.fallback else None),
                    len(text),
                    len(decision.text),
                    fresh,
                    decision.fallback,
                )
            )
            if decision.fallback:
                records.append(
                    Transformation(
                        kind="output-filter-fallback",
                        where=where,
                        detail=f"the output filter {recorded_id or 'of this call'} raised or is not "
                        f"available here: the {tool or 'tool'} result is sent whole",
                    )
                )
                continue
            out[index] = _with_text(
                out[index], block if block is None else out[index].blocks[position], decision.text
            )
            records.append(
                Transformation(
                    kind="output-filtered",
                    where=where,
                    chars=len(text) - len(decision.text),
                    detail=f"{tool or 'tool'} result filtered by {decision.filter_id}: {len(text):,} → "
                    f"{len(decision.text):,} characters"
                    + ("" if fresh else " (as first sent, from the session's record)"),
                )
            )
    if not outputs:
        return ir
    return replace(ir, messages=tuple(out), records=ir.records + tuple(records), outputs=tuple(outputs))
