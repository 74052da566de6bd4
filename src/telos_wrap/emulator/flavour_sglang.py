"""SGLang RadixAttention prefix cache (docs/vendor-facts.md §5, sglang 0.5.23 source).

* Radix tree over token ids; the matched length is rounded down to ``page_size`` (default 1)
  (§5.1, ``mem_cache/radix_cache.py``).
* At most ``input_len - 1`` tokens are matched so one token is computed for the logits
  (upstream ``managers/schedule_batch.py`` ``_compute_max_prefix_len``; not in the reference
  file, read from the public sglang source).
* ``extra_key`` and ``cache_salt`` namespace the tree; different values never share (§5.1/§5.2).
* Unknown request fields are ignored (pydantic default ``extra=ignore``, §5.2).
* ``usage.prompt_tokens_details.cached_tokens`` only with ``--enable-cache-report``;
  otherwise ``prompt_tokens_details`` is ``null``; there is no write counter (§5.3).
* The emulator never evicts (real SGLang: LRU by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .prefix_tree import PrefixTree
from .render import RenderedPrompt, dumps
from .self_hosted import SelfHostedFlavour


@dataclass(frozen=True)
class SGLangConfig:
    """Server flags of the emulated SGLang.

    ``enable_cache_report`` defaults to True here for convenience; real SGLang needs
    ``--enable-cache-report``.
    """

    page_size: int = 1
    enable_cache_report: bool = True


class SGLangFlavour(SelfHostedFlavour):
    """An SGLang OpenAI-compatible server."""

    name = "sglang"

    def __init__(self, config: SGLangConfig | None = None) -> None:
        super().__init__()
        self.config = config or SGLangConfig()
        if self.config.page_size < 1:
            raise ValueError("page_size must be >= 1")

    def prompt_usage(
        self, body: Mapping[str, Any], prompt: RenderedPrompt, reply: str, now: float
    ) -> tuple[int, dict[str, Any]]:
        page = self.config.page_size
        total = prompt.total_tokens
        ns = (body.get("model"), dumps(body.get("extra_key")), dumps(body.get("cache_salt")))
        with self._lock:
            tree = self._trees.setdefault(ns, PrefixTree())
            shared = tree.match(prompt.positions, now).tokens
            tree.insert(prompt.positions, now)
        hit = min(shared, max(total - 1, 0)) // page * page
        if not self.config.enable_cache_report:
            return total, {"prompt_tokens_details": None}
        return total, {"prompt_tokens_details": {"cached_tokens": hit}}
