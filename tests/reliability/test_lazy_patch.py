"""``patch()`` imports no SDK the application has not imported; one imported later is patched then.

Importing ``openai`` into an Anthropic-only process loads ~1,100 modules and leaves ~108,000 objects
for every full garbage collection to walk for the process' lifetime (measured: ``gc.get_objects``
before and after ``patch()``). Run in fresh interpreters: this process has both SDKs imported.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

from telos_wrap.emulator import Emulator, serve

PROBE = textwrap.dedent(
    """
    import json
    import sys

    import anthropic
    import telos_wrap

    url = sys.argv[1]
    coverage = telos_wrap.patch(only_what_pays=False)
    assert "openai" not in sys.modules, "patch() imported openai"
    assert coverage["anthropic._base_client:SyncAPIClient.request"]
    assert not any(coverage[k] for k in coverage if k.startswith("openai"))
    claude = anthropic.Anthropic(api_key="x", base_url=url, max_retries=0)
    with telos_wrap.session("lazy"):
        question = [{"role": "user", "content": "hi"}]
        model = "claude-opus-4-8"
        reply = claude.messages.create(model=model, max_tokens=8, system="Brief.", messages=question)
    assert telos_wrap.usage_of(reply) is not None, "rewritten and observed by telos"
    assert "openai" not in sys.modules, "an Anthropic call imported openai"

    import openai  # the application imports it later: patched on import

    assert all(v for k, v in telos_wrap.coverage().items() if k.startswith("openai._base_client"))
    telos_wrap.patch(engines={url + "/v1": "openai"}, only_what_pays=False)
    client = openai.OpenAI(api_key="x", base_url=url + "/v1", max_retries=0)
    completion = client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}])
    assert telos_wrap.usage_of(completion) is not None
    print(json.dumps("OK"))
    """
)

AFTER_UNPATCH = textwrap.dedent(
    """
    import sys

    import anthropic
    import telos_wrap

    telos_wrap.patch()
    telos_wrap.unpatch()
    import openai.resources.chat.completions.completions as completions

    assert not any(telos_wrap.coverage().values())
    assert type(vars(completions.Completions)["create"]).__name__ == "function", "untouched"
    print("OK")
    """
)


def _run(code: str, *args: str) -> str:
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_an_sdk_imported_after_patch_is_patched_on_import_and_not_before() -> None:
    # The emulator (which imports both SDKs) is served from this process; the probe only talks HTTP.
    emulator = Emulator()
    with serve(emulator, flavour="openai") as url:
        assert _run(PROBE, url).strip() == '"OK"'
    anthropic_body, openai_body = (record.body for record in emulator.requests)
    assert "cache_control" in anthropic_body["system"][0]  # a breakpoint telos placed
    assert openai_body["prompt_cache_key"].startswith("telos-")


def test_an_sdk_imported_after_unpatch_stays_untouched() -> None:
    assert _run(AFTER_UNPATCH).strip() == "OK"


RESOURCE_PROBE = textwrap.dedent(
    """
    import gc
    import json
    import sys

    import openai
    import telos_wrap

    url = sys.argv[1]
    client = openai.OpenAI(api_key="x", base_url=url + "/v1", max_retries=0)
    client.chat.completions  # the application uses chat: the SDK imports that resource, lazily
    gc.collect()
    before_objects, before_modules = len(gc.get_objects()), set(sys.modules)
    telos_wrap.patch(engines={url + "/v1": "openai"}, only_what_pays=False)
    gc.collect()
    added_objects, added_modules = len(gc.get_objects()) - before_objects, set(sys.modules) - before_modules
    beta = "openai.resources.beta.responses.responses"
    assert beta not in sys.modules, "patch() imported the beta resources"
    coverage = telos_wrap.coverage()
    assert coverage["openai.resources.chat.completions.completions:Completions.create"]
    assert not coverage[beta + ":Responses.create"]

    reply = client.beta.responses.create(  # now the SDK imports it: patched on import
        model="gpt-4.1", input="hi", telos_hint={"session": "lazy-beta"}
    )
    assert telos_wrap.coverage()[beta + ":Responses.create"]
    assert telos_wrap.usage_of(reply) is not None
    print(json.dumps({"objects": added_objects, "modules": sorted(added_modules)}))
    """
)


def test_a_resource_module_is_patched_when_the_sdk_imports_it_not_by_patch() -> None:
    """openai 3.x: importing ``client.beta``'s resources loads ~560 modules and ~56,000 objects that an
    application using only ``client.chat`` never needs; ``patch()`` leaves them to the SDK's own lazy
    loading and wraps ``beta.responses`` when it is first used (``telos_hint=`` is taken out of it)."""
    try:  # (finding it imports its parent packages: this process has both SDKs imported anyway)
        present = importlib.util.find_spec("openai.resources.beta.responses.responses") is not None
    except ModuleNotFoundError:
        present = False
    if not present:
        pytest.skip("this openai line has no client.beta.responses")
    emulator = Emulator()
    with serve(emulator, flavour="openai") as url:
        found = json.loads(_run(RESOURCE_PROBE, url))
    assert found["modules"] == [] and found["objects"] < 5_000, found
    (request,) = emulator.requests
    assert request.body["prompt_cache_key"].startswith("telos-")
