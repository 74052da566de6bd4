"""The seeds' ``<file path=…>`` rule for file blocks in messages (pure: no SDK, no I/O).

A caller who puts a file in a message as ``<file path="src/app.py">…</file>`` (in a text block, a
tool result, a Chat Completions or Responses message) has it registered under its path, a dotted
slug (``src/app.py``; the ref-pool's slug alphabet, ``ir/refpool.SLUG_PATTERN``), and sent exactly
as written (the model reads what the caller wrote). ``session.fold(slugs=["src/app.py"],
summary=...)`` then replaces that file's content, in every message that carries it, by the summary,
inside the same ``<file path=…>`` tag: recorded in the session (``SlugFold``), so every later
request and worker sends the same bytes; the text before the file block is unchanged, so the cached
prefix up to it is read as before.

* ``file_slugs(ir)``: the paths of the file blocks in the request's messages, in order;
* ``apply_file_folds(ir, folds)``: the folds whose slug is such a path applied, with their records.

The context policy folds file blocks too (``sessions/turns/pressure.py``): ``text_files(message)``
gives the file blocks of a message's text blocks (not those inside a tool result, which the
policy clears as a result), ``message_paths(message)`` the paths of every file block of a message,
and ``clear_text_files(message, wanted, text_for)`` replaces the content of the wanted ones inside
their tags.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from telos_wrap.ir.model import BlockKind, TelosBlock, TelosIR, TelosMessage, Transformation
from telos_wrap.sessions.durable.records import SlugFold
from telos_wrap.sessions.durable.state import short_hash

__all__ = [
    "FILE_BLOCK",
    "apply_file_folds",
    "clear_text_files",
    "file_key",
    "file_slugs",
    "message_paths",
    "text_files",
]

#: A file block: ``<file path="p">…</file>`` (the path quoted with ``"`` or ``'``, or bare).
FILE_BLOCK = re.compile(
    r"<file path=(?:\"([A-Za-z0-9_\-./]+)\"|'([A-Za-z0-9_\-./]+)'|([A-Za-z0-9_\-./]+))>(.*?)</file>", re.S
)


def file_key(path: str) -> str:
    """How the session's state names a file block it saw (``AppPrint.slugs``): a digest of the
    path, never the path (a path comes from the caller's prompt; docs/security.md)."""
    return "file:" + short_hash(path.encode("utf-8"))


def _path(match: re.Match[str]) -> str:
    return match.group(1) or match.group(2) or match.group(3)


def _texts(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key in ("text", "content", "output"):
            if key in value:
                yield from _texts(value[key])
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def file_slugs(ir: TelosIR, start: int = 0) -> tuple[str, ...]:
    """The paths of the file blocks in ``ir``'s messages from ``start`` on, each once, in order."""
    found: dict[str, None] = {}
    for message in ir.messages[start:]:
        _message_paths(message, found)
    return tuple(found)


def message_paths(message: TelosMessage) -> tuple[str, ...]:
    """The paths of the file blocks anywhere in ``message`` (text, tool results, outputs), once each."""
    found: dict[str, None] = {}
    _message_paths(message, found)
    return tuple(found)


def _message_paths(message: TelosMessage, found: dict[str, None]) -> None:
    for block in message.blocks:
        payload = block.payload
        # The common block, a text, without a generator (this runs on every request).
        if isinstance(payload, Mapping):
            text = payload.get("text")
            simple = isinstance(text, str) and "content" not in payload and "output" not in payload
        else:
            text, simple = payload, isinstance(payload, str)
        if simple and isinstance(text, str):
            if "<file path=" in text:
                _found(text, found)
            continue
        for text in _texts(payload):
            if "<file path=" in text:
                _found(text, found)
    output = message.extra.get("output")
    if isinstance(output, str) and "<file path=" in output:
        _found(output, found)


def _found(text: str, found: dict[str, None]) -> None:
    for match in FILE_BLOCK.finditer(text):
        found.setdefault(_path(match), None)


def _text_of(block: TelosBlock) -> str | None:
    """The text of a text block (``None``: another kind of block, a tool result's among them)."""
    payload = block.payload
    if block.kind is not BlockKind.TEXT or not isinstance(payload, Mapping):
        return None
    text = payload.get("text")
    return text if isinstance(text, str) else None


def text_files(message: TelosMessage) -> dict[str, int]:
    """Per path, the characters of content of the file blocks in ``message``'s text blocks (not
    in a tool result: a Chat Completions ``tool`` message is a result too)."""
    sizes: dict[str, int] = {}
    if message.role == "tool":
        return sizes
    for block in message.blocks:
        text = _text_of(block)
        if text is None or "<file path=" not in text:
            continue
        for match in FILE_BLOCK.finditer(text):
            path = _path(match)
            sizes[path] = sizes.get(path, 0) + len(match.group(4))
    return sizes


def clear_text_files(
    message: TelosMessage, wanted: Mapping[str, int], text_for: Callable[[str, int], str]
) -> tuple[TelosMessage, int]:
    """``message`` with the content of each file block of its text blocks whose ``file_key`` is in
    ``wanted`` replaced by ``text_for(path, wanted[key])`` inside the same tag, and the characters
    removed."""
    if message.role == "tool":
        return message, 0
    removed = 0
    blocks: list[TelosBlock] = []
    for block in message.blocks:
        text = _text_of(block)
        if text is None or "<file path=" not in text:
            blocks.append(block)
            continue

        def swap(match: re.Match[str]) -> str:
            nonlocal removed
            key = file_key(_path(match))
            if key not in wanted:
                return match.group(0)
            removed += len(match.group(4))
            opening = match.group(0)[: match.start(4) - match.start(0)]
            return f"{opening}{text_for(_path(match), wanted[key])}</file>"

        folded = FILE_BLOCK.sub(swap, text)
        blocks.append(block.with_payload({**block.payload, "text": folded}) if folded != text else block)
    return (message.with_blocks(tuple(blocks)) if removed else message), removed


def _fold_text(text: str, summaries: Mapping[str, str], counts: dict[str, int]) -> str:
    if "<file path=" not in text:
        return text

    def swap(match: re.Match[str]) -> str:
        path = _path(match)
        if path not in summaries:
            return match.group(0)
        counts[path] = counts.get(path, 0) + len(match.group(4))
        opening = match.group(0)[: match.start(4) - match.start(0)]
        return f"{opening}{summaries[path]}</file>"

    return FILE_BLOCK.sub(swap, text)


def _fold_value(value: Any, summaries: Mapping[str, str], counts: dict[str, int]) -> Any:
    if isinstance(value, str):
        return _fold_text(value, summaries, counts)
    if isinstance(value, Mapping):
        return {
            key: _fold_value(item, summaries, counts) if key in ("text", "content", "output") else item
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_fold_value(item, summaries, counts) for item in value]
    return value


def apply_file_folds(
    ir: TelosIR, folds: Sequence[SlugFold]
) -> tuple[TelosIR, list[Transformation], int | None]:
    """``ir`` with each fold whose slug is a file block's path applied, its records, and the first
    message it changed (``None``: none)."""
    summaries = {fold.slug: fold.summary for fold in folds}
    if not summaries:
        return ir, [], None
    messages = list(ir.messages)
    counts: dict[str, int] = {}
    first: int | None = None
    for index, message in enumerate(messages):
        before = dict(counts)
        blocks: list[TelosBlock] = []
        for block in message.blocks:
            payload = _fold_value(block.payload, summaries, counts)
            blocks.append(block.with_payload(payload) if payload != block.payload else block)
        extra = message.extra
        if isinstance(extra.get("output"), str):
            extra = {**extra, "output": _fold_text(extra["output"], summaries, counts)}
        if counts != before:
            messages[index] = TelosMessage(message.role, tuple(blocks), message.content_form, extra)
            first = index if first is None else first
    records = [
        Transformation(
            kind="fold",
            where=f"file:{slug}",
            chars=chars,
            detail=f"the content of the file block <file path={slug}> replaced by the summary recorded "
            f"with session.fold(slugs=...) before request {next(f.at for f in folds if f.slug == slug)}; "
            "the text before it is unchanged, the same bytes on every later request",
        )
        for slug, chars in counts.items()
    ]
    return replace(ir, messages=tuple(messages)), records, first
