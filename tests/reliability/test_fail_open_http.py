"""Fail open over real HTTP, for every fault and every ``patch()`` option; options checked up front.

The emulator is served on 127.0.0.1 (``serve()``) and the real SDK clients talk to it. For each
injected fault (``faults.py``) under each option set below, one call is made through a patched
client: it returns the SDK's own object, and when a request-side stage failed (``failure_counts``
names it) the emulator received exactly the JSON the unpatched SDK sends. Then the failures that
are no stage's: an engine that cannot be built at call time (the old typo scenario, where the
fall-back itself raised ``KeyError`` and nothing was sent), a bug in telos' plumbing between the
stages, a bug while reading ``telos_hint``. Last, ``patch()`` refuses an invalid option before it
patches anything, a second ``patch()`` changes only what it names, and ``session(...)`` says what is
wrong with its arguments.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

import telos_wrap
from telos_wrap import TelosHintError, TelosOptionError, TelosStageError
from telos_wrap.config import PatchConfig, current_config
from telos_wrap.emulator import Emulator, serve
from telos_wrap.engines import registry
from telos_wrap.ir.hints import ENGINE_NAMES
from telos_wrap.patch import turns, wrappers

from .faults import FAULTS, PIPELINE_STAGES, Fault, InjectedFault
from .harness import anthropic_kwargs, openai_kwargs

#: ``patch()`` option sets the faults are injected under (engines: filled in with the served URL).
OPTION_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "keep_past_drop": {"keep_past_drop": True},
    "refpool-off": {"refpool_threshold": None},
    "refpool-small": {"refpool_threshold": 16},
    "rewrite-everything": {"only_what_pays": False},
    "disabled": {"enabled": False},
    **{f"engine-{name}": {"engines": name} for name in ENGINE_NAMES if name != "anthropic"},
}
_REQUEST_STAGES = {f.stage for f in FAULTS if f.side == "request"}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Emulator, str]]:
    emulator = Emulator()
    with serve(emulator) as url:
        yield emulator, url


@pytest.fixture
def served(server: tuple[Emulator, str]) -> tuple[Emulator, str]:
    """The module's server with a fresh emulator state (caches and log emptied)."""
    server[0].reset()
    return server


def _client(sdk: str, url: str, option_set: str = "defaults") -> Any:
    if sdk == "anthropic":
        return anthropic.Anthropic(api_key="x", base_url=url, max_retries=0)
    return openai.OpenAI(api_key="x", base_url=_openai_url(url, option_set), max_retries=0)


def _openai_url(url: str, option_set: str) -> str:
    """The served flavour an engine option names (``serve()`` routes by the first path segment)."""
    engine = OPTION_SETS[option_set].get("engines")
    return f"{url}/{engine}/v1" if engine in ("openai", "deepseek", "vllm", "sglang") else f"{url}/v1"


def _call(sdk: str, client: Any) -> Any:
    """One call through ``client``, which is closed after it (no socket left open)."""
    with client:
        if sdk == "anthropic":
            return client.messages.create(**anthropic_kwargs())
        return client.chat.completions.create(**openai_kwargs())


def _sent(emulator: Emulator) -> list[str]:
    """The bodies the emulator received, as JSON text in the order their keys arrived."""
    return [json.dumps(record.body) for record in emulator.requests]


def _options(name: str, url: str) -> dict[str, Any]:
    options = dict(OPTION_SETS[name])
    if "engines" in options:
        options["engines"] = {_openai_url(url, name): options["engines"]}
    return options


def _original(sdk: str, url: str, emulator: Emulator, option_set: str = "defaults") -> str:
    """What the unpatched SDK sends for the call (one request, its JSON text)."""
    _call(sdk, _client(sdk, url, option_set))
    (body,) = _sent(emulator)
    emulator.reset()
    return body


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
@pytest.mark.parametrize("option_set", list(OPTION_SETS))
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_every_fault_under_every_option_still_sends(
    sdk: str,
    option_set: str,
    fault: Fault,
    served: tuple[Emulator, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if sdk == "anthropic" and option_set.startswith("engine-"):
        pytest.skip("engines= names OpenAI-compatible servers; the Anthropic client has one engine")
    emulator, url = served
    original = _original(sdk, url, emulator, option_set)
    telos_wrap.patch(**_options(option_set, url))
    fault.install(monkeypatch)

    result = _call(sdk, _client(sdk, url, option_set))

    assert result.usage is not None, "the caller got the SDK's own response"
    (record,) = emulator.requests
    assert record.status == 200, record.error
    failed = set(telos_wrap.failure_counts())
    if failed & _REQUEST_STAGES or option_set == "disabled":
        assert _sent(emulator) == [original], "the original request went out, byte for byte"
    if option_set == "defaults" and fault.side == "request" and fault.name in PIPELINE_STAGES:
        assert failed == {fault.stage}, "the fault was reached (the matrix injects into live stages)"


def test_an_engine_that_cannot_be_built_sends_the_original(
    served: tuple[Emulator, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call-time twin of the typo: the engine fails to build, and so would a second lookup."""

    def broken() -> Any:
        raise InjectedFault("this engine cannot be built")

    monkeypatch.setitem(registry._factories, "broken", broken)
    emulator, url = served
    original = _original("openai", url, emulator)
    telos_wrap.patch(engines={url + "/v1": "broken"})

    result = _call("openai", _client("openai", url))

    assert result.choices[0].message.content
    assert _sent(emulator) == [original]
    assert telos_wrap.failure_counts() == {"engine": 1}

    emulator.reset()
    telos_wrap.patch(strict=True)  # the engines stay (a second patch() changes what it names)
    with pytest.raises(TelosStageError) as raised:
        _call("openai", _client("openai", url))
    assert raised.value.stage == "engine"
    assert emulator.requests == [], "strict: nothing sent"


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_a_bug_between_the_stages_sends_the_original(
    sdk: str, served: tuple[Emulator, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*_: Any, **__: Any) -> Any:
        raise InjectedFault("a bug outside any stage")

    emulator, url = served
    original = _original(sdk, url, emulator)
    telos_wrap.patch()
    monkeypatch.setattr(turns, "readable", fail)  # where the request layer reads the body

    _call(sdk, _client(sdk, url))

    assert _sent(emulator) == [original]
    assert telos_wrap.failure_counts() == {"prepare": 1}

    emulator.reset()
    telos_wrap.patch(strict=True)
    with pytest.raises(TelosStageError) as raised:
        _call(sdk, _client(sdk, url))
    assert raised.value.stage == "prepare" and isinstance(raised.value.__cause__, InjectedFault)


def test_a_bug_reading_the_hint_sends_the_call(
    served: tuple[Emulator, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(kwargs: dict[str, Any]) -> None:
        raise InjectedFault("a bug in the hint plumbing")

    emulator, url = served
    original = _original("anthropic", url, emulator)
    telos_wrap.patch(enabled=False)
    monkeypatch.setattr(wrappers, "hint_headers", fail)

    with _client("anthropic", url) as client:
        client.messages.create(**anthropic_kwargs(), telos_hint={"ttl": "1h"})

    assert _sent(emulator) == [original]
    assert telos_wrap.failure_counts() == {"hint": 1}


# -- options are checked before anything is patched ---------------------------------------------------


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (
            {"engines": {"http://gpu-box:8000/v1": "vllmm"}},
            ["'vllmm'", "did you mean 'vllm'", "known engines"],
        ),
        ({"engines": {"gpu-box:8000": "vllm"}}, ["'gpu-box:8000'", "base URL", "host name"]),
        ({"engines": {"ftp://gpu-box/v1": "vllm"}}, ["base URL"]),
        ({"engines": ["http://gpu-box:8000/v1"]}, ["must be a dict", "list"]),
        ({"engines": {"http://gpu-box:8000/v1": 3}}, ["no engine named 3"]),
        ({"engines": {"http://gpu-box:8000/v1": "anthropic"}}, ["OpenAI-compatible", "vllm"]),
        ({"strict": "yes"}, ["strict", "True or False", "'yes'"]),
        ({"enabled": 0}, ["enabled", "True or False"]),
        ({"keep_past_drop": None}, ["keep_past_drop", "True or False"]),
        ({"only_what_pays": "no"}, ["only_what_pays", "True or False"]),
        ({"refpool_threshold": -1}, ["refpool_threshold", ">= 0", "None"]),
        ({"refpool_threshold": "2k"}, ["refpool_threshold"]),
        ({"refpool_threshold": True}, ["refpool_threshold"]),
    ],
)
def test_an_invalid_option_raises_before_anything_is_patched(
    options: dict[str, Any], says: list[str]
) -> None:
    before = current_config()
    with pytest.raises(TelosOptionError) as raised:
        telos_wrap.patch(**options)
    for words in says:
        assert words in str(raised.value)
    assert isinstance(raised.value, ValueError)
    assert not telos_wrap.is_patched()
    assert not any(telos_wrap.coverage().values())
    assert current_config() is before


def test_an_unknown_option_is_pythons_own_type_error() -> None:
    with pytest.raises(TypeError, match="stirct"):
        telos_wrap.patch(stirct=True)  # type: ignore[call-arg]
    assert not telos_wrap.is_patched()


def test_an_invalid_option_on_a_second_patch_keeps_the_first() -> None:
    telos_wrap.patch(engines={"http://gpu-box:8000/v1": "vllm"})
    before = current_config()
    with pytest.raises(TelosOptionError):
        telos_wrap.patch(engines={"http://gpu-box:8000/v1": "sglangg"})
    assert current_config() is before and telos_wrap.is_patched()


def test_patch_twice_changes_only_what_it_names() -> None:
    telos_wrap.patch(engines={"http://gpu-box:8000/v1": "vllm"}, keep_past_drop=True)
    telos_wrap.patch(strict=True)
    config = current_config()
    assert dict(config.engines) == {"http://gpu-box:8000/v1": "vllm"}
    assert config.strict and config.keep_past_drop
    telos_wrap.patch(engines={"gpu-box": "sglang"})  # a new mapping replaces the old one
    assert dict(current_config().engines) == {"gpu-box": "sglang"} and current_config().strict
    telos_wrap.patch(engines=None, strict=False)
    assert dict(current_config().engines) == {} and not current_config().strict
    telos_wrap.unpatch()  # unpatch() forgets every option: the next patch() starts from the defaults
    telos_wrap.patch(only_what_pays=False)
    assert current_config() == PatchConfig(only_what_pays=False)


def test_a_registered_engine_is_a_valid_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry._factories, "my-engine", registry._factories["generic"])
    telos_wrap.patch(engines={"http://gpu-box:8000/v1": "my-engine"})
    assert dict(current_config().engines) == {"http://gpu-box:8000/v1": "my-engine"}


@pytest.mark.parametrize(
    ("args", "kwargs", "says"),
    [
        (({"id": 1},), {}, ["session_id", "non-empty string", "dict"]),
        ((42,), {}, ["session_id", "int 42"]),
        (("",), {}, ["session_id", "empty string"]),
        ((), {"engine": "vllmm"}, ["engine='vllmm'", "did you mean 'vllm'", "sglang"]),
        ((), {"ttl": "5min"}, ["ttl='5min'", "5m, 1h"]),
        ((), {"strict": "yes"}, ["strict='yes'"]),
        ((), {"learn_volatility": "off"}, ["learn_volatility='off'"]),
        ((), {"on_cache_break": "print"}, ["on_cache_break", "callable"]),
        ((), {"hints": {"enigne": "vllm"}}, ["unknown telos_hint key", "engine"]),
    ],
)
def test_session_arguments_are_checked(
    args: tuple[Any, ...], kwargs: dict[str, Any], says: list[str]
) -> None:
    with pytest.raises(TelosHintError) as raised:
        telos_wrap.session(*args, **kwargs)
    for words in says:
        assert words in str(raised.value)
