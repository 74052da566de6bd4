"""Keyed digests of system-prompt lines: what learned state says of the caller's text instead of text.

A session remembers which units of its system prompt are volatile, and the fleet shares where such
units sit in an application's prompts (``volatility.py``, ``fleet.py``). Neither keeps the text or
a regular expression built from it (docs/security.md): a line is named by a *keyed digest* of its
**skeleton** (the line with its digit-bearing tokens masked, ``values.ValueScanner``), and where a
fleet fact needs holes (the conversations of an application differ in a word there: a user's
name), by a digest per whitespace-delimited token of the skeleton, a differing token made a hole.

* **The key** (``space_key``): derived from the fleet namespace (``fleet.namespace``: a digest of the
  call's tenant signals — the ``isolation`` hint, the client's credentials and base URL). The same
  line has unrelated digests in two tenants, and whoever reads the store without the credentials
  cannot test a guess ("is it ``Customer: Ana Lopez``?") against a digest. Without any tenant
  signal (a bare ``Session`` used without a client) the namespace is ``"shared"``, a public key:
  docs/security.md says what that leaves.
* **A line digest** (``line_digest``): 12 hex characters (48 bits) of BLAKE2b keyed with the key.
* **A token print** (``token_print``): one 6-hex-character keyed digest per token of the skeleton,
  joined by ``.``; ``*`` is a hole (``fits`` accepts any token there).

Pure and deterministic; the per-block digests are memoized by key and text (bounded).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence

from telos_wrap.ir.shared import BoundedMemo, share
from telos_wrap.sessions.learning.values import ValueScanner

__all__ = [
    "EDGE_AFTER",
    "EDGE_BEFORE",
    "HOLE",
    "SHARED_KEY",
    "BlockLines",
    "block_lines",
    "block_print",
    "contributor_digest",
    "fits",
    "is_contributor",
    "is_digest",
    "is_token_print",
    "key_id",
    "line_digest",
    "line_print",
    "skeleton",
    "space_key",
    "token_print",
]

#: Where a unit starts / ends its block (an anchor that is the block's edge, not a line).
EDGE_BEFORE = "^"
EDGE_AFTER = "$"
#: A token of a token print that fits any token.
HOLE = "*"
_LINE_HEX = 8
_TOKEN_HEX = 6
_VALUES = ValueScanner()
_HEX = frozenset("0123456789abcdef")


def space_key(space: str) -> bytes:
    """The 32-byte digest key of fleet namespace ``space`` (``fleet.namespace``)."""
    return hashlib.blake2b(
        f"telos-lines\x00{space}".encode("utf-8", "surrogatepass"), digest_size=32
    ).digest()


#: The key of the namespace ``"shared"`` (no tenant signal).
SHARED_KEY = space_key("shared")


def skeleton(line: str) -> str:
    """``line`` with each digit-bearing token masked (``values.ValueScanner``)."""
    return _VALUES.sub("\x00", line)


def _digest(key: bytes, text: str, hexchars: int) -> str:
    return hashlib.blake2b(
        text.encode("utf-8", "surrogatepass"), key=key, digest_size=hexchars // 2
    ).hexdigest()


def _hash(key: bytes, data: str, hexchars: int) -> str:
    return hashlib.blake2b(
        data.encode("utf-8", "surrogatepass"), key=key, digest_size=hexchars // 2
    ).hexdigest()


def line_digest(key: bytes, line: str) -> str:
    """The keyed digest of ``line``'s skeleton (8 hex characters; a line's entry in a fingerprint)."""
    return _hash(key, skeleton(line), _LINE_HEX)


def contributor_digest(key: bytes, name: str) -> str:
    """A 12-hex-character keyed digest of ``name`` (a session id, as a fleet fact's contributor)."""
    return _digest(key, "C\x00" + name, 12)


def key_id(key: bytes) -> str:
    """Which key made a fingerprint (its last entry: ``k`` and 8 hex characters of a keyed digest)."""
    return "k" + hashlib.blake2b(b"telos-key-id", key=key, digest_size=4).hexdigest()


def line_print(key: bytes, line: str) -> str:
    """A line's entry in a fingerprint (``volatility.fingerprint``): the keyed digest of the line;
    for a line with values, then ``/`` the digest of its skeleton and ``/`` 6 hex characters per value."""
    spans = _VALUES.spans(line)
    own = _hash(key, line, _LINE_HEX)
    if not spans:
        return own
    values = "".join(_hash(key, line[start:end], 6) for start, end in spans)
    return f"{own}/{_hash(key, skeleton(line), _LINE_HEX)}/{values}"


def _block_print_of(key: tuple[bytes, str]) -> str:
    digest_key, text = key
    if text.startswith("\x00"):
        return "~" + text[1:]
    return share(",".join(line_print(digest_key, line) for line in text.split("\n")))


def _shared_text_key(key: tuple[bytes, str]) -> tuple[bytes, str]:
    return (key[0], share(key[1]))


#: Block prints by key and text (the text is shared first: the one copy of a prompt many
#: conversations send), bounded in entries and bytes (docs/sessions.md).
_block_prints: BoundedMemo[tuple[bytes, str], str] = BoundedMemo(
    _block_print_of, max_entries=256, max_bytes=4 << 20, keep=_shared_text_key
)


def block_print(key: bytes, text: str) -> str:
    """The fingerprint entry of one block's text: its ``line_print`` entries joined by ``,`` (memoized)."""
    return _block_prints((key, text))


def token_print(key: bytes, line: str) -> str:
    """One keyed digest per whitespace-delimited token of ``line``'s skeleton, joined by ``.``
    (``"-"`` for a line without a token: blank)."""
    tokens = skeleton(line).split()
    if not tokens:
        return "-"
    return ".".join(_digest(key, f"T\x00{token}", _TOKEN_HEX) for token in tokens)


def fits(printed: str, key: bytes, line: str) -> bool:
    """Whether ``line`` fits token print ``printed`` (same number of tokens, every non-hole equal)."""
    return _fits(printed, token_print(key, line))


def _fits(printed: str, actual: str) -> bool:
    if printed == actual:
        return True
    mine, theirs = printed.split("."), actual.split(".")
    return len(mine) == len(theirs) and all(m in (HOLE, t) for m, t in zip(mine, theirs, strict=True))


def is_digest(value: object) -> bool:
    """A well-formed line digest."""
    return isinstance(value, str) and len(value) == _LINE_HEX and set(value) <= _HEX


def is_contributor(value: object) -> bool:
    """A well-formed contributor digest (``contributor_digest``)."""
    return isinstance(value, str) and len(value) == 12 and set(value) <= _HEX


def is_token_print(value: object) -> bool:
    """A well-formed token print (at most 256 tokens, at least one that is not a hole)."""
    if not isinstance(value, str) or len(value) > 256 * (_TOKEN_HEX + 1):
        return False
    if value == "-":
        return True
    tokens = value.split(".")
    return any(t != HOLE for t in tokens) and all(
        t == HOLE or (len(t) == _TOKEN_HEX and set(t) <= _HEX) for t in tokens
    )


class BlockLines:
    """One block's lines with their keyed skeleton digests and offsets, computed once per key and text."""

    __slots__ = ("_tokens", "digests", "key", "lines", "offsets", "text")

    def __init__(self, key: bytes, text: str) -> None:
        self.key = key
        self.text = text
        self.lines = text.split("\n")
        self.offsets = list(itertools.accumulate((len(line) + 1 for line in self.lines), initial=0))
        if text.startswith("\x00"):
            self.digests = [line_digest(key, line) for line in self.lines]
        else:  # a line's digest is its skeleton's entry in the block's print (computed once)
            self.digests = [
                entry.split("/", 2)[1] if "/" in entry else entry
                for entry in block_print(key, text).split(",")
            ]
        self._tokens: dict[int, str] = {}

    def tokens(self, number: int) -> str:
        """The token print of line ``number``."""
        found = self._tokens.get(number)
        if found is None:
            found = self._tokens[number] = token_print(self.key, self.lines[number])
        return found

    def fits(self, number: int, printed: str) -> bool:
        """Whether line ``number`` fits token print ``printed``: as many tokens, each equal or a ``HOLE``
        (module function ``fits``, with the line's token print made once). ``number`` must be a line of the
        block (``IndexError`` otherwise)."""
        return _fits(printed, self.tokens(number))

    def span(self, first: int, last: int) -> tuple[int, int]:
        """Character offsets of lines ``first..last`` (the last line's end, not its line break)."""
        return self.offsets[first], self.offsets[last + 1] - 1

    def matching(self, digest: str) -> list[int]:
        """The numbers of the lines whose digest is ``digest``, in order (several when a line repeats:
        ``spans.locate`` then keeps the one whose neighbours fit, if exactly one does)."""
        return [n for n, d in enumerate(self.digests) if d == digest]


def _lines_of(key: tuple[bytes, str]) -> BlockLines:
    return BlockLines(*key)


def _size(key: tuple[bytes, str], value: BlockLines) -> int:
    return 2 * len(key[1]) + 80 * len(value.lines)


_memo: BoundedMemo[tuple[bytes, str], BlockLines] = BoundedMemo(
    _lines_of, max_entries=256, max_bytes=4 << 20, sizer=_size
)


def block_lines(key: bytes, text: str) -> BlockLines:
    """``BlockLines`` of ``text`` under ``key`` (memoized: a system prompt is read on every request)."""
    return _memo((key, text))


def digests_of(key: bytes, lines: Sequence[str]) -> list[str]:
    """The line digests of ``lines``."""
    return [line_digest(key, line) for line in lines]
