"""Each model family's context window, in tokens (docs/vendor-facts.md §9.1). Pure, no I/O.

``context_window(model)`` answers from the first row whose prefix the model id starts with (longest
prefixes first, so ``claude-opus-4-5`` is not read as ``claude-opus-4``), or ``None`` for a model
this table does not know: a policy with a fractional trigger then never folds for it, and says so.
The window is the vendor's whole context (input and output); telos compares input tokens with it.
"""

from __future__ import annotations

import functools

__all__ = ["CONTEXT_WINDOWS", "context_window"]

#: ``(model id prefix, window)``; docs/vendor-facts.md §9.1 names the source of each row.
CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    # Anthropic (§9.1): 1M for the families its context-windows page lists, 200k for every other.
    ("claude-fable-5", 1_000_000),
    ("claude-mythos-5", 1_000_000),
    ("claude-opus-5", 1_000_000),
    ("claude-opus-4-8", 1_000_000),
    ("claude-opus-4-7", 1_000_000),
    ("claude-opus-4-6", 1_000_000),
    ("claude-sonnet-5", 1_000_000),
    ("claude-sonnet-4-6", 1_000_000),
    ("claude-", 200_000),
    # OpenAI (§9.1): the models' pages.
    ("gpt-5.6", 1_050_000),
    ("gpt-5.5", 1_050_000),
    ("gpt-5.4", 1_050_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o3", 200_000),
    ("o4", 200_000),
    # DeepSeek (§9.1).
    ("deepseek-", 128_000),
)

_BY_LENGTH = tuple(sorted(CONTEXT_WINDOWS, key=lambda row: -len(row[0])))


@functools.lru_cache(maxsize=256)
def context_window(model: str) -> int | None:
    """The context window of ``model`` in tokens, or ``None`` when the table does not know it."""
    name = model.lower().rsplit("/", 1)[-1]  # "openai/gpt-4.1", "anthropic/claude-…" via routers
    for prefix, window in _BY_LENGTH:
        if name.startswith(prefix):
            return window
    return None
