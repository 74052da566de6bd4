"""``probe_cache`` / ``cooperative_fold`` / ``emit_with_extras``: pure, closed engines answer no."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import pytest

from telos_wrap.emulator import Emulator, VLLMConfig
from telos_wrap.engines.bidirectional import (
    cooperative_fold,
    emit_with_extras,
    is_bidirectional,
    probe_cache,
    probe_request,
)
from telos_wrap.engines.registry import get_engine
from telos_wrap.engines.vllm import derive_isolation_key, validate_cache_salt
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import TelosIR
from telos_wrap.pipeline import PrepareOptions, prepare
from tests.sdk_http import EmulatorTransport, sdk_http

DOC = "A long policy document line.\n" * 120
BODY: dict[str, Any] = {
    "model": "m",
    "max_tokens": 64,
    "stream": True,
    "messages": [
        {"role": "system", "content": DOC},
        {"role": "user", "content": "Question?\nCurrent time: 09:00"},
    ],
}


def _ir(engine: str) -> TelosIR:
    return prepare("openai_chat", BODY, PrepareOptions(engine=engine)).ir


@pytest.mark.parametrize("engine", ["openai", "deepseek", "generic", "anthropic"])
def test_closed_engines_answer_no(engine: str) -> None:
    adapter = get_engine(engine)
    assert not is_bidirectional(adapter)
    ir = _ir("openai" if engine == "anthropic" else engine)

    def send(body: dict[str, Any]) -> Mapping[str, Any]:
        raise AssertionError("a closed engine must not send anything")

    assert probe_cache(adapter, ir, TelosHints(), send).hit is False
    assert probe_request(adapter, ir, TelosHints()) is None
    folded, extras = cooperative_fold(adapter, ir, "system-doc-0", "summary")
    assert extras == {}
    assert folded.ref_pool["system-doc-0"].payload["text"] == "[ref:system-doc-0]\nsummary"


def _send_to(emu: Emulator) -> Any:
    client = sdk_http.Client(transport=EmulatorTransport(emu, flavour="vllm"))

    def send(body: dict[str, Any]) -> Mapping[str, Any] | None:
        response = client.post("http://gpu-box.internal:8000/v1/chat/completions", json=body)
        usage = response.json()["usage"]
        return usage if isinstance(usage, Mapping) else None

    return client, send


def test_vllm_probe_is_a_request_body_and_reads_the_answer() -> None:
    adapter = get_engine("vllm")
    hints = TelosHints(isolation="tenant-a")
    ir = _ir("vllm")
    body = probe_request(adapter, ir, hints)
    assert body is not None
    assert body["max_tokens"] == 1 and "stream" not in body and "stream_options" not in body
    assert "Current time" not in json.dumps(body)  # the DROP tail is not part of a probe
    assert body["cache_salt"] == derive_isolation_key(
        "tenant-a", "cache_salt"
    )  # same namespace as the request
    emu = Emulator()
    client, send = _send_to(emu)
    with client:
        first = probe_cache(adapter, ir, hints, send)
        second = probe_cache(adapter, ir, hints, send)
    assert first.hit is False and first.cached_tokens == 0
    assert second.hit is True and second.cached_tokens and second.cached_tokens > 0


def test_vllm_probe_without_the_server_flag_is_unknown() -> None:
    emu = Emulator(vllm=VLLMConfig(enable_prompt_tokens_details=False))
    client, send = _send_to(emu)
    with client:
        result = probe_cache(get_engine("vllm"), _ir("vllm"), TelosHints(), send)
    assert result.hit is False and result.cached_tokens is None
    assert "--enable-prompt-tokens-details" in result.detail


def test_vllm_cooperative_fold_sends_evict_span() -> None:
    adapter = get_engine("vllm")
    ir = _ir("vllm")
    folded, extras = cooperative_fold(adapter, ir, "system-doc-0", "Policy summary.")
    span = extras["cache_policy"]["evict_span"]
    assert span["ref"] == "system-doc-0" and len(span["sha256"]) == 64
    # The policy is the last system text: its entry stands in place of its stub, as the caller sent it.
    document = ir.system[0].payload["text"]
    assert span["at"] == {"message": 0, "part": 0}
    assert span["sha256"] == hashlib.sha256(document.encode()).hexdigest()  # the bytes that were sent
    body = emit_with_extras(adapter, folded, TelosHints(), extras)
    assert body["cache_policy"] == {
        "evict_span": span,
        "pin_prefix_until_block": {"message": 0, "part": 0},
    }
    assert body["messages"][0]["content"] == "Policy summary."


def test_sglang_cooperative_fold_forks_and_replaces() -> None:
    adapter = get_engine("sglang")
    ir = _ir("sglang")
    folded, extras = cooperative_fold(adapter, ir, "system-doc-0", "Policy summary.")
    assert extras["fork_and_replace"] is True
    body = emit_with_extras(adapter, folded, TelosHints(ttl="1h"), extras)
    control = body["cache_control"]
    assert set(control) == {
        "affinity_key",
        "fork_from_path",
        "lock_radix_path",
        "path_hash",
        "prefer_tier",
        "replace_suffix",
    }
    assert control["replace_suffix"]["ref"] == "system-doc-0"
    assert control["fork_from_path"] != control["path_hash"]
    assert body["tier_hint"] == "cpu" and body["fork_and_replace"] is True


@pytest.mark.parametrize(
    ("salt", "ok"),
    [
        ("telos-abc", True),
        ("", False),
        ("a" * 129, False),
        ("a/b", False),
        ("a@b", False),
        ("a\\b", False),
        ("a\x00", False),
    ],
)
def test_cache_salt_validation(salt: str, ok: bool) -> None:
    if ok:
        assert validate_cache_salt(salt) == salt
    else:
        with pytest.raises(ValueError):
            validate_cache_salt(salt)
