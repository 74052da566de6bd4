"""An agent conversation whose tool results the output filter works on (shared with a worker process).

Usage as a worker: python filter_convo.py REDIS_URL PREFIX SESSION_ID START STOP OUT_PATH MODE
— runs requests START..STOP-1 of the conversation under ``patch(output_filter=MODE)`` in session
SESSION_ID on a ``RedisStore`` and writes the exact request bodies (base64 JSON) to OUT_PATH.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.*

from tests.filters.corpus import entries

MODEL = "claude-opus-4-8"
SYSTEM = "You are a coding agent with a bash tool.\n" + "".join(
    f"Rule {i}: run one command at a time and read its output before the next.\n" for i in range(80)
)
TOOLS = [
    {
        "name": "bash",
        "description": "Run a shell command and return its output.",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    }
]
_BY_NAME = {entry.name: entry for entry in entries()}
#: (command, corpus output) of each step; the listing comes back a second time (a repeat).
STEPS: list[tuple[str, str]] = [
    ("python -m pytest -v tests/", _BY_NAME["pytest_verbose"].text),
    ("pip install -r requirements.txt", _BY_NAME["pip_install"].text),
    ("ls -R", _BY_NAME["ls_recursive"].text),
    ("cat src/app/billing/helpers.py", _BY_NAME["cat_file"].text),
    ("git status", _BY_NAME["git_status"].text),
    ("ls -R", _BY_NAME["ls_recursive"].text),
    ("npx jest", _BY_NAME["jest"].text),
    ("git diff", _BY_NAME["git_diff"].text),
]
REQUESTS = len(STEPS) + 1


def messages_for(request: int) -> list[dict[str, Any]]:
    """The application's messages at ``request``: the task, then one tool round per earlier step."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing refund test."}]
    for step in range(request):
        command, output = STEPS[step]
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {step}: I will run `{command}`."},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{step:02d}",
                        "name": "bash",
                        "input": {"command": command},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{step:02d}", "content": output}],
            }
        )
    return messages


def send(client: Any, request: int, **extra: Any) -> Any:
    return client.messages.create(
        model=MODEL, max_tokens=16, system=SYSTEM, tools=TOOLS, messages=messages_for(request), **extra
    )


def tool_results(body: bytes) -> dict[str, str]:
    """``tool_use_id`` → the tool result's content as sent (its string, or its one text block)."""
    found = {}
    for message in json.loads(body)["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "tool_result":
                value = block["content"]
                found[block["tool_use_id"]] = value if isinstance(value, str) else value[0]["text"]
    return found


def main(url: str, prefix: str, session_id: str, start: int, stop: int, out: str, mode: str) -> None:
    import anthropic

    import telos_wrap
    from telos_wrap.emulator import Emulator
    from telos_wrap.sessions import RedisStore
    from tests.sdk_http import sdk_http
    from tests.sessions.convo import RecordingTransport

    telos_wrap.patch(strict=True, output_filter=mode)
    transport = RecordingTransport(Emulator())
    client = anthropic.Anthropic(
        api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0
    )
    with telos_wrap.session(session_id, store=RedisStore(url, prefix=prefix)) as sess:
        for request in range(start, stop):
            send(client, request)
        sess.flush()
    Path(out).write_text(json.dumps([base64.b64encode(body).decode() for body in transport.bodies]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7])
