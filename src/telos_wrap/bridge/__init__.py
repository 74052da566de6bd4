"""Layer 2 — the bridge: engine-agnostic policy, IR → IR.

A policy is an ordered sequence of named, pure passes (``passes``); ``pipeline.prepare`` runs them in
order, each as a stage of its own, and the last re-checks the invariants, so no pass (or fold) can
hand an engine a prompt that breaks I1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from telos_wrap.bridge.canonicalize import canonicalize
from telos_wrap.bridge.output_filter import filter_outputs
from telos_wrap.bridge.refpool_render import render_ref_pool
from telos_wrap.bridge.relocate import relocate_drop
from telos_wrap.ir.model import TelosIR
from telos_wrap.ir.order import assert_ir_invariants

__all__ = [
    "BridgeOptions",
    "Pass",
    "canonicalize",
    "filter_outputs",
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
    #: The output filter for tool results: ``None``/``"off"``, ``"safe"``, ``"aggressive"`` or a
    #: ``filters.OutputFilter`` (docs/output-filter.md).
    output_filter: Any = None


_NOTHING: Mapping[str, str] = {}


def passes(
    options: BridgeOptions | None = None, filtered: Mapping[str, str] = _NOTHING
) -> Iterator[tuple[str, Pass]]:
    """The default policy's passes, in order, as ``(stage name, pass)``. ``filtered``: the
    session's record of the tool results it filtered (result digest → filter id)."""
    options = options or BridgeOptions()
    yield "bridge.canonicalize", canonicalize
    if (options.output_filter is not None and options.output_filter != "off") or filtered:
        yield "bridge.output_filter", partial(filter_outputs, spec=options.output_filter, recorded=filtered)
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
