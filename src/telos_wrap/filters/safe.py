"""``safe``: edits that change nothing a decision could depend on (docs/output-filter.md).

* terminal escape codes (colours, cursor moves, window titles) are removed;
* a line redrawn with carriage returns (a progress bar, a spinner) keeps only what the terminal
  showed last;
* trailing whitespace on every line goes;
* a run of identical non-blank lines keeps the first, followed by one line saying how many more
  there were (when that line is shorter than the copies). Blank lines stay: a file's line numbers do not move.

Pure and idempotent: ``safe(safe(x)) == safe(x)``; the result is never longer than ``x``.
"""

from __future__ import annotations

import re

__all__ = ["NAME", "VERSION", "repeated_line", "safe"]

NAME = "safe"
VERSION = 1

#: CSI sequences (``ESC [ … final``), OSC sequences (``ESC ] … BEL`` or ``ESC ] … ESC \``), and the
#: two-byte escapes (``ESC`` and one of ``@``-``_``); also the 8-bit CSI (``\x9b``).
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]"
)
_REPEATED = re.compile(r"^\[telos: the line above repeated (\d+) more times?\]$")


def repeated_line(count: int) -> str:
    """The line that stands for ``count`` more copies of the line above it."""
    return f"[telos: the line above repeated {count} more time{'s' if count != 1 else ''}]"


def _last_frame(line: str) -> str:
    """What a terminal shows of a line redrawn with ``\\r``: the last non-empty frame."""
    frames = [frame for frame in line.split("\r") if frame.strip()]
    return frames[-1] if frames else ""


def safe(text: str) -> str:
    """``text`` with the ``safe`` edits applied (module docstring)."""
    if "\x1b" in text or "\x9b" in text:
        text = _ESCAPES.sub("", text)
    ending = text.endswith("\n")
    lines = text.split("\n")
    if ending:
        lines.pop()
    out: list[str] = []
    previous: str | None = None
    run = 0  # copies of ``previous`` dropped so far
    for raw in lines:
        line = (_last_frame(raw) if "\r" in raw else raw).rstrip()
        if previous is not None and line == previous and line != "":
            run += 1
            continue
        _flush(out, previous, run)
        previous, run = line, 0
        out.append(line)
    _flush(out, previous, run)
    result = "\n".join(out) + ("\n" if ending else "")
    return result if len(result) <= len(text) else text


def _flush(out: list[str], previous: str | None, run: int) -> None:
    """After a run of ``previous`` ended: keep one more copy for a run of 1, else a count line."""
    if run == 0 or previous is None:
        return
    marker = repeated_line(run)
    if run == 1 or len(marker) >= run * (len(previous) + 1) - 1:
        out.extend([previous] * run)  # a count line would not be shorter than the copies
    else:
        out.append(marker)
