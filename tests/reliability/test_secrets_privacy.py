"""Secrets and privacy: no API key or auth header in anything written, no raw ids in cache keys,
JSON (never pickle) in stores, and request content never logged above DEBUG.

The clients use distinctive fake keys (``harness.ANTHROPIC_KEY`` / ``OPENAI_KEY``, both containing
``TESTKEY``). The scan covers every file this suite wrote — everything under pytest's base temp
directory (recordings made with ``telos_wrap.record``, a vcrpy cassette recorded with the project's
own ``vcr_config``, the DEBUG log of every reliability test) — and the committed ``cassettes/``.
"""

from __future__ import annotations

import gzip
import json
import logging
import lzma
import pickle
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

import telos_wrap
from telos_wrap import pipeline
from telos_wrap.sessions import MemoryStore, SessionState, set_default_store
from telos_wrap.sessions.stores.redis_store import RedisStore

from .conftest import DEBUG_LOG
from .harness import SECRETS, Wire, client_for, entry, kwargs_for

ROOT = Path(__file__).resolve().parents[2]
AUTH_HEADER = re.compile(rb"(x-api-key|authorization)\W{0,8}(bearer\s+)?sk-", re.IGNORECASE)
CONTENT_KEY = "sk-ant-TESTKEY-pasted-into-a-prompt-0123456789"


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix == ".xz":
        return lzma.decompress(data)
    if path.suffix == ".gz":
        return gzip.decompress(data)
    return data


def _leaks(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        data = _read(path)
        found += [f"{path}: {secret}" for secret in SECRETS if secret.encode() in data]
        found += [f"{path}: auth header" for _ in AUTH_HEADER.finditer(data)]
    return found


def _record_everything(directory: Path) -> list[Path]:
    """Calls through every entry point of both SDKs while recording, failing open half of the time."""
    paths = [directory / "run.jsonl", directory / "run-hashed.jsonl.gz", directory / "run.jsonl.xz"]
    telos_wrap.patch()
    with (
        telos_wrap.record(paths[0]),
        telos_wrap.record(paths[1], hash_content=True),
        telos_wrap.record(paths[2]),
    ):
        for entry_id in (
            "anthropic-sync-create",
            "anthropic-async-stream_helper",
            "openai-sync-create_stream",
            "openai-async-create",
            "anthropic-sync-with_raw_response",
        ):
            e = entry(entry_id)
            kwargs = kwargs_for(e.sdk, tag="secrets")
            kwargs["messages"][-1]["content"] += f"\nmy key is {CONTENT_KEY}"
            for fail in (False, True):
                pipeline._stage_hook = (
                    (lambda stage: (_ for _ in ()).throw(RuntimeError(stage))) if fail else None
                )
                with telos_wrap.session(f"secrets-{e.id}-{fail}"):
                    e.run(client_for(e.sdk, Wire(), is_async=e.is_async), kwargs)
        pipeline._stage_hook = None
    return paths


def _cassette(directory: Path, vcr_config: dict[str, Any]) -> Path:
    """A real vcrpy cassette of patched calls, with the project's cassette settings."""
    import vcr

    path = directory / "cassette.yaml"
    recorder = vcr.VCR(**vcr_config, record_mode="all")
    telos_wrap.patch()
    with recorder.use_cassette(str(path)):
        for sdk in ("anthropic", "openai"):
            client_for(sdk, Wire()).messages.create(**kwargs_for(sdk)) if sdk == "anthropic" else (
                client_for(sdk, Wire()).chat.completions.create(**kwargs_for(sdk))
            )
    return path


def test_no_file_the_suite_wrote_holds_a_key_or_auth_header(
    tmp_path_factory: pytest.TempPathFactory, artifacts_dir: Path, vcr_config: dict[str, Any]
) -> None:
    directory = artifacts_dir / "secrets"
    directory.mkdir(exist_ok=True)
    recordings = _record_everything(directory)
    cassette = _cassette(directory, vcr_config)
    assert all(path.exists() and path.stat().st_size > 0 for path in [*recordings, cassette])
    assert (artifacts_dir / DEBUG_LOG).stat().st_size > 0
    written = [p for p in tmp_path_factory.getbasetemp().rglob("*") if p.is_file()]
    committed = [p for p in (ROOT / "cassettes").rglob("*") if p.is_file()]
    assert len(written) >= 5 and committed
    assert _leaks(written + committed) == []
    # A key the user pasted into a prompt is redacted in recordings too (replay/recording.py).
    lines = [json.loads(line) for line in _read(recordings[0]).splitlines()]
    assert lines and "[redacted]" in json.dumps(lines)


# -- cache keys and salts -------------------------------------------------------------------------------

RAW_SESSION = "session-RAWID-4b7c1e"
RAW_USER = "user-RAWID-alice@example.com"
ENGINES = {
    "openai": "https://api.openai.com/v1",
    "deepseek": "https://api.deepseek.com/v1",
    "vllm": "http://gpu-box.internal:8000/v1",
    "sglang": "http://sgl-box.internal:30000/v1",
    "generic": "http://llm.example.net/v1",
}


def _openai_call(base_url: str, isolation: str, hint: bool) -> tuple[dict[str, Any], dict[str, str]]:
    import openai

    from tests.sdk_http import sdk_http

    wire = Wire()
    client = openai.OpenAI(
        api_key="sk-proj-TESTKEY-x",
        base_url=base_url,
        max_retries=0,
        http_client=sdk_http.Client(transport=sdk_http.MockTransport(wire)),
    )
    extra = {"telos_hint": {"isolation": isolation, "session": RAW_SESSION}} if hint else {}
    with telos_wrap.session(RAW_SESSION, hints={"isolation": isolation}):
        client.chat.completions.create(**kwargs_for("openai"), **extra)
    return wire.bodies[-1], wire.sent[-1].headers


@pytest.mark.parametrize("hint", [False, True], ids=["session", "session+hint"])
@pytest.mark.parametrize("engine", list(ENGINES))
def test_cache_keys_and_salts_never_carry_a_raw_session_or_user_id(engine: str, hint: bool) -> None:
    telos_wrap.patch(strict=True, engines={ENGINES["vllm"]: "vllm", ENGINES["sglang"]: "sglang"})
    body, headers = _openai_call(ENGINES[engine], RAW_USER, hint)
    other_body, _ = _openai_call(ENGINES[engine], RAW_USER.replace("alice", "bob"), hint)
    wire_text = json.dumps(body) + json.dumps(headers)
    assert "RAWID" not in wire_text, "a raw session or user id reached the vendor"
    for field in ("prompt_cache_key", "cache_salt", "extra_key"):
        if field in body:
            assert re.fullmatch(r"telos-[0-9a-f]{16,64}", body[field]), (field, body[field])
            assert body[field] != other_body[field], f"{field}: tenants must not share it"
    control = body.get("cache_control")
    if isinstance(control, dict):
        assert all("RAWID" not in str(value) for value in control.values())
    expected = {"openai": {"prompt_cache_key"}, "vllm": {"cache_salt"}, "sglang": {"cache_salt", "extra_key"}}
    assert expected.get(engine, set()) <= set(body), (
        "isolation is applied where the engine has a field for it"
    )


def test_anthropic_requests_never_carry_a_raw_session_id() -> None:
    wire = Wire()
    telos_wrap.patch(strict=True)
    with telos_wrap.session(RAW_SESSION, diagnostics=True, hints={"isolation": RAW_USER}):
        for _ in range(2):
            client_for("anthropic", wire).messages.create(**kwargs_for("anthropic"))
    assert all("RAWID" not in json.dumps(sent.body) + json.dumps(sent.headers) for sent in wire.sent)


# -- stores hold JSON, never pickle ---------------------------------------------------------------------


def _no_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pickle used")

    for name in ("dumps", "loads", "dump", "load"):
        monkeypatch.setattr(pickle, name, refuse)


def _session_traffic(store: Any) -> None:
    telos_wrap.patch(strict=True)
    with telos_wrap.session("json-only", store=store) as session:
        session.pin("handbook", "Refunds within fourteen days. " * 100)
        for turn in range(3):
            kwargs = kwargs_for("anthropic", tag=f"t{turn}")
            kwargs["system"] = f"You are terse.\nServer clock: 10:0{turn}\nBe kind."
            client_for("anthropic", Wire()).messages.create(**kwargs)
            client_for("openai", Wire()).chat.completions.create(**kwargs_for("openai", tag=f"t{turn}"))


def test_memory_store_holds_json_text_only(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_pickle(monkeypatch)
    store = MemoryStore()
    set_default_store(store)
    _session_traffic(store)
    entries = dict(store._entries)
    assert entries
    for session_id, entry_ in entries.items():
        # A session of this process leaves its state object (``swap_state``), encoded on first load:
        # what the store gives out is JSON text, and the object holds nothing that text does not.
        assert entry_.state is None or isinstance(entry_.state, SessionState)
        loaded = store.load(session_id)
        assert loaded is not None and isinstance(json.loads(loaded.text), dict)
        assert entry_.text == loaded.text
        if entry_.state is not None:
            assert SessionState.loads(loaded.text) == entry_.state
        assert all(isinstance(blob, str) for blob in entry_.blobs.values())


@pytest.mark.redis
def test_redis_store_holds_json_text_only(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_pickle(monkeypatch)
    prefix = f"telos-secrets:{uuid.uuid4().hex[:8]}:"
    store = RedisStore(store_url, prefix=prefix, ttl=60)
    _session_traffic(store)
    keys = list(store.redis.scan_iter(f"{prefix}*"))
    assert len(keys) >= 2
    for key in keys:
        assert store.redis.type(key) == b"hash"
        for field, value in store.redis.hgetall(key).items():
            assert not value.startswith(b"\x80"), f"{key!r}.{field!r} looks like a pickle"
            text = value.decode("utf-8")
            if field == b"state":
                assert isinstance(json.loads(text), dict)
            elif field == b"rev":
                assert text.isdigit()
    store.redis.delete(*keys)


# -- request content never logged above DEBUG ------------------------------------------------------------

SECRET_TEXT = "CONFIDENTIAL-PAYLOAD-9d2f"


def _above_debug(caplog: pytest.LogCaptureFixture) -> list[str]:
    texts = []
    for record in caplog.records:
        if record.levelno > logging.DEBUG:
            formatted = record.getMessage()
            if record.exc_info:
                formatted += logging.Formatter().formatException(record.exc_info)
            texts.append(formatted)
    return texts


def _confidential(sdk: str) -> dict[str, Any]:
    kwargs = kwargs_for(sdk)
    if sdk == "anthropic":
        kwargs["system"] = f"You are terse. {SECRET_TEXT}-system\nCurrent time: 10:00"
    else:
        kwargs["messages"][0]["content"] = f"You are terse. {SECRET_TEXT}-system\nCurrent time: 10:00"
    kwargs["messages"][-1]["content"] += f" {SECRET_TEXT}-user"
    return kwargs


@pytest.mark.parametrize(
    "entry_id",
    [
        "anthropic-sync-create",
        "anthropic-sync-create_stream",
        "openai-async-create",
        "openai-sync-stream_helper",
    ],
)
@pytest.mark.parametrize("stage", ["lift", "emit", "usage", "stream-usage", "store"])
def test_request_content_is_never_logged_above_debug(
    entry_id: str, stage: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .faults import fault

    e = entry(entry_id)
    caplog.set_level(logging.DEBUG)
    telos_wrap.patch()
    name = {"store": "store.read"}.get(stage, stage)
    fault(name).install(monkeypatch)
    for _ in range(2):
        with telos_wrap.session("content-logging"):
            e.run(client_for(e.sdk, Wire(), is_async=e.is_async), _confidential(e.sdk))
    logged = _above_debug(caplog)
    assert all(SECRET_TEXT not in text for text in logged), [t for t in logged if SECRET_TEXT in t][:1]


def test_an_exception_quoting_the_request_is_not_logged_above_debug(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import telos_wrap.lift.anthropic_messages as lift

    def quoting(text: str, *args: Any, **kwargs: Any) -> Any:
        raise ValueError(f"cannot split {text!r}")

    monkeypatch.setattr(lift, "split_text", quoting)
    caplog.set_level(logging.DEBUG)
    telos_wrap.patch()
    client_for("anthropic", Wire()).messages.create(**_confidential("anthropic"))
    assert telos_wrap.failure_counts() == {"lift": 1}
    assert all(SECRET_TEXT not in text for text in _above_debug(caplog))


def test_learning_a_volatile_line_does_not_log_the_system_prompt(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    telos_wrap.patch(strict=True)
    secret = "ZebraCodeword42"  # letters and digits: a regex quotes them as they are
    with telos_wrap.session("learning") as session:
        for turn in range(3):
            kwargs = kwargs_for("anthropic", tag=f"l{turn}")
            kwargs["system"] = f"House rules.\n{secret}\nServer clock: 10:0{turn}:00\nBe kind."
            client_for("anthropic", Wire()).messages.create(**kwargs)
    assert session.volatile_spans, "the clock line was learned"
    assert all(secret not in text for text in _above_debug(caplog))
