"""Model context windows, as the emulated servers enforce them (docs/vendor-facts.md §9.1).

The emulator keeps its own copy of the table (it never imports what it is used to test): a request
whose input is longer than its model's window is refused with the vendor's own error, in the
vendor's shape (§9.3). A model the table does not know is never refused.
"""

from __future__ import annotations

from .errors import EmulatorHTTPError, anthropic_error, openai_error

__all__ = ["WINDOWS", "check_anthropic", "check_chat", "check_responses", "window_of"]

#: ``(model id prefix, window in tokens)``, longest prefix first when looked up.
WINDOWS: tuple[tuple[str, int], ...] = (
    ("claude-fable-5", 1_000_000),
    ("claude-mythos-5", 1_000_000),
    ("claude-opus-5", 1_000_000),
    ("claude-opus-4-8", 1_000_000),
    ("claude-opus-4-7", 1_000_000),
    ("claude-opus-4-6", 1_000_000),
    ("claude-sonnet-5", 1_000_000),
    ("claude-sonnet-4-6", 1_000_000),
    ("claude-", 200_000),
    ("gpt-5.6", 1_050_000),
    ("gpt-5.5", 1_050_000),
    ("gpt-5.4", 1_050_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("deepseek-", 128_000),
)
_BY_LENGTH = tuple(sorted(WINDOWS, key=lambda row: -len(row[0])))


def window_of(model: str) -> int | None:
    """The window of ``model``, or ``None`` when the table does not know it."""
    name = model.lower().rsplit("/", 1)[-1]
    return next((window for prefix, window in _BY_LENGTH if name.startswith(prefix)), None)


def check_anthropic(model: str, tokens: int) -> None:
    """Anthropic: 400 ``invalid_request_error`` "prompt is too long: N tokens > M maximum" (§9.3)."""
    window = window_of(model)
    if window is not None and tokens > window:
        raise anthropic_error(f"prompt is too long: {tokens} tokens > {window} maximum")


def check_chat(model: str, tokens: int) -> None:
    """Chat Completions: 400 ``context_length_exceeded`` on ``messages`` (§9.3)."""
    window = window_of(model)
    if window is not None and tokens > window:
        raise openai_error(
            f"This model's maximum context length is {window} tokens. However, your messages resulted "
            f"in {tokens} tokens. Please reduce the length of the messages.",
            param="messages",
            code="context_length_exceeded",
        )


def check_responses(model: str, tokens: int, truncation: object) -> EmulatorHTTPError | None:
    """Responses: with ``truncation`` not ``"auto"``, 400 ``context_length_exceeded`` on ``input``
    (§9.3); with ``"auto"`` the server drops items instead, which the emulator does not model: it
    answers (and reports the input it was sent)."""
    window = window_of(model)
    if window is None or tokens <= window or truncation == "auto":
        return None
    return openai_error(
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        param="input",
        code="context_length_exceeded",
    )
