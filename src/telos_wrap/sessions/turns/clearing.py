"""The context policy on a lifted request (pure): its tool uses as the planner sees them, and the
recorded folds applied.

* ``measure(ir, folds)``: each tool use of the request (``pressure.Unit``), the request's estimated
  input tokens with ``folds`` applied, and where its current turn starts;
* ``apply_clear_folds(ir, folds, hashes)``: each recorded ``ClearFold`` whose message the
  application still sends unchanged replaces that tool result's content with the placeholder (or the
  caller's summary) and, with ``clear_tool_inputs``, the call's input with an empty one;
* ``placeholder(name, tokens)``: what the model reads instead of a cleared result, and
  ``file_placeholder(path, tokens)`` inside a cleared ``<file path=…>`` block.

With the policy's ``clear_thinking`` (Anthropic), an earlier assistant turn's thinking is a unit too
(``THINKING_CALL``): its ``thinking`` / ``redacted_thinking`` blocks are left out whole (a client may
omit earlier turns' thinking; none is ever edited, and the current turn's is never a unit).

Per API, a tool result is: an Anthropic ``tool_result`` block (its ``content``), a Chat Completions
``tool`` message (its content), a Responses ``function_call_output`` / ``custom_tool_call_output``
item (its ``output``). Blocks are never removed, so a tool use and its result stay a pair.

A file block (``<file path=…>…</file>`` in a message's text, ``sessions/turns/files.py``) before
the current turn is a unit too (``call``: ``file:`` and a digest of the path): cleared, its content
becomes ``file_placeholder`` inside the same tag, the text around it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from telos_wrap.ir.canon import canonical_json
from telos_wrap.ir.model import Band, BlockKind, TelosBlock, TelosIR, TelosMessage, Transformation
from telos_wrap.sessions.durable.records import THINKING_CALL, ClearFold
from telos_wrap.sessions.durable.state import short_hash
from telos_wrap.sessions.turns.files import clear_text_files, file_key, message_paths, text_files
from telos_wrap.sessions.turns.pressure import Decision, Unit

__all__ = ["Measured", "apply_clear_folds", "file_placeholder", "folds_of", "measure", "placeholder"]

#: Estimated characters per token (docs/vendor-facts.md §9.3: the emulator's rule, ~4 bytes a token).
CHARS_PER_TOKEN = 4
_PLACEHOLDER_TOKENS = 40

_RESULT_ITEMS = ("function_call_output", "custom_tool_call_output")
_THINKING_TYPES = ("thinking", "redacted_thinking")
_CALL_ITEMS = ("function_call", "custom_tool_call")


def placeholder(name: str, tokens: int) -> str:
    """The text a cleared tool result becomes: what was there, and what to do to see it again."""
    return (
        f"[telos_wrap cleared this result of the tool {name} (about {tokens:,} tokens) to keep the "
        f"conversation within its context budget. If you need it, run {name} again.]"
    )


def file_placeholder(path: str, tokens: int) -> str:
    """The content a cleared file block gets (inside its own ``<file path=…>`` tag): what was
    there, and what to do to see it again."""
    return (
        f"[telos_wrap cleared the content of this file (about {tokens:,} tokens) to keep the "
        f"conversation within its context budget. If you need it, read {path} again.]"
    )


def _tokens(value: Any) -> int:
    text = value if isinstance(value, str) else canonical_json(value)
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def call_key(call_id: str) -> str:
    """The digest a ``ClearFold`` names a tool call by (no id text in the store)."""
    return short_hash(call_id.encode("utf-8"))


@dataclass(frozen=True, slots=True)
class _Result:
    message: int
    call_id: str
    content: Any


@dataclass(frozen=True, slots=True)
class Measured:
    """A request as the planner sees it: ``units``, ``total`` tokens, the ``current`` turn's start,
    for each call id the message holding the call (for ``clear_tool_inputs``), and ``turn``: the
    tokens of the current turn (what one turn adds)."""

    units: tuple[Unit, ...]
    total: int
    current: int
    uses: Mapping[str, int]
    turn: int = 0

    @property
    def results(self) -> tuple[Unit, ...]:
        """The tool results among the units (no thinking, no file blocks)."""
        return tuple(unit for unit in self.units if unit.call != THINKING_CALL and not unit.file)


def _results(ir: TelosIR) -> Iterable[_Result]:
    for index, message in enumerate(ir.messages):
        if ir.api == "anthropic":
            for block in message.blocks:
                payload = block.payload
                if block.kind is BlockKind.TOOL_RESULT and isinstance(payload, Mapping):
                    yield _Result(index, str(payload.get("tool_use_id", "")), payload.get("content", ""))
        elif ir.api == "openai_chat":
            if message.role == "tool" and isinstance(message.extra.get("tool_call_id"), str):
                yield _Result(index, message.extra["tool_call_id"], [b.payload for b in message.blocks])
        elif message.role == "tool" and message.extra.get("type") in _RESULT_ITEMS:
            yield _Result(index, str(message.extra.get("call_id", "")), message.extra.get("output", ""))


def _calls(ir: TelosIR) -> dict[str, tuple[int, str, int]]:
    """Per call id: the message holding the call, the tool's name, its input's tokens."""
    calls: dict[str, tuple[int, str, int]] = {}
    for index, message in enumerate(ir.messages):
        if message.role != "assistant":
            continue
        if ir.api == "anthropic":
            for block in message.blocks:
                payload = block.payload
                if block.kind is BlockKind.TOOL_USE and isinstance(payload, Mapping):
                    calls[str(payload.get("id", ""))] = (
                        index,
                        str(payload.get("name", "tool")),
                        _tokens(payload.get("input", {})),
                    )
        elif ir.api == "openai_chat":
            for call in message.extra.get("tool_calls") or ():
                if isinstance(call, Mapping):
                    function = call.get("function") or {}
                    calls[str(call.get("id", ""))] = (
                        index,
                        str(function.get("name", "tool")),
                        _tokens(function.get("arguments", "")),
                    )
        elif message.extra.get("type") in _CALL_ITEMS:
            extra = message.extra
            calls[str(extra.get("call_id", ""))] = (
                index,
                str(extra.get("name", "tool")),
                _tokens(extra.get("arguments", extra.get("input", ""))),
            )
    return calls


def _message_texts(ir: TelosIR) -> list[tuple[str, str]]:
    return [
        (canonical_json([block.payload for block in message.blocks]), canonical_json(dict(message.extra)))
        for message in ir.messages
    ]


def _size_of(texts: tuple[str, str]) -> int:
    blocks, extra = texts
    return (len(blocks) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN + (
        len(extra) + CHARS_PER_TOKEN - 1
    ) // CHARS_PER_TOKEN


def measure(ir: TelosIR) -> Measured:
    """The request's tool uses, estimated tokens and current turn (see the module docstring)."""
    texts = _message_texts(ir)
    per_message = [_size_of(pair) for pair in texts]
    head = _tokens([b.payload for b in ir.tools]) + _tokens([b.payload for b in ir.system])
    offsets, running = [], head
    for size in per_message:
        offsets.append(running)
        running += size
    calls = _calls(ir)
    assistants = [i for i, m in enumerate(ir.messages) if m.role == "assistant"]
    # The current turn: the latest assistant message and what answers it; before any, the whole request.
    current = assistants[-1] if assistants else 0
    units = []
    for result in _results(ir):
        use, name, input_tokens = calls.get(result.call_id, (-1, "tool", 0))
        net = _tokens(result.content) - _PLACEHOLDER_TOKENS
        units.append(
            Unit(
                message=result.message,
                call=call_key(result.call_id),
                name=name,
                tokens=max(0, net),
                input_tokens=max(0, input_tokens - 1),
                offset=offsets[result.message],
                use=use,
            )
        )
    for index, tokens in _thinking(ir):
        units.append(
            Unit(message=index, call=THINKING_CALL, name="thinking", tokens=tokens, offset=offsets[index])
        )
    if any("<file path=" in blocks for blocks, _ in texts[:current]):
        units += _files(ir, texts, offsets, current)
    units.sort(key=lambda unit: unit.message)
    uses = {call_key(call_id): where[0] for call_id, where in calls.items()}
    turn = running - offsets[current] if current < len(offsets) else 0
    return Measured(tuple(units), running, current, uses, turn)


def _files(ir: TelosIR, texts: Sequence[tuple[str, str]], offsets: Sequence[int], current: int) -> list[Unit]:
    """The file blocks of the messages before the current turn, one unit per message and path, with
    ``refs_until`` (the last later message naming the path) and ``copy_until`` (the last later
    message carrying the file in a tool result, or the message count when one carries it in its
    text; ``pressure.Unit``)."""
    count = len(ir.messages)
    carried = [
        message_paths(message) if "<file path=" in texts[i][0] or "<file path=" in texts[i][1] else ()
        for i, message in enumerate(ir.messages)
    ]
    units = []
    for index in range(current):
        if "<file path=" not in texts[index][0]:
            continue
        for path, chars in text_files(ir.messages[index]).items():
            refs = next(
                (j for j in range(count - 1, index, -1) if path in texts[j][0] or path in texts[j][1]),
                -1,
            )
            copies = -1
            for j in range(index + 1, count):
                if path in carried[j]:
                    copies = count if path in text_files(ir.messages[j]) else max(copies, j)
                    if copies == count:
                        break
            units.append(
                Unit(
                    message=index,
                    call=file_key(path),
                    name=path,
                    tokens=max(0, (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN - _PLACEHOLDER_TOKENS),
                    offset=offsets[index],
                    refs_until=refs,
                    copy_until=copies,
                )
            )
    return units


def _is_thinking(block: TelosBlock) -> bool:
    payload = block.payload
    return block.kind is BlockKind.THINKING or (
        isinstance(payload, Mapping) and payload.get("type") in _THINKING_TYPES
    )


def _thinking(ir: TelosIR) -> Iterable[tuple[int, int]]:
    """``(message, tokens)`` of each earlier assistant turn's thinking (Anthropic): every assistant
    message before the last user message that is not only tool results, holding thinking and
    something else. The current turn's thinking must go back unchanged (docs/vendor-facts.md §9.2)."""
    if ir.api != "anthropic":
        return
    start = max(
        (
            i
            for i, m in enumerate(ir.messages)
            if m.role == "user" and any(b.kind is not BlockKind.TOOL_RESULT for b in m.blocks)
        ),
        default=0,
    )
    for index, message in enumerate(ir.messages[:start]):
        if message.role != "assistant":
            continue
        thinking = [b for b in message.blocks if _is_thinking(b)]
        if thinking and len(thinking) < len(message.blocks):
            yield index, _tokens([b.payload for b in thinking])


def folds_of(
    decision: Decision,
    measured: Measured,
    hashes: Sequence[str],
    at: int,
    clear_inputs: bool,
    summaries: Mapping[tuple[int, str], str] | None = None,
) -> tuple[ClearFold, ...]:
    """The records of ``decision``'s folds (positions and digests; the summaries the caller wrote)."""
    folds = []
    for unit in decision.fold:
        # A tool result: its placeholder (or the caller's summary), its call's input with
        # clear_inputs. A file block: its placeholder. Thinking: removed whole, no placeholder.
        result = not unit.file and unit.call != THINKING_CALL
        use = measured.uses.get(unit.call, -1) if result and clear_inputs else -1
        folds.append(
            ClearFold(
                message=unit.message,
                call=unit.call,
                digest=hashes[unit.message],
                tokens=unit.tokens + (0 if unit.call == THINKING_CALL else _PLACEHOLDER_TOKENS),
                at=at,
                use_message=use,
                use_digest=hashes[use] if use >= 0 else "",
                summary=(summaries or {}).get(unit.key(), "") if result else "",
            )
        )
    return tuple(folds)


def result_texts(ir: TelosIR, keys: Iterable[tuple[int, str]]) -> dict[tuple[int, str], tuple[str, str]]:
    """``(tool name, result text)`` of the given results, for the caller's summarizer."""
    wanted = set(keys)
    calls = {call_key(call_id): where for call_id, where in _calls(ir).items()}
    found = {}
    for result in _results(ir):
        key = (result.message, call_key(result.call_id))
        if key in wanted:
            content = result.content
            text = content if isinstance(content, str) else canonical_json(content)
            found[key] = (calls.get(key[1], (-1, "tool", 0))[1], text)
    return found


def summarize(
    summarizer: Callable[[str, str], str], texts: Mapping[tuple[int, str], tuple[str, str]]
) -> dict[tuple[int, str], str]:
    """The caller's summaries of ``texts`` (a summarizer that fails or returns no text: placeholder)."""
    summaries = {}
    for key, (name, text) in texts.items():
        try:
            summary = summarizer(name, text)
        except Exception:  # the caller's code: its failure leaves the placeholder, never the call
            continue
        if isinstance(summary, str) and summary:
            summaries[key] = summary
    return summaries


def apply_clear_folds(
    ir: TelosIR, folds: Sequence[ClearFold], hashes: Sequence[str]
) -> tuple[TelosIR, list[Transformation]]:
    """``ir`` with every applicable fold applied (see the module docstring), and the records."""
    if not folds:
        return ir, []
    messages = list(ir.messages)
    names = {call_key(call_id): name for call_id, (_, name, _) in _calls(ir).items()}
    records: list[Transformation] = []
    by_message: dict[int, dict[str, ClearFold]] = {}
    inputs: dict[int, set[str]] = {}
    skipped = 0
    for fold in folds:
        if fold.message >= len(messages) or hashes[fold.message] != fold.digest:
            skipped += 1
            continue
        by_message.setdefault(fold.message, {})[fold.call] = fold
        if 0 <= fold.use_message < len(messages) and hashes[fold.use_message] == fold.use_digest:
            inputs.setdefault(fold.use_message, set()).add(fold.call)
    chars = 0
    for index, wanted in by_message.items():
        messages[index], cleared = _clear_results(ir.api, messages[index], wanted, names)
        chars += cleared
    for index, calls in inputs.items():
        messages[index] = _clear_inputs(ir.api, messages[index], calls)
    if by_message:
        thinking = sum(1 for w in by_message.values() if THINKING_CALL in w)
        files = sum(1 for w in by_message.values() for fold in w.values() if fold.file)
        count = sum(len(w) for w in by_message.values()) - thinking - files
        first = min(by_message)
        parts = []
        if count:
            parts.append(
                f"{count} old tool result(s) replaced by a placeholder naming the tool and its size (or "
                "the caller's summary)"
            )
        if thinking:
            parts.append(f"the thinking blocks of {thinking} earlier assistant turn(s) left out")
        if files:
            parts.append(
                f"the content of {files} file block(s) replaced, inside their <file path=…> tags, by a "
                "placeholder naming the path and its size"
            )
        records.append(
            Transformation(
                kind="context-fold",
                where=f"messages[{first}:]",
                chars=chars,
                detail=f"from message {first} on, {' and '.join(parts)}, as the session's context policy "
                "recorded; the same bytes on every later request",
            )
        )
    if skipped:
        records.append(
            Transformation(
                kind="fold-not-applied",
                where="messages",
                detail=f"{skipped} recorded context fold(s) not applied: the application changed or "
                "removed those messages since, so they are sent as the application sent them",
            )
        )
    return replace(ir, messages=tuple(messages)), records


def _text_block(like: TelosBlock | None, text: str, where: str) -> TelosBlock:
    return TelosBlock(
        id=like.id if like is not None else where,
        band=Band.FOLD,
        kind=BlockKind.TEXT,
        payload={"type": "text", "text": text},
        source_tag="session:context-fold",
    )


def _clear_results(
    api: str, message: TelosMessage, wanted: Mapping[str, ClearFold], names: Mapping[str, str]
) -> tuple[TelosMessage, int]:
    def text_for(fold: ClearFold) -> str:
        return fold.summary or placeholder(names.get(fold.call, "tool"), fold.tokens)

    chars = 0
    files = {key: fold.tokens for key, fold in wanted.items() if fold.file}
    if files:
        message, chars = clear_text_files(message, files, file_placeholder)
        wanted = {key: fold for key, fold in wanted.items() if not fold.file}
        if not wanted:
            return message, chars
    message, cleared = _clear_result_blocks(api, message, wanted, text_for)
    return message, chars + cleared


def _clear_result_blocks(
    api: str, message: TelosMessage, wanted: Mapping[str, ClearFold], text_for: Callable[[ClearFold], str]
) -> tuple[TelosMessage, int]:
    if api == "anthropic":
        blocks, chars = [], 0
        drop_thinking = THINKING_CALL in wanted and not all(_is_thinking(b) for b in message.blocks)
        for block in message.blocks:
            payload = block.payload
            if drop_thinking and _is_thinking(block):
                chars += len(canonical_json(payload))
                continue
            fold = (
                wanted.get(call_key(str(payload.get("tool_use_id", ""))))
                if block.kind is BlockKind.TOOL_RESULT and isinstance(payload, Mapping)
                else None
            )
            if fold is None:
                blocks.append(block)
                continue
            chars += len(canonical_json(payload.get("content", "")))
            blocks.append(block.with_payload({**payload, "content": text_for(fold)}))
        return message.with_blocks(tuple(blocks)), chars
    if api == "openai_chat":
        fold = wanted.get(call_key(str(message.extra.get("tool_call_id", ""))))
        if fold is None:
            return message, 0
        chars = sum(len(canonical_json(b.payload)) for b in message.blocks)
        first = message.blocks[0] if message.blocks else None
        return message.with_blocks((_text_block(first, text_for(fold), "tool"),), "string"), chars
    fold = wanted.get(call_key(str(message.extra.get("call_id", ""))))
    if fold is None:
        return message, 0
    output = message.extra.get("output", "")
    chars = len(output) if isinstance(output, str) else len(canonical_json(output))
    return _with_extra(message, {**message.extra, "output": text_for(fold)}), chars


def _clear_inputs(api: str, message: TelosMessage, calls: set[str]) -> TelosMessage:
    if api == "anthropic":
        blocks = tuple(
            block.with_payload({**block.payload, "input": {}})
            if block.kind is BlockKind.TOOL_USE
            and isinstance(block.payload, Mapping)
            and call_key(str(block.payload.get("id", ""))) in calls
            else block
            for block in message.blocks
        )
        return message.with_blocks(blocks)
    if api == "openai_chat":
        tool_calls = message.extra.get("tool_calls")
        if not isinstance(tool_calls, list):
            return message
        cleared = [
            {**call, "function": {**call["function"], "arguments": "{}"}}
            if isinstance(call, Mapping)
            and isinstance(call.get("function"), Mapping)
            and call_key(str(call.get("id", ""))) in calls
            else call
            for call in tool_calls
        ]
        return _with_extra(message, {**message.extra, "tool_calls": cleared})
    extra = message.extra
    if call_key(str(extra.get("call_id", ""))) not in calls:
        return message
    field = "arguments" if extra.get("type") == "function_call" else "input"
    return _with_extra(message, {**extra, field: "{}" if field == "arguments" else ""})


def _with_extra(message: TelosMessage, extra: Mapping[str, Any]) -> TelosMessage:
    return TelosMessage(message.role, message.blocks, message.content_form, extra)
