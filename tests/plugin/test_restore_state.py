"""The fixture's patch bookkeeping as a state machine: whatever the application does to ``patch()``
before, inside and between (nested) ``TelosCache`` blocks, leaving a block puts back exactly the
state it found, and inside a block telos is patched, enabled and in the block's session."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import telos_wrap
from telos_wrap.config import PatchConfig, current_config
from telos_wrap.testing.pytest_plugin import TelosCache


class PatchStateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        telos_wrap.unpatch()
        self.stack: list[tuple[TelosCache, bool, PatchConfig]] = []
        self.count = 0

    @rule(strict=st.booleans(), enabled=st.booleans(), threshold=st.sampled_from([None, 2048]))
    def application_patches(self, strict: bool, enabled: bool, threshold: Any) -> None:
        telos_wrap.patch(strict=strict, enabled=enabled, refpool_threshold=threshold)

    @rule()
    def application_unpatches(self) -> None:
        telos_wrap.unpatch()

    @rule(learn=st.booleans())
    def enter(self, learn: bool) -> None:
        self.count += 1
        cache = TelosCache(f"sm-{self.count}", learn_volatility=learn)
        found = (telos_wrap.is_patched(), current_config())
        cache.__enter__()
        self.stack.append((cache, *found))
        assert telos_wrap.is_patched() and current_config().enabled
        assert telos_wrap.current_session() is cache.session

    @precondition(lambda self: bool(self.stack))
    @rule()
    def exit(self) -> None:
        cache, was_patched, config = self.stack.pop()
        cache.__exit__(None, None, None)
        assert telos_wrap.is_patched() == was_patched
        assert current_config() == config
        outer = self.stack[-1][0].session if self.stack else None
        assert telos_wrap.current_session() is outer

    @invariant()
    def innermost_session_is_active(self) -> None:
        if self.stack:
            assert telos_wrap.current_session() is self.stack[-1][0].session

    def teardown(self) -> None:
        while self.stack:  # no assertion here: a failed step must not leak state into the next example
            self.stack.pop()[0].__exit__(None, None, None)
        telos_wrap.unpatch()


PatchStateMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=15, deadline=None)
TestPatchState = PatchStateMachine.TestCase
