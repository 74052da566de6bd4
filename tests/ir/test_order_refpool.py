"""Band order (I1) checks and the ref-pool contract."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telos_wrap.errors import RefPoolError, TelosInvariantError
from telos_wrap.ir.model import Band, BlockKind, TelosBlock, TelosIR, TelosMessage
from telos_wrap.ir.order import assert_band_order, assert_ir_invariants, enforce_band_order
from telos_wrap.ir.refpool import RefPool, make_entry


def block(i: int, band: Band) -> TelosBlock:
    return TelosBlock(id=f"b{i}", band=band, kind=BlockKind.TEXT, payload={"type": "text", "text": str(i)})


@given(st.lists(st.sampled_from(list(Band)), max_size=30))
def test_enforce_band_order_passes_assert_and_is_stable(bands: list[Band]) -> None:
    blocks = [block(i, band) for i, band in enumerate(bands)]
    ordered = enforce_band_order(blocks)
    assert_band_order(ordered, "messages[0]")
    for band in Band:
        assert [b.id for b in ordered if b.band is band] == [b.id for b in blocks if b.band is band]


def test_assert_band_order_names_segment_index_and_bands() -> None:
    blocks = [block(0, Band.PIN), block(1, Band.DROP), block(2, Band.FOLD)]
    with pytest.raises(TelosInvariantError) as info:
        assert_band_order(blocks, "system")
    message = str(info.value)
    assert "system" in message and "index 2" in message and "FOLD" in message and "DROP" in message
    assert info.value.segment == "system" and info.value.index == 2


def test_ir_invariants_require_pin_tools_and_drop_tail() -> None:
    fold_tool = TelosBlock(id="tools[0]", band=Band.FOLD, kind=BlockKind.TOOL_DEF, payload={"name": "t"})
    with pytest.raises(TelosInvariantError, match="must be PIN"):
        assert_ir_invariants(TelosIR(session_id="s", api="anthropic", tools=(fold_tool,)))
    early_drop = TelosIR(
        session_id="s",
        api="anthropic",
        messages=(
            TelosMessage(role="user", blocks=(block(0, Band.PIN), block(1, Band.DROP))),
            TelosMessage(role="assistant", blocks=(block(2, Band.FOLD),)),
            TelosMessage(role="user", blocks=(block(3, Band.PIN),)),
        ),
    )
    with pytest.raises(TelosInvariantError, match="DROP must be the prompt's tail"):
        assert_ir_invariants(early_drop)
    # An assistant prefill after the latest user turn may follow its DROP.
    prefill = TelosIR(
        session_id="s",
        api="anthropic",
        messages=(
            TelosMessage(role="user", blocks=(block(0, Band.PIN), block(1, Band.DROP))),
            TelosMessage(role="assistant", blocks=(block(2, Band.FOLD),)),
        ),
    )
    assert_ir_invariants(prefill)


def test_refpool_freezes_slugs_and_folds_payload_only() -> None:
    pool = RefPool()
    pool.register(make_entry("system-doc-0", "long text", source="test"))
    with pytest.raises(RefPoolError, match="already registered"):
        pool.register(make_entry("system-doc-0", "other", source="test"))
    assert pool.register_or_skip(make_entry("system-doc-0", "other", source="test")) is False
    folded = pool.fold("system-doc-0", "summary")
    assert folded.ref_slug == "system-doc-0"
    assert folded.payload["text"] == "[ref:system-doc-0]\nsummary"
    assert pool.register_or_skip(make_entry("system-doc-0", "long text", source="test")) is False
    assert pool.get("system-doc-0") is folded


def test_refpool_rejects_bad_slugs_and_bands() -> None:
    pool = RefPool()
    with pytest.raises(RefPoolError, match="invalid ref-pool slug"):
        pool.register(make_entry("bad slug!", "x", source="t"))
    pin = TelosBlock(id="x", band=Band.PIN, kind=BlockKind.TEXT, payload={}, ref_slug="ok")
    with pytest.raises(RefPoolError, match="must be band FOLD"):
        pool.register(pin)


def test_refpool_renders_in_slug_order_and_lints() -> None:
    pool = RefPool([make_entry("b", "B", source="t"), make_entry("a", "A", source="t")])
    assert [entry.ref_slug for entry in pool.render_blocks()] == ["a", "b"]
    pool.lint_text("see [ref:a] and [ref:b]")
    with pytest.raises(RefPoolError, match=r"\[ref:c\]"):
        pool.lint_text("see [ref:c]")
