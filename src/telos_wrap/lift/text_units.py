"""Whole units of a text: what may move out of a system prompt without being cut apart.

A line that belongs to a structure cannot leave it alone and still read as the caller wrote it:

* a **JSON block** (a line ending in ``{`` or ``[`` up to the line where the brackets close again):
  one line taken out leaves a dangling comma or a value without its key; the whole top-level
  block moves, so what stays and what moves both still parse;
* a **code fence** (`````` ``` `````` or ``~~~`` to its closing fence): moves whole;
* an **XML-like element** whose tags stand on lines of their own (``<env>`` … ``</env>``): the
  smallest such element around the line moves whole;
* a **markdown table**: rows move with the table's header rows as their context; when every body
  row moves, the whole table does;
* a **heading and what sits under it** (a line ending in ``:``, a markdown ``#`` heading, a less
  indented parent line): a line moves with its heading as context; when everything under the
  heading moves, the heading moves too (no dangling label is left in place).

``unit_of`` widens a run of lines to the smallest such unit; ``context_of`` names the heading lines
a unit is rendered under where it lands. Both are line-based: one pass over the lines to find the
structures, and a bounded walk back (``_MAX_WALK`` lines) for a heading, so the work stays linear
in the size of the text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["MAX_UNIT_LINES", "context_of", "regions", "unit_of"]

#: The largest unit that moves (lines); a larger one stays where it is.
MAX_UNIT_LINES = 40
#: How far back (lines) a heading is looked for.
_MAX_WALK = 200

_ITEM = re.compile(r"^[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]")
_MD_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_OPEN_TAG = re.compile(r"^[ \t]*<([A-Za-z][\w.:-]*)(?:[ \t][^<>]*)?>[ \t]*$")
_CLOSE_TAG = re.compile(r"^[ \t]*</([A-Za-z][\w.:-]*)[ \t]*>[ \t]*$")
_LABELLED = re.compile(r"^[ \t]*[^:\s|#<{\[][^:]{0,40}:[ \t]+\S")
_TABLE_SEPARATOR = re.compile(r"^[ \t]*\|?[ \t]*:?-{2,}")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _row(line: str) -> bool:
    return line.lstrip().startswith("|")


def _colon_heading(line: str) -> bool:
    return line.rstrip().endswith(":")


def _bracket_delta(line: str) -> int:
    """``{``/``[`` minus ``}``/``]`` outside double-quoted strings."""
    depth, quoted, escaped = 0, False, False
    for char in line:
        if quoted:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return depth


def regions(lines: Sequence[str]) -> list[tuple[int, int]]:
    """``(first, last)`` of every structure that moves only whole: code fences, top-level JSON blocks,
    XML-like elements with tags on lines of their own (nested ones included), markdown tables."""
    found: list[tuple[int, int]] = []
    fence: tuple[int, str] | None = None
    json_start, depth = -1, 0
    tags: list[tuple[str, int]] = []
    table_start = -1
    for number, line in enumerate(lines):
        marker = _FENCE.match(line)
        if fence is not None:
            if marker is not None and marker.group(1) == fence[1]:
                found.append((fence[0], number))
                fence = None
            continue
        if marker is not None and json_start < 0:
            fence = (number, marker.group(1))
            continue
        if _row(line):
            table_start = number if table_start < 0 else table_start
        elif table_start >= 0:
            found.append((table_start, number - 1))
            table_start = -1
        if json_start >= 0:
            depth += _bracket_delta(line)
            if depth <= 0:
                found.append((json_start, number))
                json_start, depth = -1, 0
            continue
        stripped = line.rstrip()
        if stripped.endswith(("{", "[")) and _bracket_delta(line) > 0:
            json_start, depth = number, _bracket_delta(line)
            continue
        opened = _OPEN_TAG.match(line)
        if opened is not None:
            tags.append((opened.group(1), number))
            continue
        closed = _CLOSE_TAG.match(line)
        if closed is not None:
            for k in range(len(tags) - 1, -1, -1):
                if tags[k][0] == closed.group(1):
                    found.append((tags[k][1], number))
                    del tags[k:]
                    break
    last = len(lines) - 1
    if fence is not None:
        found.append((fence[0], last))
    if json_start >= 0:
        found.append((json_start, last))
    if table_start >= 0:
        found.append((table_start, last))
    return found


def _table_body(lines: Sequence[str], start: int, end: int) -> int:
    """The first body row of the table ``start..end`` (after its header and separator rows)."""
    if start + 1 <= end and _TABLE_SEPARATOR.match(lines[start + 1]):
        return start + 2
    return start + 1


def _parent(lines: Sequence[str], first: int) -> int | None:
    """The heading line the unit starting at line ``first`` sits under, if there is one."""
    line = lines[first]
    own = _indent(line)
    item = _ITEM.match(line) is not None
    # A line that names itself ("Wartezeit: 4 Minuten") needs no heading of its own level.
    labelled = not item and _LABELLED.match(line) is not None
    deeper = False
    for j in range(first - 1, max(-1, first - _MAX_WALK), -1):
        above = lines[j]
        if not above.strip():
            continue
        indent = _indent(above)
        if indent > own:
            deeper = True  # a deeper line: a child of a sibling (or of a heading of our level)
            continue
        if indent < own:
            return j if _colon_heading(above) or _MD_HEADING.match(above) else None
        if _MD_HEADING.match(above):
            return j
        if (_ITEM.match(above) is not None) == item and not _colon_heading(above):
            continue  # a sibling
        # A heading of our own level whose section is indented under it is not ours.
        return j if _colon_heading(above) and not deeper and not labelled else None
    return None


def _dangles(lines: Sequence[str], head: int, first: int, last: int) -> bool:
    """Whether heading ``head`` would be left with nothing under it once lines ``first..last`` move:
    only blank lines between it and the unit, and the line after the unit is not under it."""
    if any(lines[j].strip() for j in range(head + 1, first)):
        return False
    heading = lines[head]
    for j in range(last + 1, min(len(lines), last + _MAX_WALK)):
        line = lines[j]
        if not line.strip():
            continue
        if _MD_HEADING.match(heading):
            return _MD_HEADING.match(line) is not None
        indent, own = _indent(line), _indent(heading)
        item = _ITEM.match(line) is not None and _ITEM.match(heading) is None
        return not (indent > own or (indent == own and item))
    return True


def unit_of(
    lines: Sequence[str], first: int, last: int, found: Sequence[tuple[int, int]] | None = None
) -> tuple[int, int] | None:
    """Lines ``first..last`` widened to the smallest whole unit around them (see module docstring).

    ``None`` when that unit is longer than ``MAX_UNIT_LINES`` (it then stays).
    """
    spans = regions(lines) if found is None else found
    for _ in range(8):
        before = (first, last)
        for start, end in spans:
            if end < first or start > last or (start >= first and end <= last):
                continue
            if _row(lines[start]):
                body = _table_body(lines, start, end)
                if first < body or (first <= body and last >= end):
                    first, last = min(first, start), max(last, end)
                continue
            # The smallest region around each end of the run.
            first, last = min(first, start), max(last, end)
        head = _parent(lines, first)
        if head is not None and _dangles(lines, head, first, last):
            first = head
        if (first, last) == before:
            break
    if last - first + 1 > MAX_UNIT_LINES:
        return None
    return first, last


def context_of(lines: Sequence[str], first: int) -> str:
    """The heading line(s) the unit starting at line ``first`` sat under ("" if none).

    Table rows get the table's header rows; any other line the heading ``_parent`` finds.
    """
    if _row(lines[first]):
        start = first
        while start > 0 and _row(lines[start - 1]) and first - start < _MAX_WALK:
            start -= 1
        body = _table_body(lines, start, first)
        return "\n".join(lines[start:body]) if body <= first and start < first else ""
    head = _parent(lines, first)
    return lines[head] if head is not None else ""
