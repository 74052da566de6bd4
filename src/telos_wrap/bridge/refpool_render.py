"""Bridge pass: render the ref-pool into the system segment, between its PIN and DROP blocks.

The system segment becomes ``pin*`` (system text and ``[ref:slug]`` stubs) → ``fold*`` (every pool
entry, lexicographic slug order, each starting with its own ``[ref:slug]`` line) → ``drop*``.
Rendering the entries into the same request is what keeps a stub honest: the document it points at
is always sent (the reference implementation sent stubs without the documents).

A stub that would be followed at once by its own entry (it is the last PIN block, nothing else is
FOLD, its entry comes first in slug order) is not sent: the entry goes in its place as its content
alone (``refpool.in_place``), which is the text the caller sent. The stub buys something only when
PIN text follows it (a fold then keeps that text cached); right before its entry it only costs
tokens.
"""

from __future__ import annotations

from dataclasses import replace

from telos_wrap.ir.model import Band, TelosIR, Transformation
from telos_wrap.ir.refpool import RefPool, in_place

__all__ = ["render_ref_pool"]


def render_ref_pool(ir: TelosIR) -> TelosIR:
    """Place the pool's entries into ``ir.system`` and lint every reference telos produced."""
    if not ir.ref_pool:
        return ir
    pool = RefPool(ir.ref_pool.values())
    pins = tuple(block for block in ir.system if block.band is Band.PIN)
    folds = tuple(block for block in ir.system if block.band is Band.FOLD and block.ref_slug is None)
    drops = tuple(block for block in ir.system if block.band is Band.DROP)
    entries = pool.render_blocks()
    last = pins[-1] if pins else None
    if last is not None and last.ref_slug is not None and not folds and entries[0].ref_slug == last.ref_slug:
        pins, entries = pins[:-1], (in_place(entries[0], last.extra), *entries[1:])
    system = pins + folds + entries + drops
    pool.lint_blocks(system)
    records = list(ir.records)
    for block in pins:
        if block.ref_slug is not None:
            records.append(
                Transformation(
                    kind="ref-stub",
                    where=block.id,
                    chars=int(block.extra.get("stub_for_chars", 0)),
                    detail=f"large system text replaced in place by [ref:{block.ref_slug}]; its full text is "
                    "sent in the same request, after the PIN system blocks, so it can be folded later "
                    "without moving any PIN byte",
                )
            )
    return replace(ir, system=system, records=tuple(records))
