"""Find the Python snippets of ``README.md`` and ``docs/*.md``, with the fixtures each one asks for.

A snippet is a fenced block opened with ```` ```python ```` (or ```` ```py ````). The line right above
the fence may name fixtures in an HTML comment (invisible once rendered)::

    <!-- docs-test: conversation, redis -->

Fixture names are defined in ``tests/docs/fixtures.py``; an unknown name fails the test. Every
snippet runs — there is no skip directive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Snippet", "documents", "snippets_of"]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<names>[^>]*?)\s*-->\s*$")
_PYTHON = {"python", "py", "python3"}


@dataclass(frozen=True, slots=True)
class Snippet:
    """One fenced Python block: where it is, its code, and the fixtures it names."""

    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    fixtures: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.line}"


def documents(root: Path) -> list[Path]:
    """``README.md`` and every Markdown file under ``docs/`` (sorted), so new pages are picked up."""
    found = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return [path for path in found if path.is_file()]


def snippets_of(path: Path) -> list[Snippet]:
    """The Python blocks of one Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Snippet] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        language = opening["info"].strip().split(" ")[0].lower() if opening["info"].strip() else ""
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if (
                closing is not None
                and closing["fence"].startswith(fence[0] * len(fence))
                and not closing["info"].strip()
            ):
                break
            j += 1
        if language in _PYTHON:
            body = "\n".join(line[indent:] if line[:indent].isspace() else line for line in lines[i + 1 : j])
            directive = _DIRECTIVE.match(lines[i - 1]) if i > 0 else None
            names = (
                tuple(name.strip() for name in directive["names"].split(",") if name.strip())
                if directive
                else ()
            )
            found.append(Snippet(path, i + 1, body + "\n", names))
        i = j + 1
    return found
