"""``patch()`` imports no SDK the application has not imported; one imported later is patched then.

Importing ``openai`` into an Anthropic-only process loads ~1,100 modules and leaves ~108,000 objects
for every full garbage collection to walk for the process' lifetime (measured: ``gc.get_objects``
before and after ``patch()``). Run in fresh interpreters: this process has both SDKs imported.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROBE = textwrap.dedent(
    """
    import sys

    import anthropic
    import telos_wrap

    coverage = telos_wrap.patch()
    assert "openai" not in sys.modules, "patch() imported openai"
    assert coverage["anthropic._base_client:SyncAPIClient.request"]
    assert not any(coverage[k] for k in coverage if k.startswith("openai"))

    import openai  # the application imports it later: patched on import

    assert all(v for k, v in telos_wrap.coverage().items() if k.startswith("openai._base_client"))
    from telos_wrap.emulator import Emulator, serve

    emulator = Emulator()
    with serve(emulator, flavour="openai") as url:
        telos_wrap.patch(engines={url + "/v1": "openai"}, only_what_pays=False)
        client = openai.OpenAI(api_key="x", base_url=url + "/v1", max_retries=0)
        client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}])
    assert emulator.requests[-1].body["prompt_cache_key"].startswith("telos-"), "rewritten by telos"
    print("OK")
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


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_an_sdk_imported_after_patch_is_patched_on_import_and_not_before() -> None:
    assert _run(PROBE).strip() == "OK"


def test_an_sdk_imported_after_unpatch_stays_untouched() -> None:
    assert _run(AFTER_UNPATCH).strip() == "OK"
