"""Layer 2 — the bridge: engine-agnostic policy, IR → IR.

A policy is an ordered sequence of named, pure passes (``passes``); ``pipeline.prepare`` runs them in
order, each as a stage of its own, and the last re-checks the invariants, so no pass (or fold) can
hand an engine a prompt that breaks I1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from telos_wrap.bridge.canonicalize import canonicalize
from telos_wrap.bridge.refpool_render import render_ref_pool
from telos_wrap.bridge.relocate import relocate_drop
from telos_wrap.ir.model import TelosIR
from telos_wrap.ir.order import assert_ir_invariants

__all__ = [
    "BridgeOptions",
    "Pass",
    "canonicalize",
    "passes",
    "relocate_drop",
    "render_ref_pool",
]

Pass = Callable[[TelosIR], TelosIR]


@dataclass(frozen=True, slots=True)
class BridgeOptions:
    """Switches for the default policy.

    Attributes:
        keep_past_drop: keep envelopes of past turns (as FOLD history) instead of pruning them.
    """

    keep_past_drop: bool = False
    #: The route hoists every system message into the system prompt (Chat Completions to Claude via a
    #: router, ``engines.chat_breakpoints``): a volatile envelope joins the latest turn as its last
    #: part, never a trailing system message.
    envelope_in_turn: bool = False


def passes(options: BridgeOptions | None = None) -> Iterator[tuple[str, Pass]]:
    """The default policy's passes, in order, as ``(stage name, pass)``."""
    options = options or BridgeOptions()
    yield "bridge.canonicalize", canonicalize
    yield (
        "bridge.relocate",
        partial(
            relocate_drop, keep_past_drop=options.keep_past_drop, envelope_in_turn=options.envelope_in_turn
        ),
    )
    yield "bridge.refpool", render_ref_pool
    yield "bridge.invariants", _checked


def _checked(ir: TelosIR) -> TelosIR:
    assert_ir_invariants(ir)
    return ir
