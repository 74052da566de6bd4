"""A vcrpy request matcher for bodies telos emitted: ``telos_body``.

vcrpy's ``raw_body`` matcher compares bytes, and its ``body`` matcher parses JSON but still sees
everything telos adds. A cassette recorded with telos then stops matching as soon as something that
is telos' plumbing, not the application's request, differs: a breakpoint moved by a newer telos, a
``prompt_cache_key`` of another derivation, or a ``Current time: …`` envelope that telos moved out of
the cached prefix and that is different on every run. ``telos_body`` compares the two JSON bodies
after normalizing, on both sides:

* key order (canonical JSON, ``telos_wrap.ir.canon``);
* cache markers: ``cache_control`` (Anthropic) and ``prompt_cache_breakpoint`` (OpenAI) anywhere,
  ``prompt_cache_options``, ``diagnostics``, and a ``prompt_cache_key`` telos derived (``telos-…``);
  ``stream_options.include_usage`` (telos asks for stream usage);
* a content list holding one text block is compared as its string (the shape telos needs to hang a
  marker on a string);
* the text of the per-turn envelopes telos treats as DROP (``<environment_info>…``,
  ``<system-reminder>…``, ``<command-*>…``, ``Current time: …``; ``lift/user_split.py``) is masked:
  compared by position, not by content.

Everything else must be equal, so a real change of the conversation still fails the match, with the
first differing path in vcrpy's message. A non-JSON body is compared byte for byte.

pytest-recording: the plugin registers the name, so ``vcr_config`` only has to list it::

    @pytest.fixture(scope="module")
    def vcr_config():
        return {"match_on": ["method", "scheme", "host", "port", "path", "query", "telos_body"]}

Plain vcrpy: ``telos_wrap.testing.vcr_matcher.register(my_vcr)`` then ``match_on=[..., "telos_body"]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from telos_wrap.ir.canon import MARKER_KEYS, canonical_json
from telos_wrap.lift.user_split import DEFAULT_PATTERNS

__all__ = ["MATCH_ON", "NAME", "normalize_body", "register", "telos_body"]

#: The matcher's name in vcrpy.
NAME = "telos_body"
#: vcrpy's default ``match_on`` plus ``telos_body``.
MATCH_ON = ("method", "scheme", "host", "port", "path", "query", NAME)

_TOP_LEVEL = frozenset({"prompt_cache_options", "diagnostics"})
_TELOS_KEY_PREFIX = "telos-"
_MASK = "<telos:drop>"


def _mask(text: str) -> str:
    for pattern in DEFAULT_PATTERNS.drop:
        text = pattern.sub(_MASK, text)
    return text


def _normalize(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _normalize(v) for k, v in value.items() if k not in MARKER_KEYS}
    if isinstance(value, list):
        items = [_normalize(item) for item in value]
        only = items[0] if len(items) == 1 else None
        if isinstance(only, dict) and set(only) == {"type", "text"} and only["type"] == "text":
            text = only["text"]
            if isinstance(text, str):
                return text
        return items
    if isinstance(value, str):
        return _mask(value)
    return value


def normalize_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as ``telos_body`` compares it (see the module docstring)."""
    out: dict[str, Any] = _normalize(body)
    for key in _TOP_LEVEL:
        out.pop(key, None)
    cache_key = out.get("prompt_cache_key")
    if isinstance(cache_key, str) and cache_key.startswith(_TELOS_KEY_PREFIX):
        del out["prompt_cache_key"]
    stream_options = out.get("stream_options")
    if isinstance(stream_options, dict):
        stream_options.pop("include_usage", None)
        if not stream_options:
            del out["stream_options"]
    return out


def _json(body: Any) -> Any:
    if isinstance(body, bytes):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(body, str) or not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def _first_difference(a: Any, b: Any, path: str) -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a:
                return f"{path}.{key} only in the second body"
            if key not in b:
                return f"{path}.{key} only in the first body"
            if canonical_json(a[key]) != canonical_json(b[key]):
                return _first_difference(a[key], b[key], f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list):
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            if canonical_json(x) != canonical_json(y):
                return _first_difference(x, y, f"{path}[{index}]")
        if len(a) != len(b):
            return f"{path} has {len(a)} items in the first body, {len(b)} in the second"
    shown = [canonical_json(v) for v in (a, b)]
    shown = [s if len(s) <= 120 else s[:119] + "…" for s in shown]
    return f"{path}: {shown[0]} != {shown[1]}"


def telos_body(r1: Any, r2: Any) -> None:
    """vcrpy matcher: raise ``AssertionError`` (naming the first difference) unless the bodies match."""
    a, b = _json(r1.body), _json(r2.body)
    if not isinstance(a, dict) or not isinstance(b, dict):
        assert r1.body == r2.body, "bodies differ (compared as bytes: not both JSON objects)"
        return
    left, right = normalize_body(a), normalize_body(b)
    if canonical_json(left) != canonical_json(right):
        raise AssertionError("telos_body: " + _first_difference(left, right, "body"))


def register(vcr: Any) -> Any:
    """``vcr.register_matcher("telos_body", telos_body)``; returns ``vcr``."""
    vcr.register_matcher(NAME, telos_body)
    return vcr
