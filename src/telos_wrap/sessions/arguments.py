"""``session(...)``'s own arguments, checked before a ``Session`` exists: a clear error at the line
that is wrong (what was given, what is valid), never a bare ``TypeError`` later or a silent
acceptance of a value that cannot name anything."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, get_args

from telos_wrap.errors import TelosHintError
from telos_wrap.ir.hints import ENGINE_NAMES, TelosHints

__all__ = ["check_session_arguments"]

#: The ``ttl`` values ``TelosHints`` accepts (its ``Literal[...] | None``).
_TTLS: tuple[str, ...] = tuple(
    value
    for arg in get_args(TelosHints.model_fields["ttl"].annotation)
    for value in get_args(arg)
    if isinstance(value, str)
)


def _suggest(given: str, valid: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(given, valid, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _choice(name: str, value: Any, valid: tuple[str, ...]) -> None:
    if value is None:
        return
    if not isinstance(value, str) or value not in valid:
        hint = _suggest(value, valid) if isinstance(value, str) else ""
        raise TelosHintError(f"session({name}={value!r}){hint}: valid values are {', '.join(valid)}")


def check_session_arguments(
    session_id: Any,
    *,
    engine: Any,
    ttl: Any,
    strict: Any,
    learn_volatility: Any,
    diagnostics: Any,
    on_cache_break: Any,
    clock: Any,
    prices: Any,
    fleet_learning: Any = None,
) -> None:
    """Raise ``TelosHintError`` for the first argument of ``session(...)`` that cannot be right."""
    if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()):
        what = (
            "an empty string"
            if isinstance(session_id, str)
            else f"{type(session_id).__name__} {session_id!r}"
        )
        raise TelosHintError(
            f"session(session_id) must be a non-empty string naming the conversation (or None for a new "
            f'id), not {what}; e.g. telos_wrap.session("ticket-42"), or session(hints={{...}}) for options'
        )
    _choice("engine", engine, ENGINE_NAMES)
    _choice("ttl", ttl, _TTLS)
    if strict is not None and not isinstance(strict, bool):
        raise TelosHintError(f"session(strict={strict!r}) must be True, False or None (patch()'s setting)")
    for name, value in (("learn_volatility", learn_volatility), ("diagnostics", diagnostics)):
        if not isinstance(value, bool):
            raise TelosHintError(f"session({name}={value!r}) must be True or False")
    if fleet_learning is not None and not isinstance(fleet_learning, bool):
        raise TelosHintError(
            f"session(fleet_learning={fleet_learning!r}) must be True, False or None (patch()'s setting)"
        )
    for name, value in (("on_cache_break", on_cache_break), ("clock", clock)):
        if value is not None and not callable(value):
            raise TelosHintError(f"session({name}={value!r}) must be a callable (or None)")
    _check_prices(prices)


def _check_prices(prices: Any) -> None:
    """``prices``: ``{engine name: PriceMultipliers(...)}``, checked entry by entry (a bare number
    would only fail later, when ``stats`` is read)."""
    if prices is None:
        return
    from telos_wrap.sessions.views.stats import PriceMultipliers

    valid = (
        f"valid: a dict {{engine: PriceMultipliers(read=..., write=..., write_long=...)}} over engines "
        f"{', '.join(ENGINE_NAMES)}, e.g. prices={{'anthropic': PriceMultipliers(read=0.025, write=1.25, "
        "write_long=2.0)}"
    )
    if not isinstance(prices, Mapping):
        raise TelosHintError(f"session(prices={prices!r}) is not a dict; {valid}")
    for engine, value in prices.items():
        if not isinstance(engine, str):
            raise TelosHintError(
                f"session(prices=...) has a key {engine!r} that is not an engine name; {valid}"
            )
        if not isinstance(value, PriceMultipliers):
            raise TelosHintError(
                f"session(prices=...)[{engine!r}] is a {type(value).__name__}, "
                f"not a PriceMultipliers; {valid}"
            )
