"""vLLM automatic prefix caching (docs/vendor-facts.md §4, vllm 0.33 source).

* Only full blocks of ``block_size`` tokens (default 16) are hashed and reused; the hash of a
  block chains its parent, so one differing token invalidates every later block (§4.1).
* At most ``num_tokens - 1`` tokens can hit (the last prompt token is always recomputed), so a
  repeated N-token prompt reports ``floor((N-1)/block)*block`` cached tokens (§4.1).
* ``cache_salt`` salts the first block: only requests with the same salt share KV.  It must be
  a non-empty string of at most 128 characters without ``@``, ``/``, ``\\`` or NUL, else 400
  (§4.2, ``validate_cache_salt``).
* ``prompt_logprobs`` skips reading the prefix cache (§4.1, ``sampling_params.py``).
* Unknown request fields are ignored (``extra="allow"``, logged at DEBUG; §4.2).
* ``usage.prompt_tokens_details`` = ``{cached_tokens, created_cache_tokens}`` only when the
  server runs with ``--enable-prompt-tokens-details``; otherwise ``null`` (§4.3).
* Eviction is LRU of GPU blocks; the emulator never evicts (unbounded memory, no TTL).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .prefix_tree import PrefixTree
from .render import RenderedPrompt
from .self_hosted import SelfHostedFlavour

MAX_SALT_CHARS = 128
_FORBIDDEN_SALT_CHARS = ("@", "/", "\\", "\x00")


@dataclass(frozen=True)
class VLLMConfig:
    """Server flags of the emulated vLLM.

    ``enable_prompt_tokens_details`` defaults to True here for convenience; real vLLM defaults
    to False (``--enable-prompt-tokens-details`` off).
    """

    block_size: int = 16
    enable_prompt_tokens_details: bool = True


class VLLMFlavour(SelfHostedFlavour):
    """A vLLM OpenAI-compatible server."""

    name = "vllm"

    def __init__(self, config: VLLMConfig | None = None) -> None:
        super().__init__()
        self.config = config or VLLMConfig()
        if self.config.block_size < 1:
            raise ValueError("block_size must be >= 1")

    def validate(self, body: Mapping[str, Any], prompt: RenderedPrompt) -> None:
        if "cache_salt" not in body or body["cache_salt"] is None:
            return
        salt = body["cache_salt"]
        if not isinstance(salt, str) or not salt:
            raise self.error("Parameter 'cache_salt' must be a non-empty string if provided.")
        if len(salt) > MAX_SALT_CHARS:
            raise self.error(f"Parameter 'cache_salt' must be at most {MAX_SALT_CHARS} characters.")
        if any(ch in salt for ch in _FORBIDDEN_SALT_CHARS):
            raise self.error("Parameter 'cache_salt' must not contain '@', '/', '\\' or NUL characters.")

    def prompt_usage(
        self, body: Mapping[str, Any], prompt: RenderedPrompt, reply: str, now: float
    ) -> tuple[int, dict[str, Any]]:
        block = self.config.block_size
        total = prompt.total_tokens
        ns = (body.get("model"), body.get("cache_salt"))
        with self._lock:
            tree = self._trees.setdefault(ns, PrefixTree())
            shared = tree.match(prompt.positions, now).tokens
            tree.insert(prompt.positions, now)
        if body.get("prompt_logprobs") is not None:
            shared = 0  # skip_reading_prefix_cache
        hit = min(shared, max(total - 1, 0)) // block * block
        created = max(0, total // block * block - hit)
        if not self.config.enable_prompt_tokens_details:
            return total, {"prompt_tokens_details": None}
        return total, {"prompt_tokens_details": {"cached_tokens": hit, "created_cache_tokens": created}}
