"""The emulator's model-window table is a deliberate copy of the core's (the emulator never imports
what it is used to test: pyproject.toml's import-linter contract). The two must not drift: a window
the core plans with and the one the emulated server enforces are the same vendor fact
(docs/vendor-facts.md §9.1)."""

from __future__ import annotations

from telos_wrap.emulator import windows as emulated
from telos_wrap.ir import windows as core


def test_the_emulator_and_the_core_know_the_same_windows() -> None:
    assert dict(emulated.WINDOWS) == dict(core.CONTEXT_WINDOWS)
    assert len(emulated.WINDOWS) == len(core.CONTEXT_WINDOWS)  # no prefix listed twice in one of them


def test_both_look_a_model_up_alike() -> None:
    models = {prefix for prefix, _ in core.CONTEXT_WINDOWS}
    models |= {f"{prefix}-20260101" for prefix in models} | {"unknown-model", "", "claude", "gpt"}
    for model in sorted(models):
        assert emulated.window_of(model) == core.context_window(model), model
