"""Fidelity guard: every planted fact of the corpus survives every mode; what must go whole does.

Also the floor the issue sets on noisy output: ``safe`` removes at least 30% of each colored,
redrawn or repeated output, and ``aggressive`` is never weaker than ``safe``.
"""

from __future__ import annotations

import pytest

from telos_wrap.filters import OutputFilter, decide

from .corpus import Entry, entries, visible

ENTRIES = entries()


def _failures_only(text: str) -> str:
    """A caller's own pytest filter: the lines that say something failed."""
    return "\n".join(
        line for line in text.split("\n") if "FAIL" in line or "rror" in line or "failed" in line
    )


MODES = (
    "safe",
    "aggressive",
    OutputFilter("corpus-user", 1, commands={"pytest": _failures_only}, then="aggressive"),
)


def _run(entry: Entry, mode: object) -> str:
    return decide(entry.text, mode, command=entry.command, tool=entry.tool, is_error=entry.is_error).text


@pytest.mark.parametrize("mode", MODES, ids=["safe", "aggressive", "user"])
@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_every_planted_fact_is_kept(entry: Entry, mode: object) -> None:
    for fact in entry.facts:
        assert fact in visible(entry.text), f"corpus error: {fact!r} not in {entry.name}"
    out = _run(entry, mode)
    shown = visible(out)
    for fact in entry.facts:
        assert fact in shown, f"{entry.name}: {fact!r} lost in mode {mode}:\n{out}"
    assert len(out) <= len(entry.text)


@pytest.mark.parametrize("mode", ["safe", "aggressive"])
@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.whole], ids=[e.name for e in ENTRIES if e.whole])
def test_diffs_file_reads_structured_and_small_results_go_whole(entry: Entry, mode: str) -> None:
    decision = decide(entry.text, mode, command=entry.command, tool=entry.tool)
    assert decision.filter_id is None and decision.text == entry.text, decision.why


NOISY = [e for e in ENTRIES if e.name.startswith("noisy_")]


@pytest.mark.parametrize("entry", NOISY, ids=[e.name for e in NOISY])
def test_safe_removes_at_least_30_percent_of_noisy_output(entry: Entry) -> None:
    out = _run(entry, "safe")
    assert len(out) <= 0.7 * len(entry.text), f"{entry.name}: {len(entry.text)} -> {len(out)}"
    assert len(_run(entry, "aggressive")) <= len(out)


def test_an_is_error_result_gets_only_safe_edits() -> None:
    (entry,) = [e for e in ENTRIES if e.is_error]
    assert _run(entry, "aggressive") == _run(entry, "safe") != entry.text


@pytest.mark.parametrize(
    ("name", "at_most"),
    [
        ("pytest_verbose", 0.4),
        ("jest", 0.7),
        ("go_test", 0.5),
        ("cargo_test", 0.5),
        ("pip_install", 0.5),
        ("npm_install", 0.5),
        ("git_push", 0.8),
        ("find_py", 0.6),
        ("ruff", 0.6),
        ("cargo_build", 0.6),
        ("script_traceback", 0.5),
        ("ls_recursive", 0.8),
    ],
)
def test_aggressive_cuts_the_noisy_families(name: str, at_most: float) -> None:
    (entry,) = [e for e in ENTRIES if e.name == name]
    out = _run(entry, "aggressive")
    assert len(out) <= at_most * len(entry.text), f"{name}: {len(entry.text)} -> {len(out)}\n{out}"
