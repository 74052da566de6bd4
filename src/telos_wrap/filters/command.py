"""What a tool call ran, and what kind of output that gives (pure string work, no shell).

``command_of`` finds the command in a tool call's arguments (``{"command": ...}``, ``{"cmd": ...}``,
a JSON string of them, or a list of words); ``stages`` splits a shell command line into its simple
commands and names each one's program (``python -m pytest`` is ``pytest``; ``sudo``, ``env``,
``timeout``, variable assignments and ``cd`` are looked through); ``family`` names the kind of
output the command gives, from the command and, when there is none, from the text.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["READS", "SEARCHES", "command_of", "family", "program_words", "stages"]

#: Argument names a tool call's command travels under, in the order they are looked for.
_COMMAND_KEYS = ("command", "cmd", "script", "shell_command", "commands", "code", "input")

#: Programs whose output is the content of a file the agent reads (never filtered, but for repeats).
READS = frozenset({"cat", "nl", "less", "more", "bat", "head", "tail", "sed", "open", "view", "xxd", "od"})
#: Programs whose every output line is a finding the agent asked for (``safe`` edits only).
SEARCHES = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "awk", "jq", "wc", "diff", "cmp"})
_WRAPPERS = frozenset({"sudo", "env", "timeout", "time", "nice", "nohup", "command", "exec", "xargs"})
_RUNNERS = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("pdm", "run"), ("hatch", "run")}
_SPLIT = re.compile(r"&&|\|\||[;|\n]")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def command_of(arguments: Any) -> str | None:
    """The shell command in a tool call's arguments, or ``None`` when they hold none."""
    if isinstance(arguments, str):
        stripped = arguments.strip()
        if stripped.startswith("{"):
            try:
                arguments = json.loads(stripped)
            except ValueError:
                return None
        else:
            return stripped or None
    if isinstance(arguments, Mapping):
        for key in _COMMAND_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
            if isinstance(value, Sequence) and value and all(isinstance(v, str) for v in value):
                return " ".join(value)
    return None


def _words(stage: str) -> list[str]:
    try:
        return shlex.split(stage, comments=False, posix=True)
    except ValueError:
        return stage.split()


def program_words(stage: str) -> list[str]:
    """The words of one simple command from its program on (wrappers and assignments skipped)."""
    words = _words(stage)
    while words:
        head = words[0].rsplit("/", 1)[-1]
        if _ASSIGN.match(words[0]) or head in _WRAPPERS:
            words = words[1:]
            while words and (words[0].startswith("-") or words[0].replace(".", "").isdigit()):
                words = words[1:]  # ``timeout 30``, ``env -i``, ``nice -n 5``
            continue
        if len(words) > 1 and (head, words[1]) in _RUNNERS:
            words = words[2:]
            continue
        if head in ("npx", "pnpx", "bunx") and len(words) > 1:
            words = words[1:]
            continue
        if re.fullmatch(r"python[0-9.]*", head) and len(words) > 2 and words[1] == "-m":
            words = words[2:]
            continue
        return [head, *words[1:]]
    return []


def stages(command: str) -> list[list[str]]:
    """The simple commands of ``command`` (split on ``&&``, ``||``, ``;``, ``|`` and newlines), each
    as ``program_words``; ``cd`` stages and empty ones left out. A heredoc's body is not a command."""
    command = re.sub(r"<<-?\s*['\"]?(\w+)['\"]?.*?\n\1\b", "", command, flags=re.S)
    found = []
    for stage in _SPLIT.split(command):
        words = program_words(stage)
        if words and words[0] not in ("cd", "pushd", "popd", "source", ".", "set", "export", "echo"):
            found.append(words)
    return found


def _reads_a_file(words: list[str]) -> bool:
    program, args = words[0], words[1:]
    if program not in READS:
        return False
    if program == "sed":
        return "-i" not in args and not any(a.startswith("-i") for a in args)
    # ``head -n 5 file`` reads a file; ``… | tail -50`` reads its pipe (then it is not a file read).
    operands = [a for a in args if not a.startswith("-") and not a.isdigit() and not a.startswith("+")]
    return bool(operands) or program in ("open", "view")


_TESTS = frozenset(
    {
        "pytest",
        "py.test",
        "jest",
        "vitest",
        "mocha",
        "tox",
        "nox",
        "unittest",
        "nosetests",
        "phpunit",
        "rspec",
        "ctest",
    }
)
_INSTALLS = {
    "pip",
    "pip3",
    "uv",
    "npm",
    "yarn",
    "pnpm",
    "apt",
    "apt-get",
    "conda",
    "mamba",
    "gem",
    "bundle",
    "poetry",
    "brew",
    "cargo",
    "go",
    "composer",
}
_LINTS = frozenset(
    {
        "ruff",
        "flake8",
        "pylint",
        "mypy",
        "eslint",
        "tsc",
        "pyright",
        "pycodestyle",
        "pyflakes",
        "shellcheck",
        "golangci-lint",
        "clippy",
        "stylelint",
        "make",
        "gcc",
        "clang",
        "javac",
        "cmake",
        "ninja",
    }
)
_LISTINGS = frozenset({"ls", "find", "tree", "fd", "du"})

_TEST_TEXT = re.compile(
    r"^(?:=+ test session starts =+|PASS |FAIL |--- (?:PASS|FAIL):|=== RUN|running \d+ tests?|"
    r"collected \d+ items?|Ran \d+ tests? in)",
    re.M,
)
_INSTALL_TEXT = re.compile(
    r"^(?:Collecting |Requirement already satisfied|Downloading |Get:\d+ |added \d+ packages)", re.M
)
_GIT_TEXT = re.compile(
    r"^(?:On branch |Your branch is |Changes (?:not staged|to be committed)|Enumerating objects:)", re.M
)


def family(command: str | None, text: str, tool: str | None = None) -> str:
    """The kind of output: ``read``, ``search``, ``diff``, ``tests``, ``install``, ``git``, ``listing``,
    ``lint``, or ``other`` (a command of no known kind, or no command)."""
    if tool is not None and _is_read_tool(tool):
        return "read"
    found = stages(command) if command else []
    for words in found:
        if _reads_a_file(words):
            return "read"
    for words in found:
        program, args = words[0], words[1:]
        if program == "git":
            sub = next((a for a in args if not a.startswith("-")), "")
            if sub in ("diff", "show", "format-patch") or "-p" in args or "--patch" in args:
                return "diff"
            if sub in ("grep", "blame", "cat-file"):
                return "read" if sub != "grep" else "search"
        if program in ("diff", "patch", "interdiff"):
            return "diff"
    programs = [words[0] for words in found]
    last = programs[-1] if programs else ""
    if last in SEARCHES or (programs and programs[0] in SEARCHES and len(programs) == 1):
        return "search"
    for words in found:
        program, args = words[0], words[1:]
        sub = next((a for a in args if not a.startswith("-")), "")
        if program in _TESTS or (
            program
            in ("cargo", "go", "npm", "yarn", "pnpm", "make", "dotnet", "mvn", "gradle", "bun", "deno")
            and sub == "test"
        ):
            return "tests"
        if program == "python" and any(a.startswith("test") or "/test" in a for a in args):
            return "tests"
    for words in found:
        program, args = words[0], words[1:]
        sub = next((a for a in args if not a.startswith("-")), "")
        if program in _INSTALLS and sub in (
            "install",
            "add",
            "sync",
            "update",
            "upgrade",
            "ci",
            "i",
            "get",
            "fetch",
            "build",
            "download",
        ):
            return "install"
        if program == "git":
            return "git"
        if program in _LINTS or (program == "cargo" and sub in ("check", "clippy")):
            return "lint"
        if program in _LISTINGS or (program == "ls" and "-R" in args):
            return "listing"
    if command is None:
        if _TEST_TEXT.search(text):
            return "tests"
        if _INSTALL_TEXT.search(text):
            return "install"
        if _GIT_TEXT.search(text):
            return "git"
    return "other"


def _is_read_tool(tool: str) -> bool:
    """A tool whose result is a file's content (``read_file``, ``Read``, ``view_file``, ``cat``...)."""
    name = tool.lower().replace("-", "_")
    return name in READS or any(
        part in name for part in ("read", "view", "open_file", "get_file", "fetch_file")
    )
