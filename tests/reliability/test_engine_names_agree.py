"""The ``engine`` hint, ``session(engine=)`` and ``patch(engines=...)`` accept the same built-in names."""

from __future__ import annotations

import pytest

import telos_wrap
from telos_wrap.config import PatchConfig, updated
from telos_wrap.engines.registry import _BUILTINS
from telos_wrap.errors import TelosHintError
from telos_wrap.ir.hints import ENGINE_NAMES, parse_hints


def test_the_hint_names_every_built_in_engine() -> None:
    assert sorted(ENGINE_NAMES) == sorted(_BUILTINS)


@pytest.mark.parametrize("name", sorted(_BUILTINS))
def test_each_built_in_engine_is_accepted_everywhere(name: str) -> None:
    assert parse_hints({"engine": name}).engine == name
    with telos_wrap.session(engine=name) as session:
        assert session.hints.engine == name
    if name != "anthropic":  # engines= names OpenAI-compatible servers
        assert updated(PatchConfig(), {"engines": {"http://gpu:8000/v1": name}}).engines


def test_an_unknown_engine_is_refused_by_the_hint() -> None:
    with pytest.raises(TelosHintError, match="engine"):
        parse_hints({"engine": "mistral"})
