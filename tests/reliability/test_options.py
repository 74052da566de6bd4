"""Every option and hint is checked at the door, by one rule: a value of the wrong type or outside
what is valid raises at once (``TelosHintError`` for hints and ``session()`` arguments,
``TelosOptionError`` for ``patch()`` options and store URLs), never coerced, and the message says what
is valid. The same hint value is judged alike as ``telos_hint=``, ``session(hints=)`` and
``TelosHints(...)`` through ``parse_hints``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

import telos_wrap
from telos_wrap import ContextPolicy, TelosHintError, TelosOptionError
from telos_wrap.ir.hints import VALID_VALUES, TelosHints, parse_hints
from telos_wrap.sessions import MemoryStore, PriceMultipliers, RedisStore, store_from_url
from telos_wrap.sessions.stores.breaker import breaker_of

from .harness import Wire, client_for, kwargs_for

#: key → (good values, bad values). Bad values include the near misses a lenient parser would coerce.
HINT_TABLE: dict[str, tuple[list[Any], list[Any]]] = {
    "session": (["ticket-42"], [5, ["a"], True]),
    "engine": (["anthropic", "openai", "vllm"], ["gpt", 1, "Anthropic"]),
    "disable": ([True, False], ["yes", "no", 1, 0, "true", None]),
    "ttl": (["5m", "1h", "30m", "12h"], ["2h", 300, "5"]),
    "drop_patterns": ([["^Build: .*$"], ("x",), []], ["^Build", ["(unclosed"], [5]]),
    "drop_scope": (["system", "all"], ["everything", True, None]),
    "isolation": (["tenant-1"], [5, ["t"]]),
    "expected_turns": ([1, 3, None], ["3", 3.0, 0, True, "three"]),
    "output_filter": (["off", "safe", "aggressive", None], ["fast", "Safe", 1, True]),
    "context": ([None, ContextPolicy(trigger_tokens=50_000)], ["yes", 5, {"trigger": "soon"}]),
}


def test_the_table_covers_every_hint_key() -> None:
    assert set(HINT_TABLE) == set(TelosHints.model_fields) == set(VALID_VALUES)


def test_the_readme_lists_every_hint_key() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    listed = re.search(r"`telos_hint` keys: (.*?)\. ", readme, re.S)
    assert listed is not None
    assert set(re.findall(r"`(\w+)`", listed.group(1))) == set(TelosHints.model_fields)


@pytest.mark.parametrize(
    ("key", "value"), [(key, value) for key, (good, _) in HINT_TABLE.items() for value in good]
)
def test_a_good_hint_value_is_taken_as_given(key: str, value: Any) -> None:
    for parsed in (parse_hints({key: value}), telos_wrap.session(hints={key: value}).hints):
        got = getattr(parsed, key)
        assert got == (tuple(value) if isinstance(value, list) else value)


@pytest.mark.parametrize(
    ("key", "value"), [(key, value) for key, (_, bad) in HINT_TABLE.items() for value in bad]
)
def test_a_bad_hint_value_is_refused_everywhere_saying_what_is_valid(key: str, value: Any) -> None:
    for attempt in (
        lambda: parse_hints({key: value}),
        lambda: telos_wrap.session(hints={key: value}),
    ):
        with pytest.raises(TelosHintError) as info:
            attempt()
        message = str(info.value)
        assert key in message
        assert f"valid: {VALID_VALUES[key]}" in message or key == "drop_patterns", message
    # And as a call's telos_hint, before any I/O.
    wire = Wire()
    telos_wrap.patch()
    with pytest.raises(TelosHintError):
        client_for("anthropic", wire).messages.create(**kwargs_for("anthropic"), telos_hint={key: value})
    assert wire.sent == []


#: session() arguments: (name, bad value, a word the error must contain).
SESSION_BAD: list[tuple[str, Any, str]] = [
    ("learn_volatility", "no", "True or False"),
    ("diagnostics", 1, "True or False"),
    ("strict", "yes", "True, False or None"),
    ("fleet_learning", 0, "True, False or None"),
    ("engine", "gpt", "valid values"),
    ("ttl", "2h", "valid values"),
    ("on_cache_break", "print", "callable"),
    ("clock", 5, "callable"),
    ("prices", {"anthropic": 0.1}, "PriceMultipliers(read="),
    ("prices", 0.1, "PriceMultipliers(read="),
    ("prices", {1: PriceMultipliers()}, "engine"),
    ("store", 5, "store URL"),
    ("store", object(), "RedisStore(url"),
]


@pytest.mark.parametrize(
    ("name", "value", "says"),
    SESSION_BAD,
    ids=[f"{n}-{v!r}" if type(v) is not object else f"{n}-object()" for n, v, _ in SESSION_BAD],
)
def test_a_bad_session_argument_is_refused_at_once(name: str, value: Any, says: str) -> None:
    with pytest.raises(TelosHintError) as info:
        telos_wrap.session(**{name: value})
    assert name in str(info.value) and says in str(info.value), str(info.value)


def test_good_prices_are_taken() -> None:
    s = telos_wrap.session(prices={"anthropic": PriceMultipliers(read=0.025, write=1.25, write_long=2.0)})
    assert s.stats.prices["anthropic"].read == 0.025


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("strict", "yes"),
        ("enabled", 1),
        ("refpool_threshold", "2048"),
        ("time_budget", "2"),
        ("engines", ["vllm"]),
    ],
)
def test_a_bad_patch_option_is_refused_before_anything_is_patched(name: str, value: Any) -> None:
    with pytest.raises(TelosOptionError) as info:
        telos_wrap.patch(**{name: value})
    assert name in str(info.value)


# -- a store named by a URL --------------------------------------------------------------------------


def test_a_store_url_is_a_store_one_per_url() -> None:
    s = telos_wrap.session(store="redis://127.0.0.1:1/0")
    assert isinstance(s.store, RedisStore) and s.store.url == "redis://127.0.0.1:1/0"
    assert telos_wrap.session(store="redis://127.0.0.1:1/0").store is s.store, (
        "one store (pool, breaker) per URL"
    )
    assert store_from_url("redis://127.0.0.1:1/0") is s.store
    assert telos_wrap.session(store="memory://").store is telos_wrap.sessions.default_store()


def test_a_bad_store_url_is_refused_saying_what_is_valid() -> None:
    with pytest.raises(TelosOptionError) as info:
        telos_wrap.session(store="postgres://user:pw@db/0")
    message = str(info.value)
    assert "redis://" in message and "memory://" in message
    assert "pw" not in message, "the password is not repeated"


def test_an_unreachable_store_url_warns_once_per_window(caplog: pytest.LogCaptureFixture) -> None:
    """The issue's case: the URL of a Redis that is not there. Calls go on (the session is this
    process' only), and the breaker's "one warning per window" holds: 7 calls, 1 warning."""
    telos_wrap.patch()
    wire = Wire()
    client = client_for("anthropic", wire)
    url = "redis://127.0.0.1:1/0"
    with (
        caplog.at_level(logging.WARNING, logger="telos_wrap"),
        telos_wrap.session("url-store", store=url) as s,
    ):
        for _ in range(7):
            client.messages.create(**kwargs_for("anthropic"))
    warnings = [r.getMessage() for r in caplog.records if "session.store" in r.getMessage()]
    assert len(wire.sent) == 7
    assert len(warnings) == 1, warnings
    assert "AttributeError" not in warnings[0]
    assert s.stats.requests == 7


def test_a_store_that_takes_no_attribute_keeps_one_breaker() -> None:
    """A store class with ``__slots__`` cannot carry its breaker: it still gets one, not one per call
    (each fresh breaker would warn as if a window had just opened)."""

    class Slotted(MemoryStore):
        __slots__ = ()

    class Bare:
        __slots__ = ("x",)

    for store in (Slotted(), Bare()):
        assert breaker_of(store) is breaker_of(store)
