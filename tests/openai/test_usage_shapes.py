"""``usage_of()`` for each vendor's exact usage shape, plain and streamed, via ``sdk_http.MockTransport``.

The shapes are written out literally (docs/vendor-facts.md §2.5, §3, §4.3, §5.3) so the numbers are
exact: DeepSeek's repeated ``cached_tokens`` is never added to its hit count, vLLM/SGLang without their
server flag report ``None`` (not 0), OpenAI's inclusive ``prompt_tokens`` is split.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

import telos_wrap
from telos_wrap.engines.openai_usage import OpenAIChatStreamUsage, parse_openai_chat_usage
from tests.sdk_http import sdk_http

from .conftest import ENDPOINTS

USAGE: dict[str, dict[str, Any]] = {
    "openai": {
        "prompt_tokens": 2000,
        "completion_tokens": 10,
        "total_tokens": 2010,
        "prompt_tokens_details": {"cached_tokens": 1536, "cache_write_tokens": 400, "audio_tokens": 0},
    },
    "deepseek": {
        "prompt_tokens": 1000,
        "completion_tokens": 5,
        "total_tokens": 1005,
        "prompt_cache_hit_tokens": 768,
        "prompt_cache_miss_tokens": 232,
        "prompt_tokens_details": {"cached_tokens": 768},
    },
    "vllm": {
        "prompt_tokens": 500,
        "completion_tokens": 7,
        "total_tokens": 507,
        "prompt_tokens_details": {"cached_tokens": 320, "created_cache_tokens": 176},
    },
    "sglang": {
        "prompt_tokens": 500,
        "completion_tokens": 7,
        "total_tokens": 507,
        "prompt_tokens_details": {"cached_tokens": 499},
    },
    "generic": {"prompt_tokens": 300, "completion_tokens": 3, "total_tokens": 303, "cached_tokens": 128},
    # OpenRouter to Claude: the OpenAI names, with the write Anthropic bills (docs/engines.md, *Routes*).
    "openrouter": {
        "prompt_tokens": 3000,
        "completion_tokens": 9,
        "total_tokens": 3009,
        "prompt_tokens_details": {"cached_tokens": 2048, "cache_write_tokens": 700},
    },
    # A LiteLLM proxy to Claude (LiteLLM ``AnthropicConfig.calculate_usage``): no ``cache_write_tokens``;
    # its own ``cache_creation_tokens`` and the top-level Anthropic counters, inside ``prompt_tokens``.
    "litellm": {
        "prompt_tokens": 3000,
        "completion_tokens": 9,
        "total_tokens": 3009,
        "prompt_tokens_details": {"cached_tokens": 2048, "cache_creation_tokens": 700, "text_tokens": 252},
        "cache_read_input_tokens": 2048,
        "cache_creation_input_tokens": 700,
    },
}
#: ``(raw_input, cache_read, cache_write, output)`` expected for each shape.
EXPECTED: dict[str, tuple[int | None, int | None, int | None, int]] = {
    "openai": (64, 1536, 400, 10),
    "deepseek": (232, 768, 0, 5),
    "vllm": (4, 320, 176, 7),
    "sglang": (1, 499, 0, 7),
    "generic": (172, 128, 0, 3),
    "openrouter": (252, 2048, 700, 9),
    "litellm": (252, 2048, 700, 9),
}


def _completion(usage: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": usage,
    }


def _sse(usage: dict[str, Any] | None, include_usage: bool) -> bytes:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [
        {
            **base,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}],
        },
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    if include_usage:
        chunks = [{**chunk, "usage": None} for chunk in chunks]
        chunks.append({**base, "choices": [], "usage": usage})
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


class Server:
    """A vendor-shaped fake: records request bodies, answers with a fixed usage."""

    def __init__(self, usage: dict[str, Any] | None) -> None:
        self.usage = usage
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: sdk_http.Request) -> sdk_http.Response:
        body = json.loads(request.read())
        self.bodies.append(body)
        if body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return sdk_http.Response(
                200, content=_sse(self.usage, include), headers={"content-type": "text/event-stream"}
            )
        return sdk_http.Response(200, json=_completion(self.usage))


def _client(name: str, server: Server) -> openai.OpenAI:
    endpoint = ENDPOINTS[name]
    return openai.OpenAI(
        api_key="x",
        base_url=endpoint.base_url,
        http_client=sdk_http.Client(transport=sdk_http.MockTransport(server)),
        max_retries=0,
    )


MESSAGES: Any = [{"role": "user", "content": "hi"}]


@pytest.mark.usefixtures("oai_patched")
@pytest.mark.parametrize("name", list(EXPECTED))
def test_usage_of_each_vendor_shape(name: str) -> None:
    server = Server(USAGE[name])
    with _client(name, server) as client:
        completion = client.chat.completions.create(model=ENDPOINTS[name].model, messages=MESSAGES)
        report = telos_wrap.usage_of(completion)
    assert report is not None and report.engine == ENDPOINTS[name].engine
    assert (report.raw_input, report.cache_read, report.cache_write, report.output) == EXPECTED[name]


@pytest.mark.usefixtures("oai_patched")
@pytest.mark.parametrize("name", ["openai", "deepseek", "vllm", "sglang"])
def test_stream_usage_without_showing_the_usage_chunk(name: str) -> None:
    server = Server(USAGE[name])
    with _client(name, server) as client:
        stream = client.chat.completions.create(model=ENDPOINTS[name].model, messages=MESSAGES, stream=True)
        chunks = list(stream)
    assert server.bodies[-1]["stream_options"] == {"include_usage": True}
    assert len(chunks) == 2 and all(chunk.choices for chunk in chunks)  # the usage chunk was ours: hidden
    report = telos_wrap.usage_of(stream)
    assert report is not None
    assert (report.raw_input, report.cache_read, report.cache_write, report.output) == EXPECTED[name]


@pytest.mark.usefixtures("oai_patched")
@pytest.mark.parametrize("name", ["openai", "vllm"])
def test_callers_own_include_usage_chunk_is_shown(name: str) -> None:
    server = Server(USAGE[name])
    with _client(name, server) as client:
        stream = client.chat.completions.create(
            model=ENDPOINTS[name].model,
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    assert len(chunks) == 3 and chunks[-1].choices == [] and chunks[-1].usage is not None
    report = telos_wrap.usage_of(stream)
    assert report is not None and report.cache_read == EXPECTED[name][1]


@pytest.mark.usefixtures("oai_patched")
def test_generic_stream_gets_no_stream_options() -> None:
    server = Server(USAGE["generic"])
    with _client("generic", server) as client:
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        chunks = list(stream)
    assert "stream_options" not in server.bodies[-1]
    assert len(chunks) == 2
    assert telos_wrap.usage_of(stream) is None


@pytest.mark.usefixtures("oai_patched")
@pytest.mark.parametrize(
    ("name", "flag"), [("vllm", "--enable-prompt-tokens-details"), ("sglang", "--enable-cache-report")]
)
def test_self_hosted_without_the_server_flag_is_not_reported_not_zero(name: str, flag: str) -> None:
    usage = {"prompt_tokens": 500, "completion_tokens": 7, "total_tokens": 507, "prompt_tokens_details": None}
    with _client(name, Server(usage)) as client:
        report = telos_wrap.usage_of(client.chat.completions.create(model="m", messages=MESSAGES))
    assert report is not None
    assert (report.raw_input, report.cache_read, report.cache_write) == (500, None, None), flag
    assert report.hit_ratio is None


def test_openai_before_5_6_reports_no_writes_as_zero() -> None:
    usage = {"prompt_tokens": 1200, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 1024}}
    report = parse_openai_chat_usage(usage, engine="openai")
    assert report is not None and (report.raw_input, report.cache_read, report.cache_write) == (176, 1024, 0)


def test_stream_accumulator_takes_cumulative_snapshots() -> None:
    """vLLM ``continuous_usage_stats``: usage on every chunk, details only on the last one."""
    acc = OpenAIChatStreamUsage("vllm")
    assert acc.report() is None
    acc.feed(
        {"usage": {"prompt_tokens": 500, "completion_tokens": 1, "prompt_tokens_details": None}, "choices": 1}
    )
    acc.feed(
        {"usage": {"prompt_tokens": 500, "completion_tokens": 2, "prompt_tokens_details": None}, "choices": 1}
    )
    partial = acc.report()
    assert partial is not None and (partial.cache_read, partial.output) == (None, 2)
    acc.feed({"usage": USAGE["vllm"], "choices": 0})
    report = acc.report()
    assert report is not None and (
        report.raw_input,
        report.cache_read,
        report.cache_write,
        report.output,
    ) == (4, 320, 176, 7)
