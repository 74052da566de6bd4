"""The SDKs' methods put back as they were: for tests that let another library wrap them.

OpenLLMetry's ``OpenAIInstrumentor.uninstrument()`` leaves ``Completions.create`` wrapped (its wrapper
keeps recording spans); the rest of the suite must not run under it. ``sdk_methods_restored()``
snapshots every class of the SDKs' ``resources`` and ``lib`` modules and, on exit, sets back each
attribute that differs, whatever was left behind.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


def _sdk_classes() -> list[type]:
    prefixes = ("anthropic.resources", "anthropic.lib", "openai.resources", "openai.lib")
    classes: list[type] = []
    for name, module in list(sys.modules.items()):
        if module is not None and name.startswith(prefixes):
            classes.extend(v for v in vars(module).values() if isinstance(v, type) and v.__module__ == name)
    return classes


@contextmanager
def sdk_methods_restored() -> Iterator[None]:
    """Every SDK class attribute as it is on entry, set back on exit."""
    import anthropic.resources.beta.messages.messages  # noqa: F401  (imported before the snapshot)
    import openai.resources.chat.completions.completions  # noqa: F401

    snapshot = {cls: dict(vars(cls)) for cls in _sdk_classes()}
    try:
        yield
    finally:
        for cls, attributes in snapshot.items():
            for name, value in attributes.items():
                if vars(cls).get(name) is not value:
                    setattr(cls, name, value)
