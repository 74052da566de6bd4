"""The vLLM engine (bidirectional, seeds): canonical bytes, tenant isolation by ``cache_salt``, and the
seeds' ``cache_policy`` hints.

Self-hosted servers are never guessed from a URL: name them in ``patch(engines={base_url: "vllm"})``,
the session, or ``telos_hint={"engine": "vllm"}``. The OpenAI SDK's ``extra_body`` fields are plain
top-level body fields by the time telos sees them (the patch layer merges ``extra_json`` into the body),
so these fields are written at the top level of the body.

What a **stock vLLM** (0.33, docs/vendor-facts.md §4.2) does with each field telos may send:

* ``cache_salt`` — **acted on**: it salts the first KV block, so only requests with the same salt share
  cached KV. Sent only when ``hints.isolation`` is set (and the caller sent no ``cache_salt``), as
  ``"telos-" + sha256(isolation)`` — never the raw tenant id — which passes vLLM's validator
  (``validate_cache_salt``: non-empty, ≤ 128 characters, none of ``@ / \\`` or NUL, else HTTP 400).
  The hash hides the id but is predictable from it: if untrusted parties can send their own
  ``cache_salt`` to the same server, pass an isolation key mixed with a secret.
* ``stream_options.include_usage`` — **acted on**: the usage chunk of a stream.
* ``cache_policy`` (``pin_prefix_until_block``, and ``evict_span`` from ``cooperative_fold``) —
  **ignored**: not part of vLLM's request schema; its ``extra="allow"`` models accept and drop unknown
  fields, logging them at DEBUG. They are for servers extended to act on them (seeds).
  ``pin_prefix_until_block`` is ``{"message": i, "part": j}``: the last content part of the stable
  prefix (tools + system + ref-pool) in the emitted ``messages``; ``evict_span`` names a folded ref-pool
  entry (``ref``), the SHA-256 of its old text and where it stood — or, on the request where a
  session's context policy folds old tool results, ``{"from": {"message", "part"}, "reason":
  "context-fold"}``: where the folded span starts (docs/sessions.md, "Context under pressure").

On ``/v1/responses`` (vLLM serves it too) only ``cache_salt`` is sent: vLLM ignores
``prompt_cache_key`` there ("not implemented yet") and accepts ``prompt_cache_options`` without acting
on it — and rejects its ``ttl: "12h"`` — so telos sends neither (docs/vendor-facts.md §4.2).

Usage: ``prompt_tokens_details.cached_tokens`` (read) and ``.created_cache_tokens`` (write), only with
``--enable-prompt-tokens-details``; otherwise ``None`` — not reported, never 0.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from telos_wrap.engines._openai_compat import (
    OpenAICompatEngine,
    caller_breakpoints,
    is_chat,
    merge_under_caller,
    stable_prefix_end,
    stream_usage_extras,
    wire_pointer,
)
from telos_wrap.engines.base import EmitPlan, EngineProfile, PrefixTables, ProbeResult
from telos_wrap.engines.bidirectional import entry_digest, probe_body, read_probe_usage
from telos_wrap.ir.context import fold_start
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import TelosIR
from telos_wrap.ir.refpool import is_rendered_entry

__all__ = ["MAX_SALT_CHARS", "VLLMEngine", "derive_isolation_key", "validate_cache_salt"]

#: vLLM ``validate_cache_salt``: at most 128 characters (docs/vendor-facts.md §4.2).
MAX_SALT_CHARS = 128
_FORBIDDEN_SALT_CHARS = ("@", "/", "\\", "\x00")


def validate_cache_salt(salt: object) -> str:
    """Return ``salt`` if vLLM would accept it; raise ``ValueError`` saying why not otherwise."""
    if not isinstance(salt, str) or not salt:
        raise ValueError("cache_salt must be a non-empty string")
    if len(salt) > MAX_SALT_CHARS:
        raise ValueError(f"cache_salt must be at most {MAX_SALT_CHARS} characters, got {len(salt)}")
    bad = [char for char in _FORBIDDEN_SALT_CHARS if char in salt]
    if bad:
        raise ValueError(f"cache_salt must not contain {bad!r} (vLLM rejects '@', '/', '\\\\' and NUL)")
    return salt


def derive_isolation_key(isolation: str, purpose: str) -> str:
    """``"telos-" + sha256(purpose NUL isolation)``: a per-tenant key that never shows the raw id.

    ``purpose`` (``"cache_salt"``, ``"extra_key"``) separates the keys derived for different fields.
    """
    digest = hashlib.sha256(f"{purpose}\x00{isolation}".encode()).hexdigest()
    return validate_cache_salt(f"telos-{digest}")


class VLLMEngine(OpenAICompatEngine):
    """Engine adapter for a vLLM OpenAI-compatible server (see module docstring)."""

    profile = EngineProfile(
        name="vllm",
        caching="automatic",
        bidirectional=True,
        read_multiplier=0.0,  # self-hosted: no price; a hit skips the prefill compute
        write_multiplier=1.0,
    )
    stream_options_accepted = True
    #: The server flag without which usage has no cache counts.
    server_flag = "--enable-prompt-tokens-details"

    def plan(
        self,
        ir: TelosIR,
        hints: TelosHints,
        *,
        reuse: PrefixTables | None = None,
        fork: int | None = None,
        final: int | None = None,
    ) -> EmitPlan:
        """``stream_options``, ``cache_salt`` (isolation) and ``cache_policy`` for ``ir``."""
        params = ir.params
        chat = is_chat(ir)
        extras = stream_usage_extras(params) if chat else {}
        notes = self._isolation(params, hints, extras)
        end = stable_prefix_end(ir)
        # ``pin_prefix_until_block`` points into a chat ``messages`` array; a Responses body has none.
        pointer = wire_pointer(ir, end) if end is not None and chat else None
        policy: dict[str, Any] = {} if pointer is None else {"pin_prefix_until_block": pointer}
        folded = fold_start(ir.records) if chat else None
        start = wire_pointer(ir, ("messages", folded, 0)) if folded is not None else None
        if start is not None:
            # The session's context policy folded old tool results from here on this request: the
            # seeds' cooperative fold names the span the server may evict (its old KV is never read again).
            policy["evict_span"] = {"from": start, "reason": "context-fold"}
        if policy:
            extras["cache_policy"] = merge_under_caller(params, "cache_policy", policy)
        return EmitPlan(breakpoints=caller_breakpoints(ir), extras=extras, notes=tuple(notes))

    @staticmethod
    def _isolation(params: Mapping[str, Any], hints: TelosHints, extras: dict[str, Any]) -> list[str]:
        notes: list[str] = []
        if "cache_salt" in params:
            try:
                validate_cache_salt(params["cache_salt"])
                notes.append("kept the caller's cache_salt")
            except ValueError as exc:
                notes.append(f"kept the caller's cache_salt, which vLLM will reject: {exc}")
        elif hints.isolation is not None:
            extras["cache_salt"] = derive_isolation_key(hints.isolation, "cache_salt")
        return notes

    # -- bidirectional -----------------------------------------------------------------------------

    def probe_body(self, ir: TelosIR, hints: TelosHints) -> dict[str, Any] | None:
        """A ``max_tokens: 1`` request for ``ir`` without its DROP tail (same salt)."""
        return probe_body(self, ir, hints)

    def read_probe(self, usage: Mapping[str, Any] | None) -> ProbeResult:
        """How many prompt tokens the server found cached (``None`` without the server flag)."""
        return read_probe_usage(usage, server_flag=self.server_flag)

    def fold_extras(self, ir: TelosIR, slug: str) -> dict[str, Any]:
        """``cache_policy.evict_span`` for ref-pool entry ``slug`` of ``ir`` (before the fold)."""
        span: dict[str, Any] = {"ref": slug, "sha256": entry_digest(ir, slug)}
        for index, block in enumerate(ir.system):
            if is_rendered_entry(block, slug):
                span["at"] = wire_pointer(ir, ("system", None, index))
                break
        return {"cache_policy": {"evict_span": dict(sorted(span.items()))}}
