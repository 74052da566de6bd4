"""The oracle bound: per request, the tokens of content already sent earlier in the session.

A request is read as a sequence of *units* in the vendor's render order, canonicalised so that
nothing but content counts:

* tools: one unit per tool definition, as canonical JSON (sorted keys, no cache markers), the
  tools sorted — their order and key order are not content;
* text (system prompt, message text, OpenAI string contents): one unit per line;
* any other block (``tool_use``, ``tool_result``, images, OpenAI ``tool_calls``...): one unit,
  its canonical JSON without cache markers;
* a zero-token unit for each message boundary (role), so turns cannot be merged.

Volatile spans are excluded: ``Current time:`` / ``Current date:`` lines and everything inside an
``<environment_info>`` envelope (the live clock of the recorded LangGraph sessions), and the exact
strings a harness style of ``telos_wrap.testing.harnesses`` declares volatile for that request (passed to
``SessionBound.add``): every line holding one is dropped whole — the unit that may move out of a
prompt is a whole line, never a value cut out of it (docs/sessions.md), so the bound no longer
rewards cutting ``You are helpful. Date: <cut>. Be brief.`` apart.
Identity also ignores what a vendor renders alike: a ``tool_result``'s string content is the
same as one text part (its tokens are the request's own).

The bound of a request is the longest unit prefix it shares with *any* earlier request of the
same session (tokens = UTF-8 bytes / 4, the emulator's estimate) — what a prefix cache with
perfect breakpoints and a perfectly stable layout could read — and 0 when that is below the
vendor's minimum cacheable length (Anthropic: per model, 1024 for unknown models; OpenAI: 1024,
then whole 128-token steps).

It is computed on the request as the harness sent it (the recorded one, or a style's rewrite).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from telos_wrap.emulator.anthropic_rules import min_cacheable_tokens

Unit = tuple[str, float]

_CLOCK = re.compile(r"^\s*current (time|date)\s*:", re.IGNORECASE)
_MARKERS = ("cache_control", "prompt_cache_breakpoint")


def _canonical(value: Any) -> str:
    return json.dumps(_strip(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _strip(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip(v) for k, v in value.items() if k not in _MARKERS}
    if isinstance(value, list):
        return [_strip(item) for item in value]
    return value


def _tokens(text: str) -> float:
    return len(text.encode("utf-8")) / 4


_CUT = "\x00"


def text_units(text: str, volatile: Sequence[str] = ()) -> Iterator[Unit]:
    """One unit per non-volatile line: a line holding one of the ``volatile`` strings is dropped whole."""
    for span in volatile:
        if span and span in text:
            text = text.replace(span, _CUT)
    inside = False
    for line in text.splitlines(keepends=True):
        if _CUT in line:
            continue
        stripped = line.strip()
        if stripped.startswith("<environment_info>"):
            inside = True
        dropped = inside or bool(_CLOCK.match(stripped))
        if stripped.endswith("</environment_info>"):
            inside = False
        if not dropped:
            yield "t:" + line, _tokens(line)


def _identity(block: Mapping[str, Any]) -> Mapping[str, Any]:
    """``block`` as the vendor renders it: a tool result's string content is one text part."""
    if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
        return {**block, "content": [{"type": "text", "text": block["content"]}]}
    return block


def _block_units(block: Any, volatile: Sequence[str]) -> Iterator[Unit]:
    if isinstance(block, str):
        yield from text_units(block, volatile)
    elif isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
        yield from text_units(block["text"], volatile)
    elif isinstance(block, Mapping):
        yield "j:" + _canonical(_identity(block)), _tokens(_canonical(block))
    elif block is not None:
        data = _canonical(block)
        yield "j:" + data, _tokens(data)


def _content_units(content: Any, volatile: Sequence[str] = ()) -> Iterator[Unit]:
    if isinstance(content, list):
        for block in content:
            yield from _block_units(block, volatile)
    else:
        yield from _block_units(content, volatile)


def _tool_units(tools: Any) -> Iterator[Unit]:
    for data in sorted(_canonical(tool) for tool in tools or []):
        yield "tool:" + data, _tokens(data)


def anthropic_units(kwargs: Mapping[str, Any], volatile: Sequence[str] = ()) -> list[Unit]:
    """Units of an Anthropic Messages request: tools, system, messages."""
    units = list(_tool_units(kwargs.get("tools")))
    units.extend(_content_units(kwargs.get("system"), volatile))
    for message in kwargs.get("messages") or []:
        units.append((f"role:{message.get('role')}", 0.0))
        units.extend(_content_units(message.get("content"), volatile))
    return units


def openai_units(kwargs: Mapping[str, Any], volatile: Sequence[str] = ()) -> list[Unit]:
    """Units of an OpenAI Chat Completions request: tools, then each message's parts and calls."""
    units = list(_tool_units(kwargs.get("tools")))
    for message in kwargs.get("messages") or []:
        units.append((f"role:{message.get('role')}:{message.get('name', '')}", 0.0))
        units.extend(_content_units(message.get("content"), volatile))
        for call in message.get("tool_calls") or []:
            data = _canonical(call)
            units.append(("j:" + data, _tokens(data)))
    return units


def readable(tokens: float, *, api: str, model: str) -> int:
    """What the vendor could actually read of a ``tokens``-long shared prefix."""
    if api == "anthropic":
        return int(tokens) if tokens >= min_cacheable_tokens(model) else 0
    if tokens < 1024:
        return 0
    return int(tokens) // 128 * 128


class SessionBound:
    """Feed the requests of one session in order; each call returns that request's bound.

    ``causal=True`` is the *causal* bound: the best any learner without foresight can do. A volatile
    string is cut only from the request where its slot (its position in the style's list of
    volatile strings) first changed, or first appeared after the first request; before that it is
    content like any other. So the request where a value first changes pays for the prefix after it,
    as it must for anyone who could not know it would change (the oracle bound cuts it from the
    first request on). Learning on sight (a clock) can beat this bound; nothing causal can beat the
    oracle.
    """

    def __init__(self, *, causal: bool = False) -> None:
        self._seen: set[bytes] = set()
        self._causal = causal
        self._previous: tuple[str, ...] | None = None
        self._known: set[int] = set()

    def add(self, api: str, kwargs: Mapping[str, Any], volatile: Sequence[str] = ()) -> int:
        """The bound of the next request; ``volatile``: the strings its harness changes every turn."""
        if self._causal:
            previous, self._previous = self._previous, tuple(volatile)
            if previous is not None:
                self._known.update(
                    i for i, value in enumerate(volatile) if i >= len(previous) or previous[i] != value
                )
            volatile = [value for i, value in enumerate(volatile) if i in self._known]
        units = anthropic_units(kwargs, volatile) if api == "anthropic" else openai_units(kwargs, volatile)
        return readable(shared_prefix(self._seen, units), api=api, model=str(kwargs.get("model", "")))


def shared_prefix(seen: set[bytes], units: Iterable[Unit]) -> float:
    """The tokens of the longest prefix of ``units`` an earlier request of the session sent: each
    prefix is one digest of the unit keys up to it, and ``seen`` (the session's, updated here) holds
    every prefix digest its requests sent so far."""
    digest = hashlib.blake2b(digest_size=16)
    shared = 0.0
    cumulative = 0.0
    matching = True
    for key, tokens in units:
        digest.update(key.encode("utf-8"))
        digest.update(b"\x00")
        state = digest.copy().digest()
        cumulative += tokens
        if matching and state in seen:
            shared = cumulative
        else:
            matching = False
        seen.add(state)
    return shared
