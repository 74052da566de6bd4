"""``prompt_cache_key`` names the tools, not the system text: a change after the tools keeps the key.

Found by the careless-harness benchmark (``env-dump`` on the LangGraph cassette traces, OpenAI rules):
the key used to hash the PIN system text too, so the request where telos learned a volatile line (or
the caller edited the prompt) went to a fresh cache partition and read nothing, not even its tools.
Real ``openai`` SDK over real HTTP to the emulator served on 127.0.0.1, whose OpenAI flavour
partitions the cache by ``prompt_cache_key`` (docs/emulator.md).
"""

from __future__ import annotations

import openai

import telos_wrap
from telos_wrap.emulator import Emulator, text_for_tokens
from telos_wrap.failopen import failure_counts

#: One tool of ~1,100 tokens: the shared prefix before the system prompt is above the 1,024 minimum.
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": text_for_tokens(1100),
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]
RULES = "You are a research agent.\nAnswer in one paragraph.\nCite every source."


def _system(jobs: list[int]) -> str:
    listing = "".join(f"JOB_{i}=running (pid {pid})\n" for i, pid in enumerate(jobs))
    return f"Environment:\nHOME=/home/agent\n{listing}SHELL=/bin/bash\n{RULES}"


def _turns(n: int) -> list[dict[str, str]]:
    turns: list[dict[str, str]] = []
    for i in range(n):
        turns += [
            {"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    return turns[:-1]


def test_learning_a_volatile_line_keeps_the_key_and_reads_the_tools(
    served_openai: tuple[Emulator, openai.OpenAI],
) -> None:
    emulator, oai = served_openai
    jobs = [[3507, 47600], [72174], [37368, 62922, 47235]]  # an environment dump's job list
    with telos_wrap.session() as session:
        for turn, listing in enumerate(jobs):
            messages = [{"role": "system", "content": _system(listing)}, *_turns(turn + 1)]
            oai.chat.completions.create(model="gpt-4.1", messages=messages, tools=TOOLS)
    keys = {record.body["prompt_cache_key"] for record in emulator.requests}
    assert len(keys) == 1, "one key for the whole session, before and after the job list was learned"
    assert session.volatile_spans, "the job list was learned at its first change"
    reads = [record.usage["prompt_tokens_details"]["cached_tokens"] for record in emulator.requests]
    assert reads[1] >= 1024, "the request that learns the list still reads the tools it shares"
    assert reads[2] > reads[1], "from then on the system prompt is stable and read too"
    assert not failure_counts()


def test_a_prompt_edit_keeps_the_key(served_openai: tuple[Emulator, openai.OpenAI]) -> None:
    emulator, oai = served_openai
    with telos_wrap.session():
        for rules in (RULES, RULES.replace("one paragraph", "two paragraphs")):
            messages = [{"role": "system", "content": rules}, {"role": "user", "content": "hi"}]
            oai.chat.completions.create(model="gpt-4.1", messages=messages, tools=TOOLS)
    first, second = emulator.requests
    assert first.body["prompt_cache_key"] == second.body["prompt_cache_key"]
    assert second.usage is not None and second.usage["prompt_tokens_details"]["cached_tokens"] >= 1024
