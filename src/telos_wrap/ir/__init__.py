"""Layer 0 — the TELOS vocabulary: pure values, no SDK imports."""

from telos_wrap.ir.canon import (
    canonical_bytes,
    canonical_json,
    canonicalize_payload,
    canonicalize_schema,
    canonicalize_tool_def,
    tool_sort_key,
)
from telos_wrap.ir.hints import TelosHints, parse_hints
from telos_wrap.ir.model import (
    Api,
    Band,
    BlockKind,
    FilteredOutput,
    TelosBlock,
    TelosIR,
    TelosMessage,
    Transformation,
    UsageReport,
)
from telos_wrap.ir.order import assert_band_order, assert_ir_invariants, enforce_band_order
from telos_wrap.ir.refpool import RefPool

__all__ = [
    "Api",
    "Band",
    "BlockKind",
    "FilteredOutput",
    "RefPool",
    "TelosBlock",
    "TelosHints",
    "TelosIR",
    "TelosMessage",
    "Transformation",
    "UsageReport",
    "assert_band_order",
    "assert_ir_invariants",
    "canonical_bytes",
    "canonical_json",
    "canonicalize_payload",
    "canonicalize_schema",
    "canonicalize_tool_def",
    "enforce_band_order",
    "parse_hints",
    "tool_sort_key",
]
