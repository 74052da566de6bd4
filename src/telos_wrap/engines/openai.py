"""The OpenAI engine (``api.openai.com`` and Azure OpenAI): a stable ``prompt_cache_key``, and on
gpt-5.6+ explicit breakpoints at stable boundaries.

Vendor facts (openai 3.54 ``types/chat/completion_create_params.py`` and
``chat_completion_content_part_text_param.py``; docs/vendor-facts.md, *OpenAI*):

* caching is automatic on every model; ``prompt_cache_key`` is combined with the prefix hash for
  routing and, on current models, is part of the cache identity: it must be stable per shared
  prefix, never per request;
* ``prompt_cache_options`` (``mode``: ``implicit``/``explicit``, Chat ``ttl``: ``"30m"`` only) and
  ``prompt_cache_breakpoint`` on content parts are "supported for gpt-5.6 and later models" and must not
  go to older models (docs/vendor-facts.md: these fields must not be sent to older models);
* a request writes at most four breakpoints: in ``implicit`` mode one implicit (near the newest
  user/tool message) plus the latest **three** explicit ones, in ``explicit`` mode the latest four;
  matching looks back over up to 80 breakpoints with no content-block lookback limit, so no rolling
  mid-conversation anchor is needed;
* breakpoints go on ``text``/``image_url``/``input_audio``/``file`` parts; system, developer and tool
  messages take text parts only, so string content must become a parts array to carry one; assistant
  output is not an accepted target (§2.2) — never marked here;
* ``prompt_cache_retention`` (deprecated) and ``prompt_cache_options.ttl``: the SDK calls them
  independent, langchain4j says OpenAI rejects both (§2.2 DISAGREE) — telos never sends both.

Plan: ``prompt_cache_key = "telos-" + sha256(prefix family)[:16]`` unless the caller set one (the
family is the canonical tools, plus ``hints.isolation`` when given: ``family_digest`` says why not the
system text); on
gpt-5.6+ also ``prompt_cache_options = {"mode": "implicit"}`` (with ``"ttl": "30m"`` when
``hints.ttl == "30m"`` and the caller sent no ``prompt_cache_retention``) unless the caller sent their
own, and explicit breakpoints, by priority BP-X (last markable non-DROP block of the conversation,
never on an assistant part) > BP-R (end of the ref-pool) > BP-S (last PIN system block), within the
mode's budget minus the caller's own markers. ``hints.ttl == "12h"`` puts ``"ttl": "12h"`` on BP-R/BP-S.

Responses (same fields, ``response_create_params.py``): the same key and options; the request ``ttl``
may be ``"30m"`` or ``"12h"`` there, so ``hints.ttl`` of either goes into ``prompt_cache_options``; the
only breakpoint telos adds is BP-X on an input part (``instructions`` is a string and cannot carry one,
so there is no BP-S / BP-R); streams report usage without being asked (no ``stream_options``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from telos_wrap.engines._openai_compat import (
    Location,
    OpenAICompatEngine,
    caller_breakpoints,
    family_digest,
    is_chat,
    markable,
    stream_usage_extras,
)
from telos_wrap.engines.base import Breakpoint, EmitPlan, EngineProfile, PrefixTables
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Band, TelosIR

__all__ = ["KEY_PREFIX", "OpenAIEngine", "prompt_cache_key", "supports_breakpoints"]

KEY_PREFIX = "telos-"
#: Explicit breakpoints one request may write, per ``prompt_cache_options.mode`` (SDK docstring).
_WRITES = {"implicit": 3, "explicit": 4}
_GPT_VERSION = re.compile(r"^(?:ft:)?gpt-(\d+)(?:\.(\d+))?(?![\d.])")


def supports_breakpoints(model: object) -> bool:
    """True for the gpt-5.6 family and later (``gpt-5.6``, ``gpt-5.6-mini``, ``gpt-5.10``, ``gpt-6``...)."""
    if not isinstance(model, str):
        return False
    match = _GPT_VERSION.match(model)
    if match is None:
        return False
    return (int(match.group(1)), int(match.group(2) or 0)) >= (5, 6)


def prompt_cache_key(ir: TelosIR, isolation: str | None = None) -> str:
    """``"telos-" + sha256(prefix family)[:16]`` (see ``family_digest``)."""
    return KEY_PREFIX + family_digest(ir, isolation)[:16]


def _last_system(ir: TelosIR, band: Band) -> Location | None:
    for index in range(len(ir.system) - 1, -1, -1):
        block = ir.system[index]
        if block.band is band and markable(block, "system"):
            return "system", None, index
    return None


def _conversation_end(ir: TelosIR) -> Location | None:
    """The last markable block before the first DROP block of the conversation, outside assistant turns."""
    # Responses: a marker on a string-content message would turn it into a parts list on this request
    # only; next turn, as history, it is a string again — a wire flip (I2). Such messages are skipped.
    responses = not is_chat(ir)
    flat = [
        (m_index, b_index, message.role, block)
        for m_index, message in enumerate(ir.messages)
        if not (responses and message.content_form == "string")
        for b_index, block in enumerate(message.blocks)
    ]
    first_drop = next((i for i, item in enumerate(flat) if item[3].band is Band.DROP), len(flat))
    for m_index, b_index, role, block in reversed(flat[:first_drop]):
        if markable(block, role):
            return "messages", m_index, b_index
    return None


class OpenAIEngine(OpenAICompatEngine):
    """Engine adapter for OpenAI Chat Completions (see module docstring)."""

    profile = EngineProfile(
        name="openai",
        caching="automatic",
        max_breakpoints=4,  # gpt-5.6+ only
        read_multiplier=0.1,  # third-party price tables for 5.6 (§2.4); older guides: "up to 90%"
        write_multiplier=1.25,  # gpt-5.6+: "cache writes cost 1.25x" (§2.4); older models report none
    )
    stream_options_accepted = True

    def places_breakpoints(self, model: object) -> bool:
        """Whether requests to ``model`` carry telos' explicit breakpoints (gpt-5.6 and later): the
        cache then reads at those anchors, not at any token prefix (``supports_breakpoints``)."""
        return supports_breakpoints(model)

    def plan(
        self,
        ir: TelosIR,
        hints: TelosHints,
        *,
        reuse: PrefixTables | None = None,
        fork: int | None = None,
        final: int | None = None,
    ) -> EmitPlan:
        """Key, options and breakpoints for ``ir`` (see module docstring)."""
        params = ir.params
        chat = is_chat(ir)
        extras = stream_usage_extras(params) if chat else {}
        notes: list[str] = []
        if "prompt_cache_key" in params:
            notes.append("kept the caller's prompt_cache_key")
        else:
            extras["prompt_cache_key"] = prompt_cache_key(ir, hints.isolation)
        caller = caller_breakpoints(ir)
        model = params.get("model")
        if not supports_breakpoints(model):
            notes.append(f"model {model!r} predates gpt-5.6: no prompt_cache_options or breakpoints sent")
            return EmitPlan(breakpoints=caller, extras=extras, notes=tuple(notes))
        caller_options = params.get("prompt_cache_options")
        if "prompt_cache_options" in params:
            explicit = isinstance(caller_options, Mapping) and caller_options.get("mode") == "explicit"
            mode = "explicit" if explicit else "implicit"
            notes.append("kept the caller's prompt_cache_options")
        else:
            mode = "implicit"
            options: dict[str, str] = {"mode": mode}
            if hints.ttl == "30m" or (hints.ttl == "12h" and not chat):
                if params.get("prompt_cache_retention") is not None:
                    notes.append(
                        "prompt_cache_options.ttl withheld: the caller sent prompt_cache_retention and "
                        "OpenAI may reject both on one request"
                    )
                else:
                    options["ttl"] = hints.ttl
            extras["prompt_cache_options"] = options
        ours = self._breakpoints(ir, hints, _WRITES[mode] - len(caller), caller)
        if len(caller) >= _WRITES[mode]:
            notes.append(f"the caller's {len(caller)} breakpoints fill the {mode}-mode budget; none added")
        breakpoints = sorted((*caller, *ours), key=_render_order)
        return EmitPlan(breakpoints=tuple(breakpoints), extras=extras, notes=tuple(notes))

    def parts_roles(self, ir: TelosIR) -> frozenset[str]:
        """On gpt-5.6+ the roles a breakpoint can sit on always carry parts (see ``PARTS_ROLES``)."""
        return PARTS_ROLES if supports_breakpoints(ir.params.get("model")) else frozenset()

    @staticmethod
    def _breakpoints(
        ir: TelosIR, hints: TelosHints, slots: int, caller: tuple[Breakpoint, ...]
    ) -> list[Breakpoint]:
        taken = {(bp.segment, bp.message, bp.block) for bp in caller}
        stable_ttl = "12h" if hints.ttl == "12h" else None
        candidates = (
            ("BP-X", _conversation_end(ir), None),
            # Responses ``instructions`` is a string: no breakpoint can sit on it.
            ("BP-R", _last_system(ir, Band.FOLD) if is_chat(ir) else None, stable_ttl),
            ("BP-S", _last_system(ir, Band.PIN) if is_chat(ir) else None, stable_ttl),
        )
        chosen: list[Breakpoint] = []
        for name, location, ttl in candidates:
            if len(chosen) >= slots:
                break
            if location is None or location in taken:
                continue
            segment, message, block = location
            chosen.append(Breakpoint(name=name, segment=segment, message=message, block=block, ttl=ttl))
            taken.add(location)
        return chosen


#: Roles a breakpoint can sit on (never assistant output): with breakpoints on, their string content
#: is always sent as one text part, so the turn that marks a message and the turns after it send
#: the same shape (docs/engines.md).
PARTS_ROLES = frozenset({"user", "tool", "system", "developer"})


def _render_order(bp: Breakpoint) -> tuple[int, int, int]:
    return (0 if bp.segment == "system" else 1), (bp.message if bp.message is not None else -1), bp.block
