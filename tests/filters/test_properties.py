"""Properties of the filters (hypothesis): pure, idempotent, never longer, is_error only ``safe``,
and diffs, file reads and JSON never touched."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from telos_wrap.filters import aggressive, decide, safe

# Lines an agent's tools print: test results, installs, listings, lint findings, escapes, redraws.
_LINE = st.one_of(
    st.sampled_from(
        [
            "tests/test_a.py::test_ok PASSED [ 10%]",
            "tests/test_a.py::test_bad FAILED",
            "E       assert 1 == 2",
            "Collecting requests>=2",
            "Requirement already satisfied: six in /usr/lib",
            '  (use "git add <file>..." to update what will be committed)',
            "\tmodified:   src/app.py",
            "./src/app/billing/refund.py",
            "src/a.py:3:1: E501 Line too long (120 > 110)",
            "Traceback (most recent call last):",
            '  File "a.py", line 3, in f',
            "ValueError: bad",
            "=== 1 failed, 3 passed in 0.1s ===",
            "\x1b[32mok\x1b[0m",
            "50%\r100%",
            "",
            "   ",
            "[telos: the line above repeated 3 more times]",
        ]
    ),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
)
_TEXT = st.lists(_LINE, max_size=250).map("\n".join)
_COMMANDS = st.sampled_from(
    [None, "pytest -v", "pip install x", "git status", "ls -R", "ruff check", "make", "npm test"]
)


@settings(max_examples=60)
@given(_TEXT)
def test_safe_is_idempotent_and_never_longer(text: str) -> None:
    once = safe(text)
    assert len(once) <= len(text)
    assert safe(once) == once


@settings(max_examples=60)
@given(_TEXT, _COMMANDS)
def test_aggressive_is_idempotent_pure_and_never_longer(text: str, command: str | None) -> None:
    once = aggressive(text, command)
    assert len(once) <= len(text)
    assert aggressive(text, command) == once  # pure: the same input, the same bytes
    assert aggressive(once, command) == once


@settings(max_examples=60)
@given(_TEXT, _COMMANDS, st.sampled_from(["safe", "aggressive"]))
def test_decide_never_grows_and_is_error_gets_only_safe(text: str, command: str | None, mode: str) -> None:
    decision = decide(text, mode, command=command)
    assert len(decision.text) <= len(text)
    errored = decide(text, mode, command=command, is_error=True)
    assert errored.text in (text, safe(text))
    assert errored.filter_id in (None, "safe/1")


@settings(max_examples=40)
@given(_TEXT, st.sampled_from(["safe", "aggressive"]))
def test_file_reads_and_diffs_are_never_touched(text: str, mode: str) -> None:
    for command in ("cat src/app.py", "nl -ba a.py", "sed -n '1,200p' a.py", "head -n 300 a.py", "git diff"):
        assert decide(text, mode, command=command).text == text
    assert decide(text, mode, tool="read_file").text == text
    hunk = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n" + text
    assert decide(hunk, mode, command="cat patch.txt").text == hunk
    assert decide(hunk, mode).text == hunk


@settings(max_examples=40)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=30),
        lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=8), inner, max_size=8),
        max_leaves=60,
    ),
    st.sampled_from(["safe", "aggressive"]),
)
def test_json_is_never_touched(value: object, mode: str) -> None:
    text = json.dumps({"result": value, "padding": ["x" * 50] * 10}, indent=2)
    assert decide(text, mode, command="curl -s api").text == text
