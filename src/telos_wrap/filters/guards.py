"""What is never filtered, read from the text itself (docs/output-filter.md, "Never filtered").

A result is left whole, in every mode, when it is small, when it is structured (JSON, XML), when it
holds a diff, or when it reads as a file's content (numbered lines: ``cat -n``, ``nl``, an editor
tool's view). The command says more (``command.family``); these checks catch what the command
does not name. An agent harness's wrapper (``<returncode>…</returncode><output>…</output>``) is looked
through.
"""

from __future__ import annotations

import json
import re

__all__ = ["MIN_CHARS", "body_of", "is_diff", "is_numbered", "is_structured", "leave_whole"]

#: Results shorter than this are never filtered: there is little to gain and every line may matter.
MIN_CHARS = 400

_WRAPPED = re.compile(
    r"\A\s*(?:<returncode>[^<]*</returncode>\s*)?(?:<warning>.*?</warning>\s*)?<output>\n?(.*?)</output>\s*\Z",
    re.S,
)
_DIFF = re.compile(r"^(?:diff --git |diff -[a-zA-Z]+ |Index: |@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@)", re.M)
_UNIFIED = re.compile(r"^--- \S.*\n\+\+\+ \S", re.M)
_NUMBERED = re.compile(r"^\s*\d+(?:[:\t|]| {1,2}\S)")


def body_of(text: str) -> str:
    """``text`` without an agent harness's output wrapper, if it has one."""
    found = _WRAPPED.match(text) if "<output>" in text[:600] else None
    return found.group(1) if found else text


def is_structured(body: str) -> bool:
    """JSON (an object or array that parses) or XML (a prolog, or one element wrapping it all)."""
    stripped = body.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            json.loads(stripped)
            return True
        except ValueError:
            return False
    if stripped.startswith("<?xml"):
        return True
    opened = re.match(r"<([A-Za-z][\w:.-]*)[\s>]", stripped)
    return opened is not None and stripped.endswith(f"</{opened.group(1)}>")


def is_diff(body: str) -> bool:
    """A unified or git diff, or a hunk of one."""
    return bool(_DIFF.search(body) or _UNIFIED.search(body))


def is_numbered(body: str) -> bool:
    """Most lines start with a line number: a file read (``cat -n``, ``nl``, an editor's view)."""
    lines = [line for line in body.split("\n") if line.strip()]
    if len(lines) < 5:
        return False
    numbered = sum(1 for line in lines if _NUMBERED.match(line))
    return numbered >= 0.8 * len(lines)


def leave_whole(text: str) -> str | None:
    """Why ``text`` is never filtered, whatever the command and mode; ``None`` if it may be."""
    if len(text) < MIN_CHARS:
        return "small"
    body = body_of(text)
    if is_structured(body):
        return "structured"
    if is_diff(body):
        return "diff"
    if is_numbered(body):
        return "file read"
    return None
