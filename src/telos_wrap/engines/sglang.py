"""The SGLang engine (bidirectional, seeds: "a strict superset of vLLM"): canonical bytes, isolation by
``cache_salt`` + ``extra_key``, and the seeds' ``cache_control`` / ``tier_hint`` / ``fork_and_replace``.

Name the server in ``patch(engines={base_url: "sglang"})``, the session or ``telos_hint`` (self-hosted
servers are never guessed). Fields are written at the top level of the body (``extra_body`` style).

What a **stock SGLang** (0.5.23, docs/vendor-facts.md §5.2) does with each field telos may send:

* ``cache_salt`` and ``extra_key`` — **acted on**: both namespace the radix tree, so requests with
  different values never share cached KV. Sent only when ``hints.isolation`` is set and the caller sent
  none, each as ``"telos-" + sha256(field NUL isolation)`` (never the raw id; valid for vLLM too).
* ``stream_options.include_usage`` — **acted on**: the usage chunk of a stream.
* ``cache_control`` (a top-level object: ``affinity_key``, ``lock_radix_path``, ``path_hash``,
  ``prefer_tier``; ``fork_from_path``, ``replace_suffix`` from ``cooperative_fold``), ``tier_hint`` and
  ``fork_and_replace`` — **ignored**: not in SGLang's request models, whose pydantic default drops
  unknown fields silently. They are for servers extended to act on them (seeds):

  - ``affinity_key``: ``"telos-" + sha256(prefix family)[:16]`` (the OpenAI ``prompt_cache_key``), for
    cache-aware routing across data-parallel replicas;
  - ``lock_radix_path`` / ``path_hash``: keep the radix path of the stable prefix (tools + system +
    ref-pool) resident; ``path_hash`` is the SHA-256 of that prefix's canonical content, first 32 hex;
  - ``prefer_tier``: ``"gpu"`` for that path; ``tier_hint``: where this request's own KV should live
    (HiCache tiers): ``"cpu"`` when ``hints.ttl`` asks for a long life (1h/12h), else ``"gpu"``;
  - ``fork_and_replace`` + ``fork_from_path`` (hash of the prefix before a folded ref-pool entry) +
    ``replace_suffix`` (the entry's slug and old text hash): reuse the path up to the fold.

Usage: ``prompt_tokens_details.cached_tokens`` only with ``--enable-cache-report`` (else ``None``); there
is no write counter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from telos_wrap.engines._openai_compat import (
    OpenAICompatEngine,
    caller_breakpoints,
    family_digest,
    is_chat,
    merge_under_caller,
    prefix_digest,
    stable_prefix_end,
    stream_usage_extras,
)
from telos_wrap.engines.base import EmitPlan, EngineProfile, PrefixTables, ProbeResult
from telos_wrap.engines.bidirectional import entry_digest, probe_body, read_probe_usage
from telos_wrap.engines.vllm import derive_isolation_key
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Band, TelosIR
from telos_wrap.ir.refpool import is_rendered_entry

__all__ = ["SGLangEngine"]

_LONG_TTLS = frozenset({"1h", "12h"})


class SGLangEngine(OpenAICompatEngine):
    """Engine adapter for an SGLang OpenAI-compatible server (see module docstring)."""

    profile = EngineProfile(
        name="sglang",
        caching="automatic",
        bidirectional=True,
        read_multiplier=0.0,  # self-hosted: no price; a hit skips the prefill compute
        write_multiplier=1.0,
    )
    stream_options_accepted = True
    server_flag = "--enable-cache-report"

    def plan(
        self,
        ir: TelosIR,
        hints: TelosHints,
        *,
        reuse: PrefixTables | None = None,
        fork: int | None = None,
        final: int | None = None,
    ) -> EmitPlan:
        """``stream_options``, isolation keys, ``cache_control`` and ``tier_hint`` for ``ir``."""
        params = ir.params
        extras = stream_usage_extras(params) if is_chat(ir) else {}
        notes: list[str] = []
        for name in ("cache_salt", "extra_key"):
            if name in params:
                notes.append(f"kept the caller's {name}")
            elif hints.isolation is not None:
                extras[name] = derive_isolation_key(hints.isolation, name)
        control: dict[str, Any] = {"affinity_key": "telos-" + family_digest(ir, hints.isolation)[:16]}
        if stable_prefix_end(ir) is not None or ir.tools:
            control.update(lock_radix_path=True, path_hash=prefix_digest(ir)[:32], prefer_tier="gpu")
        extras["cache_control"] = merge_under_caller(params, "cache_control", control)
        if "tier_hint" not in params:
            extras["tier_hint"] = "cpu" if hints.ttl in _LONG_TTLS else "gpu"
        return EmitPlan(breakpoints=caller_breakpoints(ir), extras=extras, notes=tuple(notes))

    # -- bidirectional -----------------------------------------------------------------------------

    def probe_body(self, ir: TelosIR, hints: TelosHints) -> dict[str, Any] | None:
        """A ``max_tokens: 1`` request for ``ir`` without its DROP tail (same isolation keys)."""
        return probe_body(self, ir, hints)

    def read_probe(self, usage: Mapping[str, Any] | None) -> ProbeResult:
        """How many prompt tokens the server found cached (``None`` without the server flag)."""
        return read_probe_usage(usage, server_flag=self.server_flag)

    def fold_extras(self, ir: TelosIR, slug: str) -> dict[str, Any]:
        """``fork_and_replace`` + ``cache_control.fork_from_path`` / ``replace_suffix`` for entry ``slug``."""
        stable = [block for block in ir.system if block.band is not Band.DROP]
        position = next(
            (i for i, block in enumerate(stable) if is_rendered_entry(block, slug)),
            len(stable),
        )
        return {
            "fork_and_replace": True,
            "cache_control": {
                "fork_from_path": prefix_digest(ir, position)[:32],
                "replace_suffix": {"ref": slug, "sha256": entry_digest(ir, slug)},
            },
        }
