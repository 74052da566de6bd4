"""The fidelity check: what the model reads of the caller's system prompt, line by line.

``check`` compares the system text the caller wrote with what was sent: the system text as sent and
the text telos moved to the tail of the request. It is written independently of telos' own unit
detection (``lift/text_units.py``), with simpler rules, so it can prove telos wrong:

* every caller line is either sent unchanged **in place** (the lines that stay are the caller's
  lines, in the caller's order, indentation included, nothing else) or sent **whole** in the moved
  text — a caller line found in neither was cut apart;
* a moved run of lines whose caller line before it is a heading (``…:``) that stayed in place is
  rendered under that heading (its context travels with it);
* a JSON block of the caller (a line that is only ``{`` or ``[`` up to its closing line) that parses
  still parses where it was sent (in place, or moved whole);
* ``stable``: caller lines that must not move (the lines that never changed in the conversation,
  unless they moved with a line that changed, or they state the present — the one on-sight case).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The self-labelled statements of the present telos may move on sight (docs/sessions.md).
PRESENT = re.compile(
    r"^\s*(?:[-*]\s+)?(?:the\s+)?(?:current|today|now|right now|it is now|heure actuelle|aujourd'hui|"
    r"fecha|hora actual|hoy es|aktuelle|heute ist|jetzt|当前时间|现在时间|今天是|現在)",
    re.IGNORECASE,
)
#: Tagged envelopes telos moves by default (docs/engines.md).
TAGGED = re.compile(r"^\s*(?:Current time:|<environment_info>|</environment_info>)")


@dataclass
class Report:
    """What ``check`` found; ``problems`` is empty when the request is faithful."""

    in_place: int = 0
    moved: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _nonblank(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def _json_blocks(lines: Sequence[str]) -> list[tuple[int, int]]:
    blocks, start = [], -1
    for number, line in enumerate(lines):
        stripped = line.strip()
        if start < 0 and stripped in ("{", "["):
            start = number
        elif (
            start >= 0
            and stripped in ("}", "]", "},", "],")
            and len(line) - len(line.lstrip()) == len(lines[start]) - len(lines[start].lstrip())
        ):
            blocks.append((start, number))
            start = -1
    return blocks


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def check(
    caller: str, sent: str, moved: str, stable: Iterable[str] = (), *, changed: Iterable[str] = ()
) -> Report:
    """Check one request (see module docstring). ``changed``: caller lines known to have changed."""
    report = Report()
    wrote = _nonblank(caller)
    kept = _nonblank(sent)
    tail = _nonblank(moved)
    available = Counter(tail)
    position = 0
    moved_at: list[int] = []
    for number, line in enumerate(wrote):
        if position < len(kept) and kept[position] == line:
            position += 1
            report.in_place += 1
        elif available[line] > 0:
            available[line] -= 1
            moved_at.append(number)
            report.moved.append(line)
        else:
            report.problems.append(f"caller line cut apart or lost: {line!r}")
    if position != len(kept):
        report.problems.append(
            f"the system text holds lines the caller did not write there: {kept[position:]!r}"
        )
    # Context: a moved run right under a heading that stayed is rendered under that heading.
    runs: list[list[int]] = []
    for number in moved_at:
        if runs and runs[-1][-1] == number - 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    for run in runs:
        first = run[0]
        if first == 0 or (first - 1) in moved_at:
            continue
        heading = wrote[first - 1]
        if heading.rstrip().endswith(":") and len(heading) - len(heading.lstrip()) < len(wrote[first]) - len(
            wrote[first].lstrip()
        ):
            index = tail.index(wrote[first]) if wrote[first] in tail else -1
            if index < 1 or tail[index - 1] != heading:
                report.problems.append(f"moved {wrote[first]!r} without its heading {heading!r}")
    # Stable lines never move (unless with a changed line of their run, or stating the present).
    steady = set(stable)
    altered = set(changed)
    for run in runs:
        lines = [wrote[n] for n in run]
        if any(line not in steady or line in altered for line in lines):
            continue
        if all(PRESENT.match(line) or TAGGED.match(line) for line in lines):
            continue
        report.problems.append(f"stable lines moved: {lines!r}")
    # JSON blocks still parse where they were sent.
    all_lines = caller.split("\n")
    for start, end in _json_blocks(all_lines):
        block = "\n".join(all_lines[start : end + 1]).rstrip(",")
        if not _parses(block):
            continue
        body = block.strip()
        where = sent if body in sent else moved if body in moved else None
        if where is None:
            report.problems.append(f"a JSON block was not sent whole: {all_lines[start + 1][:60]!r}")
    return report


# -- reading a wire body ------------------------------------------------------------------------------


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(b.get("text", "")) for b in content if isinstance(b, Mapping) and "text" in b]
    return []


def sent_parts(api: str, caller: Mapping[str, Any], sent: Mapping[str, Any]) -> tuple[str, str]:
    """``(system text as sent, text moved to the tail)`` of a request body as it went out.

    The moved text is what the sent request carries after the caller's own last message: extra text
    blocks on the latest turn (Anthropic), a trailing system message or extra parts (OpenAI Chat),
    a trailing message item (Responses).
    """
    if api == "anthropic":
        # Blocks joined on line breaks: a block boundary is a boundary (the checks work on lines).
        system = "\n".join(_texts(sent.get("system")))
        last_caller = caller["messages"][-1]["content"]
        count = 1 if isinstance(last_caller, str) else len(last_caller)
        last_sent = sent["messages"][-1]["content"]
        extra = last_sent[count:] if isinstance(last_sent, list) else []
        return system, "\n".join(_texts(extra))
    if api == "openai_chat":
        messages = sent["messages"]
        lead = 0
        while lead < len(messages) and messages[lead]["role"] in ("system", "developer"):
            lead += 1
        system = "".join(t for m in messages[:lead] for t in _texts(m.get("content")))
        callers = caller["messages"]
        tail = messages[len(callers) :]
        moved = "".join(t for m in tail for t in _texts(m.get("content")))
        last_caller = callers[-1].get("content")
        last_sent = messages[len(callers) - 1].get("content")
        if isinstance(last_sent, list) and isinstance(last_caller, (str, list)):
            count = 1 if isinstance(last_caller, str) else len(last_caller)
            moved = "".join(_texts(last_sent[count:])) + moved
        return system, moved
    system = str(sent.get("instructions", ""))
    items = sent.get("input")
    callers = caller.get("input")
    count = len(callers) if isinstance(callers, list) else 1
    tail = items[count:] if isinstance(items, list) else []
    moved = "".join(
        str(part.get("text", ""))
        for item in tail
        if isinstance(item, Mapping)
        for part in (
            item.get("content")
            if isinstance(item.get("content"), list)
            else [{"text": item.get("content", "")}]
        )
        if isinstance(part, Mapping)
    )
    return system, moved


def caller_system(api: str, body: Mapping[str, Any]) -> str:
    """The system text the caller wrote (Anthropic blocks joined on line breaks, like ``sent_parts``)."""
    if api == "anthropic":
        return "\n".join(_texts(body.get("system")))
    if api == "openai_chat":
        lead = []
        for message in body["messages"]:
            if message["role"] not in ("system", "developer"):
                break
            lead.extend(_texts(message.get("content")))
        return "".join(lead)
    return str(body.get("instructions", ""))


__all__ = ["PRESENT", "Report", "caller_system", "check", "sent_parts"]
