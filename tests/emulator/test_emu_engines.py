"""vLLM (§4) and SGLang (§5) conformance through the OpenAI SDK."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

from telos_wrap.emulator import Emulator, ManualClock, SGLangConfig, VLLMConfig
from tests.sdk_http import EmulatorTransport, sdk_http

from .emu_helpers import text


def prompt(tokens: int, fill: str = "x") -> list[dict[str, Any]]:
    """A system message of ``tokens - 1`` tokens + a 1-token user message."""
    return [{"role": "system", "content": text(tokens - 1, fill)}, {"role": "user", "content": "hi"}]


def engine_client(emu: Emulator, host: str) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="x",
        base_url=f"http://{host}/v1",
        http_client=sdk_http.Client(transport=EmulatorTransport(emu)),
        max_retries=0,
    )


def run(client: openai.OpenAI, messages: list[dict[str, Any]], **extra: Any) -> Any:
    r = client.chat.completions.create(model="qwen", messages=messages, extra_body=extra or None)
    return r.usage


@pytest.fixture
def vllm(make_openai: Callable[..., openai.OpenAI], emu: Emulator) -> openai.OpenAI:
    emu.routes["vllm.local"] = "vllm"
    return make_openai(base_url="http://vllm.local/v1")


@pytest.fixture
def sglang(make_openai: Callable[..., openai.OpenAI], emu: Emulator) -> openai.OpenAI:
    emu.routes["sglang.local:30000"] = "sglang"
    return make_openai(base_url="http://sglang.local:30000/v1")


# --- vLLM --------------------------------------------------------------------------------------


def test_vllm_hits_are_whole_blocks_and_at_most_n_minus_1(vllm: openai.OpenAI) -> None:
    first = run(vllm, prompt(101))
    assert (first.prompt_tokens_details.cached_tokens, first.prompt_tokens_details.model_extra) == (
        0,
        {"created_cache_tokens": 96},
    )
    second = run(vllm, prompt(101))
    assert second.prompt_tokens_details.cached_tokens == 96  # floor(100/16)*16
    assert second.prompt_tokens_details.model_extra == {"created_cache_tokens": 0}
    run(vllm, prompt(32, "y"))
    assert run(vllm, prompt(32, "y")).prompt_tokens_details.cached_tokens == 16  # floor(31/16)*16


def test_vllm_block_size_is_configurable(clock: ManualClock) -> None:
    emu = Emulator(clock=clock, default_openai_flavour="vllm", vllm=VLLMConfig(block_size=32))
    client = engine_client(emu, "gpu-box:8000")
    try:
        run(client, prompt(101))
        assert run(client, prompt(101)).prompt_tokens_details.cached_tokens == 96  # floor(100/32)*32
        run(client, prompt(64, "z"))
        assert run(client, prompt(64, "z")).prompt_tokens_details.cached_tokens == 32
    finally:
        client.close()


def test_vllm_cache_salt_isolates_requests(vllm: openai.OpenAI) -> None:
    run(vllm, prompt(200), cache_salt="tenant-1")
    assert run(vllm, prompt(200), cache_salt="tenant-2").prompt_tokens_details.cached_tokens == 0
    assert run(vllm, prompt(200)).prompt_tokens_details.cached_tokens == 0
    assert run(vllm, prompt(200), cache_salt="tenant-1").prompt_tokens_details.cached_tokens == 192


@pytest.mark.parametrize("salt", ["", "a" * 129, "a/b", "a@b", "a\\b", "a\x00b", 123])
def test_vllm_invalid_cache_salt_is_a_400(vllm: openai.OpenAI, salt: Any) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        run(vllm, prompt(20), cache_salt=salt)
    assert info.value.status_code == 400
    assert "cache_salt" in info.value.body["message"]


def test_vllm_accepts_a_128_char_salt_and_ignores_unknown_fields(vllm: openai.OpenAI) -> None:
    usage = run(vllm, prompt(20), cache_salt="s" * 128, prompt_cache_key="ignored", not_a_field=1)
    assert (usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens) == (20, 0)


def test_vllm_prompt_logprobs_skips_the_cache_read(vllm: openai.OpenAI) -> None:
    run(vllm, prompt(100))
    assert run(vllm, prompt(100), prompt_logprobs=1).prompt_tokens_details.cached_tokens == 0
    assert run(vllm, prompt(100)).prompt_tokens_details.cached_tokens == 96


def test_vllm_details_are_null_without_the_server_flag(clock: ManualClock) -> None:
    emu = Emulator(
        clock=clock, routes={"vllm.local": "vllm"}, vllm=VLLMConfig(enable_prompt_tokens_details=False)
    )
    client = engine_client(emu, "vllm.local")
    try:
        run(client, prompt(100))
        usage = run(client, prompt(100))
        assert (usage.prompt_tokens, usage.prompt_tokens_details) == (100, None)
        assert emu.requests[-1].usage == {
            "prompt_tokens": 100,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": 100 + usage.completion_tokens,
            "prompt_tokens_details": None,
        }
    finally:
        client.close()


# --- SGLang ------------------------------------------------------------------------------------


def test_sglang_radix_match_is_token_exact_by_default(sglang: openai.OpenAI) -> None:
    run(sglang, prompt(101))
    assert run(sglang, prompt(101)).prompt_tokens_details.cached_tokens == 100  # input_len - 1, page 1
    changed = [{"role": "system", "content": text(100)}, {"role": "user", "content": "yo"}]
    assert run(sglang, changed).prompt_tokens_details.cached_tokens == 100


def test_sglang_page_size_rounds_down(clock: ManualClock) -> None:
    emu = Emulator(clock=clock, default_openai_flavour="sglang", sglang=SGLangConfig(page_size=64))
    client = engine_client(emu, "127.0.0.1:30000")
    try:
        run(client, prompt(101))
        assert run(client, prompt(101)).prompt_tokens_details.cached_tokens == 64
    finally:
        client.close()


def test_sglang_extra_key_and_cache_salt_are_namespaces(sglang: openai.OpenAI) -> None:
    run(sglang, prompt(50), extra_key="a")
    assert run(sglang, prompt(50), extra_key="b").prompt_tokens_details.cached_tokens == 0
    assert run(sglang, prompt(50), extra_key="a", cache_salt="s").prompt_tokens_details.cached_tokens == 0
    assert run(sglang, prompt(50), extra_key="a").prompt_tokens_details.cached_tokens == 49
    assert run(sglang, prompt(50), extra_key="a", cache_salt="s").prompt_tokens_details.cached_tokens == 49


def test_sglang_cached_tokens_only_with_cache_report(clock: ManualClock) -> None:
    emu = Emulator(
        clock=clock, default_openai_flavour="sglang", sglang=SGLangConfig(enable_cache_report=False)
    )
    client = engine_client(emu, "localhost:30000")
    try:
        run(client, prompt(50))
        assert run(client, prompt(50)).prompt_tokens_details is None
    finally:
        client.close()


# --- streaming usage on engines ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("base_url", "expected_cached"),
    [("http://vllm.local/v1", 96), ("http://sglang.local:30000/v1", 99), ("https://api.deepseek.com", 100)],
)
def test_engine_stream_usage_only_with_include_usage(
    make_openai: Callable[..., openai.OpenAI], emu: Emulator, base_url: str, expected_cached: int
) -> None:
    emu.routes.update({"vllm.local": "vllm", "sglang.local:30000": "sglang"})
    client = make_openai(base_url=base_url)
    msgs = prompt(100)
    plain: list[Any] = list(client.chat.completions.create(model="m", messages=msgs, stream=True))
    assert all(c.usage is None for c in plain) and plain[-1].choices[0].finish_reason == "stop"
    with_usage = list(
        client.chat.completions.create(
            model="m", messages=msgs, stream=True, stream_options={"include_usage": True}
        )
    )
    assert with_usage[-1].choices == [] and with_usage[-1].usage.prompt_tokens == 100
    assert with_usage[-1].usage.prompt_tokens_details.cached_tokens == expected_cached
    assert sum(c.usage is not None for c in with_usage) == 1
