"""HTTP errors the emulator returns, in each vendor's JSON error shape."""

from __future__ import annotations

from typing import Any


class EmulatorHTTPError(Exception):
    """A request the emulated server rejects; becomes an HTTP response with ``status`` and ``body``."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


def anthropic_error(
    message: str, *, status: int = 400, kind: str = "invalid_request_error"
) -> EmulatorHTTPError:
    """Anthropic's shape: ``{"type": "error", "error": {"type": ..., "message": ...}}``.

    Source: anthropic SDK ``types/error_response.py`` / ``invalid_request_error.py``.
    """
    return EmulatorHTTPError(status, {"type": "error", "error": {"type": kind, "message": message}})


def openai_error(
    message: str, *, status: int = 400, param: str | None = None, code: str | None = None
) -> EmulatorHTTPError:
    """OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``."""
    return EmulatorHTTPError(
        status,
        {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}},
    )


def engine_error(message: str, *, status: int = 400) -> EmulatorHTTPError:
    """vLLM / SGLang shape: ``{"error": {"message", "type": "BadRequestError", "param", "code"}}``.

    vLLM's ``ErrorResponse`` nests an ``ErrorInfo`` with ``type`` and an integer ``code``
    (vllm ``entrypoints/openai`` protocol); SGLang uses the same OpenAI-style envelope.
    """
    return EmulatorHTTPError(
        status,
        {"error": {"message": message, "type": "BadRequestError", "param": None, "code": status}},
    )
