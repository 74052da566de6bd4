"""Anthropic cache diagnostics: ``diagnostics.previous_message_id`` -> ``cache_miss_reason``.

SDK ``types/diagnostics.py`` and ``cache_miss_*.py`` (docs/vendor-facts.md §1.2): the server compares the
fingerprint of the request named by ``previous_message_id`` with this one, structurally and
independently of whether the cache hit.  Reasons: ``model_changed`` (model or ``speed``),
``tools_changed``, ``system_changed``, ``messages_changed`` (an earlier entry differs, not only
appended), each with ``cache_missed_input_tokens``; ``previous_message_not_found``; and
``unavailable`` when model/system/tools/messages match but e.g. ``thinking`` or
``tool_choice`` differ.  ``diagnostics`` is null when no divergence was found.

``cache_missed_input_tokens`` is approximate in the API; here it is the shorter prompt's
total minus the shared prefix (for ``model_changed``: the shared prefix itself).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .anthropic_rules import normalize_model
from .render import RenderedPrompt, dumps

_SECTION_ORDER = {"tools": 0, "system": 1, "messages": 2}
_REASON = {"tools": "tools_changed", "system": "system_changed", "messages": "messages_changed"}
_MAX_FINGERPRINTS = 10_000  # fingerprints are "retained for a limited time" (§1.2); here: a bounded LRU


@dataclass(frozen=True)
class Fingerprint:
    """What the server remembers about one request."""

    model: str
    speed: str
    params: bytes  # other prompt-affecting parameters (thinking, tool_choice)
    sections: tuple[str, ...]
    hashes: tuple[bytes, ...]
    cum_tokens: tuple[int, ...]

    @property
    def total(self) -> int:
        return self.cum_tokens[-1] if self.cum_tokens else 0


def fingerprint(body: Mapping[str, Any], prompt: RenderedPrompt) -> Fingerprint:
    """Fingerprint of one request."""
    return Fingerprint(
        model=normalize_model(str(body.get("model", ""))),
        speed=str(body.get("speed") or "standard"),
        params=dumps([body.get("thinking"), body.get("tool_choice")]),
        sections=tuple(p.section for p in prompt.positions),
        hashes=tuple(p.hash for p in prompt.positions),
        cum_tokens=tuple(p.cum_tokens for p in prompt.positions),
    )


def diagnose(previous: Fingerprint | None, current: Fingerprint) -> dict[str, Any] | None:
    """The response's ``diagnostics`` object (None = no divergence)."""
    if previous is None:
        return {"cache_miss_reason": {"type": "previous_message_not_found"}}
    shared = 0
    limit = min(len(previous.hashes), len(current.hashes))
    while shared < limit and previous.hashes[shared] == current.hashes[shared]:
        shared += 1
    shared_tokens = current.cum_tokens[shared - 1] if shared else 0
    if (previous.model, previous.speed) != (current.model, current.speed):
        return _reason("model_changed", shared_tokens)
    if shared < len(previous.hashes):
        candidates = [previous.sections[shared]]
        if shared < len(current.sections):
            candidates.append(current.sections[shared])
        section = min(candidates, key=_SECTION_ORDER.__getitem__)
        return _reason(_REASON[section], max(0, min(previous.total, current.total) - shared_tokens))
    if previous.params != current.params:
        return {"cache_miss_reason": {"type": "unavailable"}}
    return None


def _reason(kind: str, missed: int) -> dict[str, Any]:
    return {"cache_miss_reason": {"type": kind, "cache_missed_input_tokens": missed}}


class FingerprintStore:
    """Fingerprints by message id (thread-safe, bounded)."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, Fingerprint] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, message_id: str, fp: Fingerprint) -> None:
        with self._lock:
            self._items[message_id] = fp
            while len(self._items) > _MAX_FINGERPRINTS:
                self._items.popitem(last=False)

    def get(self, message_id: str) -> Fingerprint | None:
        with self._lock:
            return self._items.get(message_id)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
