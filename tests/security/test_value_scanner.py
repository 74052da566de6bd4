"""Promise L1 (docs/security.md), the value scanner: the live values of a system prompt are found in
linear time, and exactly where the regular expression that defines them finds them."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from telos_wrap.sessions.values import PATTERN, ValueScanner

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


def test_pathological_runs_are_linear() -> None:
    """The expression took 91 s on 5,000 characters of ``1…1<``; the scanner reads a megabyte of each
    worst case in well under a second (a bound loose enough for a loaded 2-core machine)."""
    n = 1_000_000
    for text in ("s" * n, ("1" * 999 + "<") * (n // 1000), "(1" * (n // 2) + "<", "1." * (n // 2) + "<"):
        started = time.perf_counter()
        list(SCANNER.finditer(text))
        assert time.perf_counter() - started < 2.0, text[:8]
