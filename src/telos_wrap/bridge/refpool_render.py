"""Bridge pass: render the ref-pool into the system segment, between its PIN and DROP blocks.

The system segment becomes ``pin*`` (system text and ``[ref:slug]`` stubs) → ``fold*`` (pool entries,
lexicographic slug order, each starting with its own ``[ref:slug]`` line) → ``drop*``. Rendering the
entries into the same request is what keeps a stub honest: the document it points at is always sent
(the reference implementation sent stubs without the documents).

A stub is rendered only where a fold of its text was declared (``session.fold(slugs=...)``: the entry
is marked ``folded``). Every other stub the lift made for long system text is replaced by its entry's
content alone (``refpool.in_place``): the caller's text, where the caller put it, in the caller's
order, with nothing the caller did not write. This departs from the seeds' banding table (large
documents in the ref-pool, a stub in their place): an instruction written after a document ("answer
using only the document above") must still come after it, and the model reads what the caller wrote.
The price is paid only by a declared fold, once, when it happens: the stub then takes the document's
place and the prefix from there is written again (docs/sessions.md, "Folding").

A stub that would be followed at once by its own entry (it is the last PIN block, nothing else is
FOLD, its entry comes first in slug order) is not sent either, folded or not: the entry goes in its
place as its content alone, which a stub right before its entry would only cost tokens for.
"""

from __future__ import annotations

from dataclasses import replace

from telos_wrap.ir.model import Band, TelosIR, Transformation
from telos_wrap.ir.refpool import IN_PLACE, RefPool, in_place

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
    undeclared = {
        block.ref_slug
        for block in pins
        if block.ref_slug is not None
        and block.ref_slug in pool
        and not pool.get(block.ref_slug).extra.get("folded")  # type: ignore[union-attr]
    }
    if undeclared:  # no fold declared: the caller's text in its own place (see the module docstring)
        by_slug = {entry.ref_slug: entry for entry in entries}
        pins = tuple(
            replace(in_place(by_slug[block.ref_slug], block.extra), band=Band.PIN)
            if block.ref_slug in undeclared
            else block
            for block in pins
        )
        entries = tuple(entry for entry in entries if entry.ref_slug not in undeclared)
    system = pins + folds + entries + drops
    pool.lint_blocks(system)
    records = list(ir.records)
    for block in pins:
        if block.ref_slug is not None and not block.extra.get(IN_PLACE):
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
