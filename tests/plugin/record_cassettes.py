"""Record the committed cassettes of ``cassettes/plugin/`` — WITHOUT telos (no ``patch()``).

    python tests/plugin/record_cassettes.py

Real HTTP exchanges: the real ``anthropic`` / ``openai`` SDK clients run the support agent of
``tests/plugin/project/agent.py`` (untagged live clock in the system prompt) against telos_wrap's
built-in engine emulator served on 127.0.0.1 (``telos_wrap.emulator.serve``), recorded by vcrpy
with the project's header filters. No vendor API is involved: the usage numbers are the emulator's.
These stand for a project's existing cassettes, recorded before it used telos.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anthropic
import openai
import vcr

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "project"))

import agent  # noqa: E402

from telos_wrap import is_patched  # noqa: E402
from telos_wrap.emulator import Emulator, serve  # noqa: E402

OUT = HERE.parent.parent / "cassettes" / "plugin"
RECORDER = vcr.VCR(
    record_mode="all",
    match_on=["method", "path"],
    filter_headers=[
        "authorization",
        "x-api-key",
        "api-key",
        "openai-organization",
        "openai-project",
        "cookie",
    ],
    decode_compressed_response=True,
)


def main() -> None:
    assert not is_patched(), "these cassettes are recorded without telos"
    OUT.mkdir(parents=True, exist_ok=True)
    with serve(Emulator()) as url:
        claude = anthropic.Anthropic(api_key="recording-key", base_url=url, max_retries=0)
        with RECORDER.use_cassette(str(OUT / "support_agent_anthropic_without_telos.yaml")):
            agent.run_anthropic(claude, clock="untagged")
        gpt = openai.OpenAI(api_key="recording-key", base_url=url + "/v1", max_retries=0)
        with RECORDER.use_cassette(str(OUT / "support_agent_openai_without_telos.yaml")):
            agent.run_openai(gpt, clock="untagged")
    print(f"wrote {sorted(p.name for p in OUT.glob('*.yaml'))}")


if __name__ == "__main__":
    main()
