"""The output filter for tool results: pure functions, text and command in, text out.

No SDK, no session, no I/O (an import-linter contract). Modes (docs/output-filter.md):

* ``"off"`` — nothing (the default everywhere);
* ``"safe"`` — escape codes, carriage-return redraws, runs of identical lines, trailing whitespace;
* ``"aggressive"`` — ``safe``, then the command's family filter (tests, installs, git, recursive
  listings, lint and build output), then long outputs cut to head and tail; and an output
  byte-identical to an earlier one of the conversation sent as a short pointer to it;
* an ``OutputFilter`` of the caller's: a callable per tool name or per program, and a mode for the rest.

Never filtered, in any mode: results under ``guards.MIN_CHARS``, JSON and XML, diffs, file reads
(by command, tool name or numbered lines) — all but repeats; an ``is_error`` result gets only
``safe``'s edits. A filter never makes a text longer (it is then sent whole).

Every filter has an id, ``name/version`` (``"aggressive/1"``, ``"user:mine/2"``), which a session
records per result; ``apply`` re-runs exactly that filter, so a result is sent with the same bytes on
every later request whatever the mode is by then. A new behaviour of a built-in filter is a new
version, added beside the old one (which stays, for conversations that already used it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from telos_wrap.filters.command import command_of, family, stages
from telos_wrap.filters.families import FAMILIES, cut_middle
from telos_wrap.filters.guards import MIN_CHARS, leave_whole
from telos_wrap.filters.lines import MARK
from telos_wrap.filters.safe import safe

__all__ = [
    "MODES",
    "Decision",
    "OutputFilter",
    "aggressive",
    "apply",
    "command_of",
    "decide",
    "repeat_pointer",
    "safe",
]

Mode = Literal["off", "safe", "aggressive"]
MODES: tuple[str, ...] = ("off", "safe", "aggressive")


def aggressive(text: str, command: str | None = None, tool: str | None = None) -> str:
    """``safe``, then the family filter of ``command`` (or of the text), then the head/tail cut.
    File reads, searches and diffs get ``safe``'s edits only (``decide`` leaves them whole)."""
    cleaned = safe(text)
    kind = family(command, cleaned, tool)
    if kind in ("read", "search", "diff"):
        return cleaned
    lines = cleaned.split("\n")
    ending = cleaned.endswith("\n")
    if ending:
        lines.pop()
    edit = FAMILIES.get(kind)
    if edit is not None:
        lines = edit(lines)
    lines = cut_middle(lines)
    result = "\n".join(lines) + ("\n" if ending else "")
    return result if len(result) < len(cleaned) else cleaned


def repeat_pointer(text: str) -> str:
    """What stands for an output byte-identical to an earlier one of the conversation."""
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    return (
        f"{MARK}this output is byte-identical to an earlier tool result of this conversation, above "
        f"({lines:,} lines, {len(text):,} characters); not repeated]"
    )


def _safe(text: str, command: str | None, tool: str | None) -> str:
    return safe(text)


def _repeat(text: str, command: str | None, tool: str | None) -> str:
    return repeat_pointer(text)


#: Every built-in filter by id. A filter's id names exactly one behaviour: never change one in place.
BUILTIN: Mapping[str, Callable[[str, str | None, str | None], str]] = {
    "safe/1": _safe,
    "aggressive/1": aggressive,
    "repeat/1": _repeat,
}
_CURRENT = {"safe": "safe/1", "aggressive": "aggressive/1", "repeat": "repeat/1"}


class OutputFilter:
    """A caller's output filter (the extension point): ``tools`` maps a tool name, ``commands`` a
    program (``"pytest"``, ``"npm"``: the first word of a simple command, wrappers looked through) to
    a callable from the result's text to the text to send; results neither names get ``then``
    (``"off"``, ``"safe"`` or ``"aggressive"``). ``exclude``: tool names never filtered at all.

    ``name`` and ``version`` identify the behaviour: a session records ``user:name/version`` for each
    result the callable changed and re-applies it on every later request; change ``version``
    whenever a callable's output changes (a result recorded under a version this process does not
    have is then sent whole, and counted as a fallback). The callable must be pure (same text, same
    output); one that raises leaves the result whole (counted as a fallback).
    """

    __slots__ = ("commands", "exclude", "name", "then", "tools", "version")

    def __init__(
        self,
        name: str,
        version: str | int = 1,
        *,
        tools: Mapping[str, Callable[[str], str]] | None = None,
        commands: Mapping[str, Callable[[str], str]] | None = None,
        then: str = "off",
        exclude: tuple[str, ...] | list[str] = (),
    ) -> None:
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"OutputFilter name must be a non-empty string without '/', not {name!r}")
        if then not in MODES:
            raise ValueError(f"OutputFilter(then={then!r}): valid modes are {', '.join(MODES)}")
        for label, table in (("tools", tools), ("commands", commands)):
            for key, value in (table or {}).items():
                if not isinstance(key, str) or not callable(value):
                    raise ValueError(f"OutputFilter({label}=...) maps names to callables; {key!r}: {value!r}")
        self.name = name
        self.version = str(version)
        self.tools = dict(tools or {})
        self.commands = dict(commands or {})
        self.then = then
        self.exclude = tuple(exclude)

    @property
    def filter_id(self) -> str:
        return f"user:{self.name}/{self.version}"

    def callable_for(self, tool: str | None, command: str | None) -> Callable[[str], str] | None:
        """The caller's callable for a result of ``tool`` running ``command``, if any."""
        if tool is not None and tool in self.tools:
            return self.tools[tool]
        for words in stages(command) if command else []:
            if words[0] in self.commands:
                return self.commands[words[0]]
        return None

    def __repr__(self) -> str:
        return f"OutputFilter({self.name!r}, {self.version!r}, then={self.then!r})"


Spec = Any  # "off" | "safe" | "aggressive" | OutputFilter


@dataclass(frozen=True, slots=True)
class Decision:
    """What a filter did to one result.

    Attributes:
        text: the text to send (the input itself when left whole).
        filter_id: the filter applied (``"aggressive/1"``, ``"repeat/1"``, ``"user:name/2"``), or
            ``None`` when the result is sent whole.
        why: why it is whole (``"small"``, ``"diff"``, ``"file read"``, ``"unchanged"``, ``"raised"``,
            ``"unknown filter"``...), empty when filtered.
    """

    text: str
    filter_id: str | None
    why: str = ""

    @property
    def fallback(self) -> bool:
        """The filter raised, or a recorded one is not available: sent whole, counted as a fallback."""
        return self.why in ("raised", "unknown filter")


def _checked(text: str, out: Any, filter_id: str) -> Decision:
    if not isinstance(out, str):
        return Decision(text, None, "raised")
    if len(out) >= len(text):
        return Decision(text, None, "unchanged")
    return Decision(out, filter_id)


def decide(
    text: str,
    spec: Spec,
    *,
    command: str | None = None,
    tool: str | None = None,
    is_error: bool = False,
    seen_before: bool = False,
) -> Decision:
    """The filter for a result seen for the first time in its conversation, and its text.

    ``spec``: the mode or ``OutputFilter``; ``seen_before``: an earlier tool result of the
    conversation has exactly this text (``aggressive`` then sends a pointer to it). Pure.
    """
    mode = spec
    if isinstance(spec, OutputFilter):
        if tool is not None and tool in spec.exclude:
            return Decision(text, None, "excluded")
        own = spec.callable_for(tool, command)
        if own is not None:
            if is_error:
                mode = "safe"
            else:
                try:
                    return _checked(text, own(text), spec.filter_id)
                except Exception:
                    return Decision(text, None, "raised")
        else:
            mode = spec.then
    if mode not in ("safe", "aggressive"):
        return Decision(text, None, "off")
    if mode == "aggressive" and seen_before and not is_error and len(text) >= MIN_CHARS:
        return _checked(text, repeat_pointer(text), _CURRENT["repeat"])
    why = leave_whole(text)
    if why is not None:
        return Decision(text, None, why)
    kind = family(command, text, tool)
    if kind in ("read", "diff"):
        return Decision(text, None, "file read" if kind == "read" else "diff")
    filter_id = _CURRENT["safe" if is_error or mode == "safe" or kind == "search" else "aggressive"]
    try:
        return _checked(text, BUILTIN[filter_id](text, command, tool), filter_id)
    except Exception:
        return Decision(text, None, "raised")


def apply(
    filter_id: str, text: str, *, command: str | None = None, tool: str | None = None, user: Spec = None
) -> Decision:
    """Re-apply the recorded ``filter_id`` to ``text`` (a result a session already sent filtered).

    ``user``: the call's ``OutputFilter``, for ``user:…`` ids; a recorded id this process does not
    have (another version of the caller's filter, an unknown built-in) leaves the text whole.
    """
    try:
        builtin = BUILTIN.get(filter_id)
        if builtin is not None:
            return _checked(text, builtin(text, command, tool), filter_id)
        if isinstance(user, OutputFilter) and filter_id == user.filter_id:
            own = user.callable_for(tool, command)
            if own is not None:
                return _checked(text, own(text), filter_id)
    except Exception:
        return Decision(text, None, "raised")
    return Decision(text, None, "unknown filter")
