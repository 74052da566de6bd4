"""``telos-wrap check``: telos' predicted cache reads beside what the vendor reported, per request.

A short scripted session — a long fixed system manual with a live clock line, two tools, a few
questions whose answers are appended to the history — is sent through the real SDK and
``telos_wrap.patch()`` to the vendor with the user's own key (or to ``--base-url``). Every request
as it leaves the process (telos' rewrite, byte for byte) is also answered by the built-in emulator
(``telos_wrap.emulator``), telos' model of the vendor's cache rules: its cache read is the
prediction. Both usages are normalized by the engine's own ``parse_usage``.

Against the real service the token counts differ (the emulator estimates one token per 4 bytes,
docs/emulator.md), so the verdict compares the share of the prompt read from cache (within
5 points); against the emulator itself (``--base-url`` of ``telos-wrap emulator``) the counts must
be equal. The default models are each vendor's cheapest one that caches (docs/engines.md): the
session costs a few cents.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlsplit

import telos_wrap
from telos_wrap.config import current_config, set_config
from telos_wrap.emulator import Emulator, sdk_http_library
from telos_wrap.engines.registry import get_engine
from telos_wrap.ir.model import UsageReport

__all__ = ["DEFAULT_MODELS", "Checked", "run_check"]

#: The cheapest model of each vendor whose prompts cache (docs/engines.md, minimum cacheable prefix).
DEFAULT_MODELS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-4.1-nano"}
_KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
#: Share of the prompt (percentage points) within which a prediction counts as met on a real service.
TOLERANCE = 5.0

_RULES = "".join(
    f"Rule {n}: answer in one short sentence; quote the policy section you rely on (section {n % 17}); "
    f"never invent an order number, and ask for it when the customer did not give one.\n"
    for n in range(1, 181)
)
_SYSTEM = "You are the support assistant of an online bookshop.\n" + _RULES
_QUESTIONS = (
    "Where is my order?",
    "It is order 1042. Can I still change the delivery address?",
    "Then please cancel it.",
    "And how long does a refund take?",
    "Thank you, that is all.",
)
_TOOLS = (
    {"name": "lookup_order", "description": "Find an order by its number.", "schema": {"order": "string"}},
    {"name": "cancel_order", "description": "Cancel an order by its number.", "schema": {"order": "string"}},
)


@dataclass(frozen=True)
class Checked:
    """One request of the check: telos' prediction and the vendor's report (normalized)."""

    turn: int
    predicted: UsageReport
    reported: UsageReport

    @staticmethod
    def _share(report: UsageReport) -> float:
        total = report.total_input or 0
        return 100.0 * (report.cache_read or 0) / total if total else 0.0

    @property
    def predicted_share(self) -> float:
        """Percent of the prompt the emulator read from cache."""
        return self._share(self.predicted)

    @property
    def reported_share(self) -> float:
        """Percent of the prompt the vendor reported read from cache."""
        return self._share(self.reported)

    @property
    def exact(self) -> bool:
        """Whether predicted and reported cache reads are the same number of tokens."""
        return self.predicted.cache_read == self.reported.cache_read

    @property
    def agrees(self) -> bool:
        """Exact, or within ``TOLERANCE`` points of the prompt (the vendor's tokenizer differs)."""
        return self.exact or abs(self.predicted_share - self.reported_share) <= TOLERANCE


def _system(turn: int) -> str:
    # A clock a careless harness rebuilds every turn: telos moves it out of the cached prefix.
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    return f"{_SYSTEM}Current time: {stamp}.{turn:02d}"


def _anthropic_request(model: str, turn: int, history: list[dict[str, Any]]) -> dict[str, Any]:
    tools = [
        {"name": t["name"], "description": t["description"], "input_schema": _schema(t)}
        for t in (_TOOLS if turn % 2 else reversed(_TOOLS))  # reshuffled, as careless harnesses do
    ]
    return {"model": model, "max_tokens": 32, "system": _system(turn), "tools": tools, "messages": history}


def _openai_request(model: str, turn: int, history: list[dict[str, Any]]) -> dict[str, Any]:
    tools = [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": _schema(t)},
        }
        for t in (_TOOLS if turn % 2 else reversed(_TOOLS))
    ]
    messages = [{"role": "system", "content": _system(turn)}, *history]
    return {"model": model, "max_tokens": 32, "tools": tools, "messages": messages}


def _schema(tool: dict[str, Any]) -> dict[str, Any]:
    properties = {name: {"type": kind} for name, kind in tool["schema"].items()}
    return {"type": "object", "properties": properties, "required": sorted(properties)}


def _reply_text(vendor: str, response: Any) -> str:
    if vendor == "anthropic":
        texts = [block.text for block in response.content if getattr(block, "type", "") == "text"]
    else:
        texts = [response.choices[0].message.content or ""]
    return " ".join(texts).strip() or "(no text)"


class _Predictor:
    """Answers every request that leaves the process with the built-in emulator (the prediction)."""

    def __init__(self, vendor: str) -> None:
        self.vendor = vendor
        self.emulator = Emulator()
        self.usage: list[UsageReport] = []

    def __call__(self, request: Any) -> None:
        path = urlsplit(str(request.url)).path.rstrip("/")
        if request.method != "POST" or not path.endswith(("/messages", "/chat/completions")):
            return
        endpoint = "/v1/messages" if self.vendor == "anthropic" else "/v1/chat/completions"
        flavour = None if self.vendor == "anthropic" else "openai"
        answer = self.emulator.handle("POST", f"http://predictor{endpoint}", request.read(), flavour=flavour)
        usage = answer.json().get("usage") if answer.status == 200 else None
        engine = get_engine(self.vendor)
        report = engine.parse_usage(usage) if isinstance(usage, dict) else None
        self.usage.append(report or _nothing(self.vendor))


def _nothing(engine: str) -> UsageReport:
    return UsageReport(engine=engine, raw_input=0, cache_read=0, cache_write=0, output=0)


def _client(vendor: str, base_url: str | None, api_key: str | None, predictor: _Predictor) -> Any:
    import anthropic
    import openai

    http = sdk_http_library(vendor)
    http_client = http.Client(event_hooks={"request": [predictor]}, timeout=60.0)
    kwargs: dict[str, Any] = {"http_client": http_client, "max_retries": 2}
    if base_url is not None:
        kwargs["base_url"] = base_url
    if api_key is None and base_url is not None and not os.environ.get(_KEY_VARIABLES[vendor]):
        api_key = "telos-wrap-check"  # a local server (the emulator) takes any key
    if api_key is not None:
        kwargs["api_key"] = api_key
    return (anthropic.Anthropic if vendor == "anthropic" else openai.OpenAI)(**kwargs)


@contextmanager
def _patched(engines: dict[str, str]) -> Iterator[None]:
    was_patched, previous = telos_wrap.is_patched(), current_config()
    telos_wrap.patch(engines={**previous.engines, **engines} if was_patched else engines)
    try:
        yield
    finally:
        if was_patched:
            set_config(previous)
        else:
            telos_wrap.unpatch()


def run_check(
    vendor: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    turns: int = 4,
    on_request: Callable[[Checked], None] | None = None,
) -> list[Checked]:
    """Run the scripted session; one :class:`Checked` per request, in order.

    ``vendor`` is ``"anthropic"`` or ``"openai"`` (Chat Completions). With ``base_url`` of an
    OpenAI-compatible server, telos is told it is OpenAI (``patch(engines=...)``): the engine checked
    is the one the real service gets. Vendor errors (a bad key, an unknown model) are raised as the
    SDK raises them.
    """
    if vendor not in DEFAULT_MODELS:
        raise ValueError(f"vendor must be one of {', '.join(DEFAULT_MODELS)}, not {vendor!r}")
    model = model or DEFAULT_MODELS[vendor]
    predictor = _Predictor(vendor)
    client = _client(vendor, base_url, api_key, predictor)
    engines = {base_url: "openai"} if vendor == "openai" and base_url else {}
    build = _anthropic_request if vendor == "anthropic" else _openai_request
    create = client.messages.create if vendor == "anthropic" else client.chat.completions.create
    history: list[dict[str, Any]] = []
    checked: list[Checked] = []
    with client, _patched(engines), telos_wrap.session(f"telos-wrap-check-{time.time_ns()}"):
        for turn in range(min(turns, len(_QUESTIONS))):
            history.append({"role": "user", "content": _QUESTIONS[turn]})
            response = create(**build(model, turn, list(history)))
            history.append({"role": "assistant", "content": _reply_text(vendor, response)})
            reported = telos_wrap.usage_of(response) or _nothing(vendor)
            item = Checked(turn + 1, predictor.usage[-1], reported)
            checked.append(item)
            if on_request is not None:
                on_request(item)
    return checked


def print_header(out: IO[str], vendor: str, model: str, where: str) -> None:
    """The table's title and column heads."""
    out.write(f"telos-wrap check: {vendor} {model} at {where}, one scripted session\n")
    out.write(
        f"{'request':>7}  {'prompt':>8}  {'predicted read':>20}  {'reported read':>20}  "
        f"{'reported write':>14}\n"
    )


def print_row(out: IO[str], item: Checked) -> None:
    """One request: prompt size, predicted and reported reads (tokens and share), the vendor's write."""
    reported = item.reported
    predicted = f"{item.predicted.cache_read or 0:,} ({item.predicted_share:.1f}%)"
    actual = f"{reported.cache_read or 0:,} ({item.reported_share:.1f}%)"
    mark = "=" if item.exact else ("~" if item.agrees else "!")
    out.write(
        f"{item.turn:>7}  {reported.total_input or 0:>8,}  {predicted:>20}  {actual:>20}  "
        f"{reported.cache_write or 0:>14,}  {mark}\n"
    )
    out.flush()


def print_verdict(out: IO[str], checked: list[Checked]) -> bool:
    """The last line; whether every request agreed."""
    if all(item.exact for item in checked):
        out.write(f"predicted == reported on every request ({len(checked)})\n")
        return True
    off = [item.turn for item in checked if not item.agrees]
    if not off:
        out.write(
            f"predicted and reported cache reads agree within {TOLERANCE:g} points of the prompt on every "
            "request (token counts differ: the emulator estimates 4 bytes per token)\n"
        )
        return True
    out.write(f"predicted and reported differ on request(s) {', '.join(map(str, off))}\n")
    return False


def as_dict(item: Checked) -> dict[str, Any]:
    """A row as plain JSON."""

    def fields(report: UsageReport) -> dict[str, int | None]:
        return {
            "input": report.total_input,
            "cache_read": report.cache_read,
            "cache_write": report.cache_write,
        }

    return {
        "request": item.turn,
        "predicted": fields(item.predicted),
        "reported": fields(item.reported),
        "exact": item.exact,
        "agrees": item.agrees,
    }


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: telos-wrap check")
