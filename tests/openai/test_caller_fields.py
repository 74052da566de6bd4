"""A caller's own ``prompt_cache_key``, ``extra_body`` and ``stream_options`` are kept, never mutated."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionStreamOptionsParam

import telos_wrap
from telos_wrap.emulator import Emulator

from .conftest import ENDPOINTS, Endpoint, hint

pytestmark = pytest.mark.usefixtures("oai_patched")

MESSAGES: Any = [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Q"}]


def test_callers_prompt_cache_key_is_kept(
    emu: Emulator, make_client: Callable[[Endpoint], openai.OpenAI]
) -> None:
    client = make_client(ENDPOINTS["openai-5.6"])
    client.chat.completions.create(model="gpt-5.6", messages=MESSAGES, prompt_cache_key="tenant-7")
    assert emu.requests[-1].body["prompt_cache_key"] == "tenant-7"
    client.chat.completions.create(model="gpt-5.6", messages=MESSAGES, extra_body={"prompt_cache_key": "eb"})
    assert emu.requests[-1].body["prompt_cache_key"] == "eb"


def test_callers_stream_options_are_kept_and_not_mutated(
    emu: Emulator, make_client: Callable[[Endpoint], openai.OpenAI]
) -> None:
    client = make_client(ENDPOINTS["openai"])
    options: ChatCompletionStreamOptionsParam = {"include_obfuscation": False}
    stream = client.chat.completions.create(
        model="gpt-4.1", messages=MESSAGES, stream=True, stream_options=options
    )
    chunks = list(stream)
    assert options == {"include_obfuscation": False}
    assert emu.requests[-1].body["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    assert all(chunk.choices for chunk in chunks)
    assert telos_wrap.usage_of(stream) is not None


@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_extra_body_is_kept_and_never_mutated(
    name: str, emu: Emulator, make_client: Callable[[Endpoint], openai.OpenAI]
) -> None:
    client = make_client(ENDPOINTS[name])
    extra_body: dict[str, Any] = {
        "cache_salt": "callers-own-salt",
        "extra_key": "callers-key",
        "top_k": 20,
        "chat_template_kwargs": {"enable_thinking": False},
        "cache_policy": {"pin_prefix_until_block": 3},
        "cache_control": {"prefer_tier": "cpu"},
    }
    before = copy.deepcopy(extra_body)
    nested = extra_body["chat_template_kwargs"]
    with telos_wrap.session(hints={"isolation": "tenant-a"}):
        client.chat.completions.create(model="m", messages=MESSAGES, extra_body=extra_body)
    assert extra_body == before and extra_body["chat_template_kwargs"] is nested
    sent = emu.requests[-1].body
    assert sent["cache_salt"] == "callers-own-salt"  # never replaced by the isolation salt
    assert sent["top_k"] == 20 and sent["chat_template_kwargs"] == {"enable_thinking": False}
    if name == "vllm":
        assert sent["cache_policy"] == {"pin_prefix_until_block": 3}
        assert "extra_key" in sent and sent["extra_key"] == "callers-key"
    else:
        assert sent["extra_key"] == "callers-key"
        assert sent["cache_control"]["prefer_tier"] == "cpu"  # the caller's sub-key wins
        assert set(sent["cache_control"]) == {"affinity_key", "lock_radix_path", "path_hash", "prefer_tier"}


@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_isolation_salt_is_hashed_valid_and_per_tenant(
    name: str, emu: Emulator, make_client: Callable[[Endpoint], openai.OpenAI]
) -> None:
    client = make_client(ENDPOINTS[name])
    salts = []
    for tenant in ("acme@corp/eu", "globex"):
        client.chat.completions.create(model="m", messages=MESSAGES, **hint({"isolation": tenant}))
        assert emu.requests[-1].status == 200
        salt = emu.requests[-1].body["cache_salt"]
        assert tenant not in salt and len(salt) <= 128 and not any(c in salt for c in "@/\\\x00")
        salts.append(salt)
        if name == "sglang":
            assert emu.requests[-1].body["extra_key"] not in (salt, tenant)
    assert salts[0] != salts[1]
    client.chat.completions.create(model="m", messages=MESSAGES)
    assert "cache_salt" not in emu.requests[-1].body  # only when isolation is asked for


def test_openai_gets_no_self_hosted_fields(
    emu: Emulator, make_client: Callable[[Endpoint], openai.OpenAI]
) -> None:
    client = make_client(ENDPOINTS["openai"])
    client.chat.completions.create(model="gpt-4.1", messages=MESSAGES, **hint({"isolation": "t"}))
    assert emu.requests[-1].status == 200  # the emulator rejects any field the SDK does not declare
    assert set(emu.requests[-1].body) == {"messages", "model", "prompt_cache_key"}
