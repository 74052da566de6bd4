"""Responses requests keep the SDK's top-level key order; telos' own fields come last (docs/engines.md)."""

from __future__ import annotations

import openai

import telos_wrap
from telos_wrap.emulator import Emulator, emulator_http_client


def test_top_level_keys_keep_the_sdk_order_and_telos_fields_come_last() -> None:
    emu = Emulator()
    telos_wrap.patch()
    try:
        with openai.OpenAI(api_key="x", http_client=emulator_http_client(emu, "openai"), max_retries=0) as c:
            for hint in ({"disable": True}, {}):
                c.responses.create(
                    temperature=0.5,
                    store=False,
                    max_output_tokens=20,
                    input="hi",
                    instructions="Answer briefly. " * 400,
                    model="gpt-4.1",
                    telos_hint=hint,
                )
    finally:
        telos_wrap.unpatch()
    as_built, through_telos = (list(r.body) for r in emu.requests)
    assert through_telos[: len(as_built)] == as_built
    assert through_telos[len(as_built) :] == ["prompt_cache_key"]
    # The newest SDK builds these keys unsorted, so a telos that sorted them would fail above; the 0x
    # line (openai 2.0) builds them sorted already, where the check above is all there is to say.
    if openai.__version__.startswith("2."):
        assert as_built == sorted(as_built)
    else:
        assert as_built != sorted(as_built)
