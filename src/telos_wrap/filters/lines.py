"""What no filter may cut, and how a cut is written down (shared by ``families`` and ``cut``).

``protected`` marks the lines that report a failure or sum a run up — error and warning lines,
tracebacks (whole), a failing test's section (pytest's ``FAILURES``/``ERRORS``, a jest ``●`` block,
a go ``--- FAIL`` block), exit codes and summary lines — and every ``[telos: …]`` line an earlier
edit wrote. ``remove`` drops the lines a family chose, except protected ones, writing one
``[telos: …]`` line per run of removed lines with its count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["MARK", "protected", "remove"]

#: Every line a filter writes starts with this, so a later pass (and the model) can tell.
MARK = "[telos: "

_IMPORTANT = re.compile(
    r"(?i)\b(?:errors?|fail(?:ed|ure|ures|s|ing)?|fatal|panic(?:ked)?|exception|traceback|assert\w*|"
    r"exit(?:ed)?(?: with)? (?:code|status)|returncode|return code|warning|warn|denied|refused|"
    r"not found|no such|cannot|can't|could not|unable|abort(?:ed)?|segmentation|killed|timed? ?out|"
    r"conflict|rejected|vulnerabilit\w*)\b|✕|✗|✘|\u00d7|^\s*E\s|^\s*>\s|^FAIL|^=+ .+ =+$|^_+ .+ _+$"
)
_SUMMARY = re.compile(
    r"(?i)^\s*(?:tests?:|test suites:|snapshots:|time:|test result:|ran \d+ tests?|ok\b|successfully |"
    r"added \d+ packages?|removed \d+ packages?|up to date|found \d+|all checks passed|\d+ (?:passed|failed|"
    r"errors?|warnings?|skipped|files? (?:changed|would be))|collected \d+|total\b|summary)"
)
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):")
_SECTION = re.compile(r"^=+ (?:FAILURES|ERRORS|short test summary info) =+$")
_HEADER = re.compile(r"^=+ .+ =+$")
_JEST_FAIL = re.compile(r"^\s*● ")
_GO_FAIL = re.compile(r"^\s*--- FAIL: |^panic: ")


def _block_end(lines: Sequence[str], start: int, stop: Callable[[str], bool]) -> int:
    index = start + 1
    while index < len(lines) and not stop(lines[index]):
        index += 1
    return index


def protected(lines: Sequence[str]) -> list[bool]:
    """Per line, whether no filter may remove it (module docstring)."""
    keep = [False] * len(lines)
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith(MARK) or _IMPORTANT.search(line) or _SUMMARY.match(line):
            keep[index] = True
        end = index
        if _TRACEBACK.match(line):
            # The frames are indented; the block ends with the first line at the margin (the exception).
            end = _block_end(
                lines, index, lambda s: bool(s) and not s[0].isspace() and not s.startswith("Traceback")
            )
            end = min(end + 1, len(lines))
        elif _SECTION.match(line) and "short test summary" not in line:
            end = _block_end(
                lines,
                index,
                lambda s: (bool(_HEADER.match(s)) and not _SECTION.match(s)) or "short test summary" in s,
            )
        elif _JEST_FAIL.match(line):
            end = _block_end(
                lines,
                index,
                lambda s: bool(_JEST_FAIL.match(s)) or s.startswith(("Test Suites:", "PASS ", "FAIL ")),
            )
        elif _GO_FAIL.match(line):
            end = _block_end(lines, index, lambda s: s.startswith(("--- ", "=== ", "FAIL", "ok ", "PASS")))
        for covered in range(index, end):
            keep[covered] = True
        index = max(index + 1, end)
    return keep


def remove(
    lines: Sequence[str], drop: Sequence[bool], what: str, keep: Sequence[bool] | None = None
) -> list[str]:
    """``lines`` without those marked in ``drop`` (never a ``keep`` line): each run of removed lines
    becomes one ``[telos: N what]`` line; a run of fewer than 2 lines stays (a count line saves nothing)."""
    keep = protected(lines) if keep is None else keep
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) >= 2:
            out.append(f"{MARK}{len(run)} {what}]")
        else:
            out.extend(run)
        run.clear()

    for line, dropped, kept in zip(lines, drop, keep, strict=True):
        if dropped and not kept:
            run.append(line)
            continue
        flush()
        out.append(line)
    flush()
    return out
