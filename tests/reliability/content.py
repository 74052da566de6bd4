"""Content accounting: what a request says, read the same way from what the caller built and what telos sent.

These helpers know the wire formats and the *documented* transformations (README "What telos_wrap
changes in your request") and nothing of telos' code: the envelope patterns below are written from
the documentation, and ``[ref:…]`` decorations from the documented ref-pool rendering. A test compares
the caller's body with the emitted one and allows exactly those changes, each of which must also be
in ``prepared.ir.records``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

#: The per-turn envelopes telos documents as DROP (README: ``Current time: …``, ``<environment_info>``,
#: ``<system-reminder>``, ``<command-*>``). A clock line starts a line or directly follows an envelope.
ENVELOPE = re.compile(
    r"(?:<(environment_info|system-reminder|command-message|command-name)\b[^>]*>.*?</\1\s*>"
    r"|(?:^|(?<=>))[ \t]*Current time:[^\n]*)",
    re.DOTALL | re.MULTILINE,
)
REF_STUB = re.compile(r"\A\[ref:system-doc-\d+\]\Z")
REF_ENTRY = re.compile(r"\A\[ref:system-doc-\d+\]\n")
DOCUMENTED_RECORDS = frozenset(
    {
        "drop-moved",
        "drop-pruned",
        "ref-stub",
        "reordered",
        "tools-sorted",
        "tools-kept",
        "content-shape",
        "markers-trimmed",
    }
)


def canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def without(payload: Any, *keys: str) -> Any:
    if isinstance(payload, Mapping):
        return {k: v for k, v in payload.items() if k not in keys}
    return payload


def _sorted_required(schema: Any) -> Any:
    """A JSON schema with every ``required`` list sorted (the documented schema canonicalization)."""
    if isinstance(schema, Mapping):
        return {
            k: sorted(v) if k == "required" and isinstance(v, list) else _sorted_required(v)
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [_sorted_required(item) for item in schema]
    return schema


def envelopes(text: str) -> list[str]:
    return [m.group(0) for m in ENVELOPE.finditer(text)]


def cores(text: str) -> list[str]:
    """The non-envelope pieces of ``text``, stripped, non-empty."""
    return [piece.strip() for piece in ENVELOPE.split(text)[::2] if piece and piece.strip()]


def envelope_only(blocks: list[Any]) -> bool:
    """A message whose every block is text made of envelopes (and whitespace) only."""
    return bool(blocks) and all(
        isinstance(b, Mapping)
        and b.get("type") == "text"
        and isinstance(b.get("text"), str)
        and envelopes(b["text"])
        and not cores(b["text"])
        for b in blocks
    )


def chars(texts: Iterable[str]) -> Counter[str]:
    counter: Counter[str] = Counter()
    for text in texts:
        counter.update(text)
    return counter


def undecorate(system_texts: list[str]) -> tuple[list[str], int]:
    """System texts without ref-pool decorations: stubs removed, entry headers cut. Returns the stub count."""
    kept, stubs = [], 0
    for text in system_texts:
        if REF_STUB.match(text):
            stubs += 1
            continue
        kept.append(REF_ENTRY.sub("", text, count=1))
    return kept, stubs


# -- Anthropic ------------------------------------------------------------------------------------


def a_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def a_system_texts(body: Mapping[str, Any]) -> list[str]:
    return [
        b["text"] for b in a_blocks(body.get("system")) if isinstance(b, Mapping) and b.get("type") == "text"
    ]


def a_message_texts(message: Mapping[str, Any]) -> list[str]:
    return [
        b["text"]
        for b in a_blocks(message.get("content"))
        if isinstance(b, Mapping) and b.get("type") == "text"
    ]


def a_payloads(body: Mapping[str, Any]) -> Counter[str]:
    """Every non-text content block (images, documents, thinking, tool_use, tool_result), marker removed."""
    found: Counter[str] = Counter()
    for message in body.get("messages", []):
        for block in a_blocks(message.get("content")):
            if isinstance(block, Mapping) and block.get("type") != "text":
                found[canon(one_shape(without(block, "cache_control")))] += 1
    return found


def one_shape(block: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ``tool_result`` whose content is one plain text block, with its string (docs/engines.md)."""
    content = block.get("content")
    if (
        block.get("type") == "tool_result"
        and isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], Mapping)
        and set(content[0]) == {"type", "text"}
    ):
        return {**block, "content": content[0]["text"]}
    return block


def a_tools(body: Mapping[str, Any]) -> Counter[str]:
    tools = body.get("tools") or []
    return Counter(
        canon({**without(tool, "cache_control"), "input_schema": _sorted_required(tool.get("input_schema"))})
        for tool in tools
    )


def a_normal(block: Any) -> Any:
    """A block without its marker, a tool definition with its schema's ``required`` sorted."""
    block = without(block, "cache_control")
    if isinstance(block, Mapping) and "input_schema" in block:
        block = {**block, "input_schema": _sorted_required(block["input_schema"])}
    return block


def a_markers(body: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(where, block, marker)`` for every ``cache_control`` in render order (top-level last)."""
    found: list[tuple[str, Any, Any]] = []
    for i, tool in enumerate(body.get("tools") or []):
        if "cache_control" in tool:
            found.append((f"tools[{i}]", tool, tool["cache_control"]))
    system = body.get("system")
    for i, block in enumerate(system if isinstance(system, list) else []):
        if "cache_control" in block:
            found.append((f"system[{i}]", block, block["cache_control"]))
    for m, message in enumerate(body.get("messages", [])):
        content = message.get("content")
        for i, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, Mapping) and "cache_control" in block:
                found.append((f"messages[{m}][{i}]", block, block["cache_control"]))
    if body.get("cache_control"):
        found.append(("top-level", None, body["cache_control"]))
    return found


# -- OpenAI ---------------------------------------------------------------------------------------

O_MARKER = "prompt_cache_breakpoint"


def o_parts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def o_leading_system(messages: list[Mapping[str, Any]]) -> int:
    """How many messages open the conversation as system/developer messages."""
    count = 0
    for message in messages:
        if message.get("role") not in ("system", "developer"):
            break
        count += 1
    return count


def o_texts(message: Mapping[str, Any]) -> list[str]:
    return [
        p["text"]
        for p in o_parts(message.get("content"))
        if isinstance(p, Mapping) and p.get("type") == "text"
    ]


def o_payloads(body: Mapping[str, Any]) -> Counter[str]:
    """Non-text user parts, and every assistant / mid-conversation system message whole."""
    found: Counter[str] = Counter()
    messages = body.get("messages", [])
    lead = o_leading_system(messages)
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant" or (role in ("system", "developer") and index >= lead):
            found[canon(_unmarked(message))] += 1
        elif role in ("user", "tool"):
            for part in o_parts(message.get("content")):
                if isinstance(part, Mapping) and part.get("type") != "text":
                    found[canon(without(part, O_MARKER))] += 1
    return found


def _unmarked(message: Mapping[str, Any]) -> Any:
    """A message with its content as parts and no breakpoint (telos may add one, as a parts array)."""
    content = message.get("content")
    if not isinstance(content, (str, list)):
        return message
    return {**message, "content": [without(part, O_MARKER) for part in o_parts(content)]}


def o_tools(body: Mapping[str, Any]) -> Counter[str]:
    out: Counter[str] = Counter()
    for tool in body.get("tools") or []:
        function = dict(tool.get("function") or {})
        if "parameters" in function:
            function["parameters"] = _sorted_required(function["parameters"])
        out[canon({**tool, "function": function})] += 1
    return out


def o_markers(body: Mapping[str, Any]) -> list[tuple[Any, Mapping[str, Any], Any]]:
    """``(role, part, marker)`` for every ``prompt_cache_breakpoint``."""
    found: list[tuple[Any, Mapping[str, Any], Any]] = []
    for message in body.get("messages", []):
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, Mapping) and O_MARKER in part:
                found.append((message.get("role"), part, part[O_MARKER]))
    return found
