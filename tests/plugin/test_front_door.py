"""``telos_wrap.testing`` is the one place of the testing feature: its front door gives the modules' objects.

The package's names load on first use (``telos_wrap/testing/__init__.py``); each is the very object
of the module that defines it. The feature has no second path: the top-level modules it lived in
before ``telos_wrap.testing`` existed are gone (0.1.0 was never published, so nothing depends on
them; CONTRIBUTING.md says when compatibility layers start).
"""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.mark.parametrize("name", ["Budget", "replay_cassette", "telos_body", "style_names", "RequestCapture"])
def test_the_package_front_door_gives_the_modules_objects(name: str) -> None:
    import telos_wrap.testing as testing

    assert name in testing.__all__ and name in dir(testing)
    value = getattr(testing, name)
    assert value is getattr(sys.modules[value.__module__], name)
    assert value.__module__.startswith("telos_wrap.testing.")


def test_an_unknown_name_is_an_attribute_error() -> None:
    import telos_wrap.testing as testing

    with pytest.raises(AttributeError, match="no attribute 'replay_cassete'"):
        testing.replay_cassete  # noqa: B018


@pytest.mark.parametrize("old", ["cache_budget", "cassettes", "harnesses", "pytest_plugin", "vcr_matcher"])
def test_the_feature_has_one_path(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"telos_wrap.{old}")
    importlib.import_module(f"telos_wrap.testing.{old.replace('cache_', '')}")
