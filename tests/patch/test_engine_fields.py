"""What each engine's fields look like on the wire, sent through the OpenAI SDK under ``patch()``.

The engine adapters' bodies are tested in tests/engines; here the same conversation goes through a
real ``openai.OpenAI`` client (its transport a mock that keeps the bytes), to the base URL
``patch(engines=...)`` names for each engine, so the table shows what the SDK puts on the wire:
the fields an OpenAI-compatible server reads that the SDK has no parameter for (vLLM's
``cache_salt`` and ``cache_policy``, SGLang's routing fields) travel as its ``extra_body`` would,
merged with the caller's own ``extra_body``, after the SDK's keys (docs/vendor-facts.md §4, §5).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

import telos_wrap
from telos_wrap.failopen import reset_failures
from tests.engines.test_adapters import CHAT, CHAT_CANONICAL, SALT
from tests.sdk_http import sdk_http

BASE_URL = "http://llm.internal/v1"
COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
}
VLLM_POLICY = {"pin_prefix_until_block": {"message": 0, "part": 0}}
SGLANG_ROUTING = {
    "affinity_key": "telos-3a37aff390402b74",
    "lock_radix_path": True,
    "path_hash": "127689289057d76cd00cdb3b91440cae",
    "prefer_tier": "gpu",
}

#: ``{engine: the body sent}`` for ``CHAT`` with ``isolation="tenant-a"`` and the caller's
#: ``extra_body={"top_k": 5}``.
SENT = {
    "openai": {**CHAT_CANONICAL, "top_k": 5, "prompt_cache_key": "telos-3a37aff390402b74"},
    "deepseek": {**CHAT_CANONICAL, "top_k": 5},
    "generic": {**CHAT_CANONICAL, "top_k": 5},
    "vllm": {**CHAT_CANONICAL, "top_k": 5, "cache_policy": VLLM_POLICY, "cache_salt": SALT},
    "sglang": {
        **CHAT_CANONICAL,
        "top_k": 5,
        "cache_control": SGLANG_ROUTING,
        "cache_salt": SALT,
        "extra_key": "telos-f6f8f0bab68406a2867237ea9551192b7cfc3cdde0f4530cd936214d9acbc44d",
        "tier_hint": "gpu",
    },
}


@pytest.fixture
def sent() -> Iterator[list[bytes]]:
    reset_failures()  # the counts are the process's: an earlier module's fail-opens are not this test's
    yield []
    telos_wrap.unpatch()


@pytest.mark.parametrize("engine", list(SENT))
def test_the_engines_fields_on_the_wire(engine: str, sent: list[bytes]) -> None:
    telos_wrap.patch(strict=True, engines={BASE_URL: engine}, only_what_pays=False)

    def answer(request: sdk_http.Request) -> sdk_http.Response:
        sent.append(request.read())
        return sdk_http.Response(200, json=COMPLETION)

    client = openai.OpenAI(
        api_key="x",
        base_url=BASE_URL,
        max_retries=0,
        http_client=sdk_http.Client(transport=sdk_http.MockTransport(answer)),
    )
    extra: dict[str, Any] = {"telos_hint": {"isolation": "tenant-a"}}
    completion = client.chat.completions.create(**CHAT, extra_body={"top_k": 5}, **extra)
    [body] = [json.loads(raw) for raw in sent]
    assert body == SENT[engine]
    assert list(body) == list(SENT[engine])
    report = telos_wrap.usage_of(completion)
    assert report is not None and report.engine == engine
    assert telos_wrap.failure_counts() == {}
