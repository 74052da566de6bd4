"""Promise L1 (docs/security.md), the value scanner: the live values of a system prompt are found in
linear time, and exactly where the regular expression that defines them finds them."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telos_wrap.sessions.learning.values import PATTERN, ValueScanner

DEFINITION = re.compile(PATTERN)
SCANNER = ValueScanner()
#: Every character class the expression distinguishes, and a non-ASCII digit and space.
ALPHABET = "a1 9(\"'[]<>=.,;:!?)\n\t-_x\u0663\u2003"


@settings(max_examples=3000)
@given(st.text(alphabet=ALPHABET, max_size=24))
def test_the_scanner_finds_exactly_what_the_expression_finds(text: str) -> None:
    assert [m.span() for m in SCANNER.finditer(text)] == [m.span() for m in DEFINITION.finditer(text)]
    assert SCANNER.sub("\x00", text) == DEFINITION.sub("\x00", text)
    first = DEFINITION.search(text)
    found = SCANNER.search(text)
    assert (found.span() if found else None) == (first.span() if first else None)


@pytest.mark.timed
def test_pathological_runs_are_linear() -> None:
    """The expression took 91 s on 5,000 characters of ``1…1<``; the scanner reads a megabyte of each
    worst case in well under a second (a bound loose enough for a loaded 2-core machine)."""
    n = 1_000_000
    for text in ("s" * n, ("1" * 999 + "<") * (n // 1000), "(1" * (n // 2) + "<", "1." * (n // 2) + "<"):
        started = time.perf_counter()
        list(SCANNER.finditer(text))
        assert time.perf_counter() - started < 2.0, text[:8]


TAG = re.compile(r"<prev\b[^>]*>.*?</prev\s*>", re.DOTALL)


@settings(max_examples=3000)
@given(st.text(alphabet="<>/prevx \n", max_size=30))
def test_envelopes_are_found_exactly_where_their_expression_finds_them(text: str) -> None:
    from telos_wrap.lift.user_split import TagPattern

    assert [m.span() for m in TAG.finditer(text)] == [
        (m.start(), m.end()) for m in TagPattern("prev").finditer(text)
    ]
    assert TAG.sub("<x>", text) == TagPattern("prev").sub("<x>", text)


@pytest.mark.timed
def test_envelopes_are_linear() -> None:
    """``<system-reminder>`` 20,000 times without a closing tag took 64 s through the expression."""
    from telos_wrap.lift.user_split import DEFAULT_PATTERNS, split_text

    for text in ("<system-reminder>" * 20_000, "<system-reminder " * 20_000, "<prev>" * 40_000):
        started = time.perf_counter()
        split_text(text, DEFAULT_PATTERNS, with_fold=True)
        assert time.perf_counter() - started < 2.0, text[:12]
