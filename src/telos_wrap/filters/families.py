"""``aggressive``'s command-aware filters, one per family of noisy output (docs/output-filter.md).

Each takes the output's lines and returns the lines to send. None removes a ``lines.protected``
line (failures, tracebacks, a failing test's section, exit codes, summaries), and every removal
leaves a ``[telos: …]`` line with its count.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from telos_wrap.filters.lines import MARK, protected, remove

__all__ = ["FAMILIES", "cut_middle", "git", "install", "lint", "listing", "tests"]

_PASSING = re.compile(
    r"^\S+\.py(?:::\S+)*\s+(?:PASSED|SKIPPED|XFAIL|XPASS|xfail)\b"  # pytest -v
    r"|^\S+\.py [.sxX]+\s*(?:\[\s*\d+%\])?$"  # pytest progress with no F/E
    r"|^\S+ \(\S+\) \.\.\. (?:ok|skipped\b.*)$|^test\w* \(\S+\)$|^\S.* \.\.\. ok$"  # unittest -v
    r"|^\s*(?:✓|√|✔)\s"  # jest, vitest, mocha
    r"|^PASS\s+\S+"  # a passing jest suite
    r"|^=== (?:RUN|PAUSE|CONT|NAME)\s|^\s*--- (?:PASS|SKIP): "  # go test -v
    r"|^test \S+ \.\.\. (?:ok|ignored)$"  # cargo test
)


def tests(lines: Sequence[str]) -> list[str]:
    """Passing tests collapsed to a count; failures, their sections and the summary kept whole."""
    return remove(lines, [bool(_PASSING.match(line)) for line in lines], "passing test lines removed")


_INSTALL_NOISE = re.compile(
    r"^\s*(?:Collecting |Downloading |Using cached |Requirement already satisfied|Obtaining |"
    r"Installing build dependencies|Getting requirements to build|Preparing metadata|Building wheels? |"
    r"Created wheel|Stored in directory|Attempting uninstall|Found existing installation|Uninstalling |"
    r"Successfully uninstalled|Installing collected packages|Looking in indexes|Processing |"
    r"Building editable|Running setup\.py|Checking if build backend)"
    r"|^\s*[━─═█▏▎▍▌▋▊▉#=>\- ]{8,}\s*[\d.]+(?:/[\d.]+)?\s*[kMG]i?B"  # progress bars
    r"|^npm (?:http|timing|sill|verb)\b|^\s*[⸨(][#░█ ]+[⸩)]"
    r"|^(?:Get|Hit|Ign):\d+ |^(?:Reading package lists|Building dependency tree|Reading state information|"
    r"Selecting previously unselected|Preparing to unpack|Unpacking |Setting up |Processing triggers|"
    r"\(Reading database)"
    r"|^\s+(?:Compiling|Downloaded|Downloading|Updating|Fresh|Checking|Locking|Adding|Installing|"
    r"Resolving) \S"
    r"|^go: downloading |^\[\d+/\d+\] "
)


def install(lines: Sequence[str]) -> list[str]:
    """Download, resolve and unpack progress removed; what was installed, warnings and errors kept."""
    return remove(
        lines, [bool(_INSTALL_NOISE.match(line)) for line in lines], "install progress lines removed"
    )


_GIT_NOISE = re.compile(
    r'^\s+\((?:use "git [^"]+"|commit or discard|create/copy files|fix conflicts|all conflicts fixed)[^)]*\)$'
    r"|^(?:remote: )?(?:Enumerating objects|Counting objects|Compressing objects|Writing objects|"
    r"Receiving objects|Resolving deltas|Total \d+|Delta compression|Unpacking objects)"
)


def git(lines: Sequence[str]) -> list[str]:
    """``git`` hints and transfer progress removed; a log's author and date join its commit line."""
    kept = remove(
        lines, [bool(_GIT_NOISE.match(line)) for line in lines], "git progress and hint lines removed"
    )
    out: list[str] = []
    index = 0
    while index < len(kept):
        line = kept[index]
        if re.match(r"^commit [0-9a-f]{7,40}\b", line) and index + 2 < len(kept):
            author, date = kept[index + 1], kept[index + 2]
            if author.startswith("Author: ") and date.startswith("Date: "):
                out.append(f"{line} | {author[8:].strip()} | {date[6:].strip()}")
                index += 3
                if index < len(kept) and kept[index] == "":
                    index += 1
                continue
        out.append(line)
        index += 1
    return out


#: Directories whose files an agent reads by name almost never (caches, VCS and package stores).
_NOISE_DIRS = re.compile(
    r"(?:^|/)(?:__pycache__|\.git|node_modules|\.mypy_cache|\.pytest_cache|\.ruff_cache|"
    r"\.tox|\.nox|\.venv|venv|[^/]+\.egg-info|\.eggs|\.cache|\.idea)(?:/|:?$)"
)
_PATH = re.compile(r"^\.{0,2}/?[\w.@+-]+(?:/[\w.@+-]+)+/?$")


def listing(lines: Sequence[str]) -> list[str]:
    """A recursive listing grouped by directory: ``find`` paths as one line per directory, the
    entries of cache, VCS and package-store directories counted instead of named."""
    keep = protected(lines)
    drop = [False] * len(lines)
    # ``ls -R``: a ``path:`` header, its entries, a blank line.
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.endswith(":") and _NOISE_DIRS.search(line[:-1] + "/"):
            end = index + 1
            while end < len(lines) and lines[end].strip():
                drop[end] = True
                end += 1
            index = end
            continue
        if not line.endswith(":") and (line.endswith(".pyc") or line in ("__pycache__",)):
            drop[index] = True
        index += 1
    out = remove(lines, drop, "cache entries not listed", keep)
    paths = [line for line in out if _PATH.match(line)]
    if len(paths) < 20 or len(paths) < 0.8 * len([line for line in out if line.strip()]):
        return out
    # ``find``-style: one path a line. Group consecutive paths by their directory.
    grouped: list[str] = []
    noise = 0
    current: str | None = None
    names: list[str] = []

    def flush() -> None:
        if current is not None:
            grouped.append(f"{current}/: {'  '.join(names)}" if len(names) > 1 else f"{current}/{names[0]}")
        names.clear()

    for line in out:
        if not _PATH.match(line):
            flush()
            current = None
            grouped.append(line)
            continue
        if _NOISE_DIRS.search(line):
            noise += 1
            continue
        parent, _, name = line.rstrip("/").rpartition("/")
        if parent != current:
            flush()
            current = parent
        names.append(name + ("/" if line.endswith("/") else ""))
    flush()
    if noise:
        grouped.append(f"{MARK}{noise} paths under cache, VCS and package-store directories not listed]")
    return grouped


_FINDING = re.compile(
    r"^(?P<loc>[^\s:]+:\d+(?::\d+)?):?\s+(?:(?:error|warning|note):\s+.*?\s+\[(?P<mypy>[\w-]+)\]$|"
    r"(?P<code>[A-Z]{1,4}\d{2,5}|[a-z]+(?:-[a-z]+)+)\b)"
)
_ESLINT_ROW = re.compile(r"^\s+(?P<loc>\d+:\d+)\s+(?:error|warning)\s+.*?\s{2,}(?P<code>[@\w/-]+)$")


def lint(lines: Sequence[str]) -> list[str]:
    """Findings grouped by rule: a rule found more than 5 times keeps its first 3 findings whole,
    the others become one line listing where they are (every location kept)."""
    rules: list[str | None] = []
    locations: list[str] = []
    header = ""
    for line in lines:
        found = _FINDING.match(line)
        row = None if found else _ESLINT_ROW.match(line)
        if found:
            rules.append(found.group("mypy") or found.group("code"))
            locations.append(found.group("loc"))
        elif row:
            rules.append(row.group("code"))
            locations.append(f"{header}:{row.group('loc')}")
        else:
            if (line and not line[0].isspace() and "/" in line) or line.endswith(
                (".js", ".ts", ".tsx", ".jsx")
            ):
                header = line.strip()
            rules.append(None)
            locations.append("")
    counts = Counter(rule for rule in rules if rule is not None)
    grouped = {rule for rule, count in counts.items() if count > 5}
    if not grouped:
        return list(lines)
    seen: Counter[str] = Counter()
    rest: dict[str, list[str]] = {}
    out: list[str | tuple[str]] = []  # a 1-tuple: where a rule's summary line goes
    for line, rule, where in zip(lines, rules, locations, strict=True):
        if rule is not None and rule in grouped:
            seen[rule] += 1
            if seen[rule] <= 3:
                out.append(line)
                if seen[rule] == 3:
                    out.append((rule,))
                continue
            rest.setdefault(rule, []).append(where)
            continue
        out.append(line)
    return [
        line
        if isinstance(line, str)
        else f"{MARK}{len(rest[line[0]])} more {line[0]} findings at {', '.join(rest[line[0]])}]"
        for line in out
    ]


#: Lines kept at each end of a long output, and how long an output must be to be cut.
HEAD = 40
TAIL = 40
CUT_OVER = 150


def cut_middle(lines: Sequence[str]) -> list[str]:
    """A long output cut to its head and tail, keeping every protected line of the middle."""
    if len(lines) <= CUT_OVER:
        return list(lines)
    keep = protected(lines)
    drop = [HEAD <= index < len(lines) - TAIL for index in range(len(lines))]
    return remove(lines, drop, "lines cut from the middle", keep)


FAMILIES: dict[str, Callable[[Sequence[str]], list[str]]] = {
    "tests": tests,
    "install": install,
    "git": git,
    "listing": listing,
    "lint": lint,
}
