"""The fidelity corpus (``filter_corpus/``): realistic tool outputs with planted facts.

Each entry of ``corpus.json`` names an output file, the command that printed it (``None``: a tool
with no command, e.g. ``read_file``), its tool, the facts an agent needs from it (strings that must
survive every mode, as they read on a terminal), whether it must be sent whole in every mode
(diffs, file reads, JSON, small results), and whether it is an ``is_error`` result. The outputs are
written for this corpus (pytest, jest, go test, cargo, pip, npm, git, ls -R, find, ruff, mypy,
cargo build, a script's traceback, an agent harness's wrapper, colored, redrawn and repeated output).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).parent / "filter_corpus"
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")


@dataclass(frozen=True)
class Entry:
    name: str
    text: str
    command: str | None
    tool: str
    facts: tuple[str, ...]
    whole: bool
    is_error: bool


def entries() -> list[Entry]:
    manifest = json.loads((CORPUS / "corpus.json").read_text(encoding="utf-8"))
    return [
        Entry(
            name,
            (CORPUS / f"{name}.txt").read_bytes().decode("utf-8"),
            spec["command"],
            spec["tool"],
            tuple(spec["facts"]),
            spec["whole"],
            spec["is_error"],
        )
        for name, spec in sorted(manifest.items())
    ]


def visible(text: str) -> str:
    """What a terminal shows: escape codes out, each line's last carriage-return frame."""
    text = _ESCAPES.sub("", text)
    return "\n".join(line.split("\r")[-1] if "\r" in line else line for line in text.split("\n"))
