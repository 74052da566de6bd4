"""Bidirectional operations (seeds: "Bidirectional operations"): ``probe_cache``, ``cooperative_fold``,
``emit_with_extras``.

Open engines (vLLM, SGLang) can be asked about their cache and told what to drop; closed-source APIs
(Anthropic, OpenAI, DeepSeek) cannot:

* ``probe_cache()``: closed-source engines answer ``ProbeResult(hit=False)``; vLLM/SGLang send a lookup
  request for the stable prompt;
* ``cooperative_fold()``: closed-source engines get the client-side fold and extras ``{}``; vLLM/SGLang
  get the fold plus server fragments (``evict_span`` / ``fork_and_replace``);
* ``emit_with_extras()``: for every engine, ``plan.extras`` + the extras, then emit.

Everything here is pure: no network. A probe is a request *body* (the prompt without its DROP tail,
``max_tokens: 1``, no streaming, no ``prompt_logprobs`` — which would skip the prefix cache,
docs/vendor-facts.md §4.1); ``probe_cache(..., send=...)`` calls the caller's own
``send(body) -> usage`` and reads the answer. A stock server answers a probe like any request (and
warms the cache with it); what it reports needs ``--enable-prompt-tokens-details`` (vLLM) or
``--enable-cache-report`` (SGLang).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from telos_wrap.engines.base import EngineAdapter, ProbeResult
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Band, TelosIR, TelosMessage
from telos_wrap.ir.refpool import IN_PLACE, RefPool, entry_payload_text, in_place, is_rendered_entry

__all__ = [
    "BidirectionalEngine",
    "ProbeSender",
    "cooperative_fold",
    "emit_with_extras",
    "entry_digest",
    "fold_ref",
    "is_bidirectional",
    "probe_body",
    "probe_cache",
    "probe_request",
    "read_probe_usage",
]

#: The caller's transport for a probe: takes the request body, returns the response's ``usage``.
ProbeSender = Callable[[dict[str, Any]], Mapping[str, Any] | None]

# Request keys a probe must not carry: streaming, several choices, output limits, and
# ``prompt_logprobs`` (vLLM skips reading the prefix cache for it, §4.1).
_PROBE_DROPPED = frozenset(
    {"stream", "stream_options", "n", "max_tokens", "max_completion_tokens", "logprobs", "top_logprobs"}
    | {"prompt_logprobs"}
)


@runtime_checkable
class BidirectionalEngine(EngineAdapter, Protocol):
    """An engine adapter whose server can be probed and told about folds (vLLM, SGLang)."""

    def probe_body(self, ir: TelosIR, hints: TelosHints) -> dict[str, Any] | None:
        """The body of a lookup request for ``ir``'s stable prompt (``None``: nothing to probe)."""
        ...

    def read_probe(self, usage: Mapping[str, Any] | None) -> ProbeResult:
        """Read the probe response's ``usage``."""
        ...

    def fold_extras(self, ir: TelosIR, slug: str) -> dict[str, Any]:
        """Body fragments telling the server that ref-pool entry ``slug`` of ``ir`` is being folded."""
        ...


def is_bidirectional(engine: EngineAdapter) -> bool:
    """True for adapters that declare ``profile.bidirectional`` and implement the probe/fold methods."""
    return engine.profile.bidirectional and isinstance(engine, BidirectionalEngine)


def _without_drop(ir: TelosIR) -> TelosIR | None:
    messages: list[TelosMessage] = []
    for message in ir.messages:
        blocks = tuple(block for block in message.blocks if block.band is not Band.DROP)
        if message.blocks and not blocks:
            continue  # nothing but the volatile envelope
        messages.append(message if len(blocks) == len(message.blocks) else replace(message, blocks=blocks))
    system = tuple(block for block in ir.system if block.band is not Band.DROP)
    if not messages and not system:
        return None
    params = {key: value for key, value in ir.params.items() if key not in _PROBE_DROPPED}
    params["max_tokens"] = 1
    return replace(ir, system=system, messages=tuple(messages), params=params)


def probe_body(engine: EngineAdapter, ir: TelosIR, hints: TelosHints) -> dict[str, Any] | None:
    """A lookup request for ``ir`` without its DROP tail, planned and emitted by ``engine``.

    The engine's own isolation fields (``cache_salt``, ``extra_key``) are kept: they namespace the cache.
    """
    stable = _without_drop(ir)
    if stable is None:
        return None
    return engine.emit(stable, engine.plan(stable, hints))


def read_probe_usage(usage: Mapping[str, Any] | None, *, server_flag: str) -> ProbeResult:
    """``ProbeResult`` from a probe's chat ``usage``; ``cached_tokens`` is ``None`` when not reported."""
    details = usage.get("prompt_tokens_details") if isinstance(usage, Mapping) else None
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if not isinstance(cached, int) or isinstance(cached, bool):
        return ProbeResult(
            hit=False, cached_tokens=None, detail=f"the server does not report cached tokens ({server_flag})"
        )
    return ProbeResult(hit=cached > 0, cached_tokens=cached, detail=f"{cached} prompt tokens cached")


def probe_request(engine: EngineAdapter, ir: TelosIR, hints: TelosHints) -> dict[str, Any] | None:
    """The probe body to send yourself, or ``None`` (closed-source engine, or nothing to probe)."""
    if not is_bidirectional(engine):
        return None
    assert isinstance(engine, BidirectionalEngine)
    return engine.probe_body(ir, hints)


def probe_cache(
    engine: EngineAdapter, ir: TelosIR, hints: TelosHints, send: ProbeSender | None = None
) -> ProbeResult:
    """Ask the server how much of ``ir``'s stable prompt it holds.

    Closed-source engines always answer ``ProbeResult(hit=False)``. For vLLM/SGLang, ``send`` is called
    with the probe body and must return the response's ``usage`` mapping; without it the answer is
    ``hit=False`` and says so (use ``probe_request`` to send it another way).
    """
    if not is_bidirectional(engine):
        return ProbeResult(hit=False, detail=f"engine {engine.profile.name!r} cannot be probed")
    assert isinstance(engine, BidirectionalEngine)
    body = engine.probe_body(ir, hints)
    if body is None:
        return ProbeResult(hit=False, detail="nothing stable to probe")
    if send is None:
        return ProbeResult(hit=False, detail="no sender given; send probe_request(...) yourself")
    return engine.read_probe(send(body))


def fold_ref(ir: TelosIR, slug: str, summary: str) -> TelosIR:
    """``ir`` with ref-pool entry ``slug`` folded to ``summary`` (pool and rendered system block).

    The slug and every ``[ref:slug]`` stub keep their bytes (seeds: ref-pool), so the prefix before the
    entry stays cached. Raises ``RefPoolError`` for an unknown slug.
    """
    pool = RefPool(ir.ref_pool.values())
    folded = pool.fold(slug, summary)
    system = tuple(
        (replace(in_place(folded, block.extra), band=block.band) if block.extra.get(IN_PLACE) else folded)
        if is_rendered_entry(block, slug)
        else block
        for block in ir.system
    )
    return replace(ir, ref_pool=pool.snapshot(), system=system)


def entry_digest(ir: TelosIR, slug: str) -> str | None:
    """SHA-256 (hex) of ref-pool entry ``slug``'s text as the request renders it, or ``None`` if unknown.

    That is the entry's block in ``ir.system`` (with its reference line, or its content alone where it
    stands in place of its stub) when the pool was rendered, else the pool entry itself.
    """
    rendered = (b for b in ir.system if is_rendered_entry(b, slug))
    block = next(rendered, None) or ir.ref_pool.get(slug)
    if block is None:
        return None
    return hashlib.sha256(entry_payload_text(block).encode("utf-8")).hexdigest()


def cooperative_fold(
    engine: EngineAdapter, ir: TelosIR, slug: str, summary: str
) -> tuple[TelosIR, dict[str, Any]]:
    """Fold ref-pool entry ``slug`` client-side and return the server fragments that go with it.

    Returns ``(folded ir, extras)``; pass the extras to ``emit_with_extras``. Closed-source engines get
    ``{}`` (equivalent to a plain fold).
    """
    extras: dict[str, Any] = {}
    if is_bidirectional(engine):
        assert isinstance(engine, BidirectionalEngine)
        extras = engine.fold_extras(ir, slug)
    return fold_ref(ir, slug, summary), extras


def emit_with_extras(
    engine: EngineAdapter, ir: TelosIR, hints: TelosHints, extras: Mapping[str, Any]
) -> dict[str, Any]:
    """Plan ``ir``, merge ``extras`` into the plan's extras (one level deep for dicts), and emit."""
    plan = engine.plan(ir, hints)
    merged = dict(plan.extras)
    for key, value in extras.items():
        base = merged.get(key)
        if isinstance(base, Mapping) and isinstance(value, Mapping):
            merged[key] = dict(sorted({**base, **value}.items()))
        else:
            merged[key] = value
    return engine.emit(ir, replace(plan, extras=merged))
