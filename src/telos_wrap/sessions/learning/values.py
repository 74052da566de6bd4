"""The live values of a text (digit-bearing tokens), found in linear time.

``volatility`` learns which values of a system prompt change between requests. Its definition of a
value was one regular expression::

    [^\\s(\\["'<>=]*\\d[^\\s<>=]*?(?=[.,;:!?)\\]"'>]*(?:[\\s=]|$))

a digit-bearing token, whitespace-delimited, leading ``(["'`` and trailing punctuation left out,
``KEY=`` left out (``UPTIME=42s``: the value is ``42s``). Run by a backtracking engine it rescans
the rest of a long run without spaces from every position: quadratic on a run without digits,
cubic on a run of digits that ends badly (``1111…1<``: 5,000 characters took 91 s). Any text an end
user can put into a system prompt reaches it, on every request, before anything is sent.

``ValueScanner`` finds exactly the matches that expression finds (the same spans, in the same order;
``tests/security/test_linear_time.py`` checks it against the expression on random text), in one
pass per token with the scans done by the ``re`` and ``str`` primitives:

* a value lies inside one *token*, a maximal run of characters other than whitespace, ``<``, ``>``
  and ``=``; a token without a digit holds none;
* the look-ahead after a value only succeeds where the punctuation run that follows reaches
  whitespace, ``=`` or the end of the text. Inside a token that is only at its end or in its trailing
  punctuation, so either every candidate end in that suffix works or none does (one check per token);
* so a token holds at most one value: from its first digit, extended back over the characters
  other than ``(["'`` before it, to the token's end without its trailing punctuation (the
  expression's lazy tail cannot stop earlier, its greedy head cannot take a later digit: digits are
  never punctuation). One regular-expression match per token, started only where a token starts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

__all__ = ["PATTERN", "Value", "ValueScanner"]

#: The definition the scanner implements (kept for reference and for the equivalence test).
PATTERN = r"[^\s(\[\"'<>=]*\d[^\s<>=]*?(?=[.,;:!?)\]\"'>]*(?:[\s=]|$))"

#: A token holding a digit, from the last ``(["'`` before its first digit (the value's start, group
#: ``v``) to its end. The look-behind lets a match start only where a token starts: a run without
#: digits is read a bounded number of times, never once from each of its positions.
_TOKEN = re.compile(r"(?<![^\s<>=])(?:[^\s<>=\d]*[(\[\"'])?(?P<v>[^\s<>=\d]*\d[^\s<>=]*)")
_DIGIT = re.compile(r"\d")
#: What may follow a value: trailing punctuation, then whitespace, ``=`` or the end.
_FOLLOW = re.compile(r"[.,;:!?)\]\"'>]*(?:[\s=]|$)")
#: The usual characters after a token, for which the look-ahead holds without running it.
_SPACE = frozenset(" \n\t")
#: Trailing punctuation that can sit inside a token (``>`` cannot): left out of the value.
_TRAILING = ".,;:!?)]\"'"


class Value:
    """One value found in ``string``: the part of ``re.Match`` the learning code uses."""

    __slots__ = ("begin", "finish", "string")

    def __init__(self, string: str, begin: int, finish: int) -> None:
        self.string, self.begin, self.finish = string, begin, finish

    def start(self) -> int:
        """Where the value begins in ``string`` (what ``re.Match.start()`` gives for the expression's
        match)."""
        return self.begin

    def end(self) -> int:
        """Where the value ends in ``string``, exclusive (``re.Match.end()``)."""
        return self.finish

    def span(self) -> tuple[int, int]:
        """``(start, end)`` of the value in ``string`` (``re.Match.span()``)."""
        return self.begin, self.finish

    def group(self) -> str:
        """The value's text, ``string[start:end]`` (``re.Match.group()``; there are no groups to ask for)."""
        return self.string[self.begin : self.finish]

    def __repr__(self) -> str:
        return f"<Value span={self.span()} {self.group()!r}>"


class ValueScanner:
    """``finditer`` / ``search`` / ``sub`` of the value expression (``PATTERN``), in linear time."""

    pattern = PATTERN

    def __init__(self) -> None:
        #: The spans of the text scanned last: a line is read for its values, then masked (``sub``).
        self._last: tuple[str, list[tuple[int, int]]] = ("", [])

    def spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` of every value of ``text``, in order."""
        last = self._last  # one read: another thread may replace it meanwhile
        if last[0] is text:
            return last[1]
        found: list[tuple[int, int]] = []
        if _DIGIT.search(text) is not None:  # no digit, no value: one fast scan (the token
            size = len(text)  # pattern would step through every position)
            for token in _TOKEN.finditer(text):
                stop = token.end()
                # After the token: usually a space or the end (nothing to check), else e.g. "1<":
                # then nothing in the token can end a value.
                if stop < size and text[stop] not in _SPACE and _FOLLOW.match(text, stop) is None:
                    continue
                begin = token.start("v")
                found.append((begin, begin + len(token.group("v").rstrip(_TRAILING))))
        self._last = (text, found)
        return found

    def finditer(self, text: str) -> Iterator[Value]:
        """The values of ``text`` in order, each a ``Value`` (``re.Pattern.finditer`` of ``PATTERN``: the same
        spans), from ``spans``."""
        return (Value(text, begin, finish) for begin, finish in self.spans(text))

    def search(self, text: str) -> Value | None:
        """The first value of ``text``, or ``None`` (``re.Pattern.search`` of ``PATTERN``)."""
        return next(self.finditer(text), None)

    def sub(self, replacement: str | Callable[[Value], str], text: str) -> str:
        """``text`` with every value replaced (``re.Pattern.sub`` of ``PATTERN``), except that a string
        ``replacement`` is taken literally: its backslashes are not escapes. A callable one is given each
        ``Value``."""
        out: list[str] = []
        cursor = 0
        for begin, finish in self.spans(text):
            out.append(text[cursor:begin])
            out.append(replacement(Value(text, begin, finish)) if callable(replacement) else replacement)
            cursor = finish
        out.append(text[cursor:])
        return "".join(out)
