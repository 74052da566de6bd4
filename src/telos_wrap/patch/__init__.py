"""``patch()`` / ``unpatch()``: install the wrapt wrappers on whatever SDKs are importable.

Targets are data (``TARGETS``). Each is resolved with ``importlib`` and wrapped on its own: a
missing module or attribute (an older or newer SDK) is skipped and logged, never fatal. A module
holding targets that is not imported yet is not imported here: a wrapt post-import hook patches its
targets when the application (or the SDK's own lazy loading of a resource) first imports it.
Importing ``openai`` into an Anthropic-only process would load ~1,100 modules and leave ~108,000
objects for every full garbage collection to walk, for the process' lifetime; importing the
resources of ``client.beta`` into an application that uses only ``client.chat`` would load ~560
modules and ~56,000 objects. Patching is idempotent and thread-safe; ``unpatch()`` puts back the
exact original function objects and never raises. If another library wrapped a method *over* ours
since, ours is switched off in place instead, so theirs keeps working.

A method another library already wrapped with wrapt (OpenLLMetry's instrumentors, say) gets
telos' wrapper *beneath* theirs (their ``FunctionWrapper.__wrapped__`` becomes ours), not over it:
their ``unwrap()`` replaces the method by the outermost wrapper's ``__wrapped__`` whoever owns it,
which would otherwise remove telos' wrapper; this way it removes exactly theirs, and ``unpatch()``
takes ours out of the chain the same way.

``record()`` without ``patch()`` holds the request and response wrappers in observe-only mode
(``hold_observer_wrappers`` / ``release_observer_wrappers``): nothing is rewritten, the recorder
sees every request as the SDK sends it. ``is_patched()`` is about ``patch()`` only.
"""

from __future__ import annotations

import enum
import importlib
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import wrapt

from telos_wrap.config import PatchConfig, current_config, rewriting, set_config, set_rewriting, updated
from telos_wrap.patch import lm15
from telos_wrap.patch.litellm import completion_wrapper
from telos_wrap.patch.wrappers import (
    async_parse_wrapper,
    entry_wrapper,
    make_async_request_wrapper,
    make_request_wrapper,
    parse_wrapper,
)
from telos_wrap.private_api import sdk_module, wrapper_parent

__all__ = [
    "KEEP",
    "TARGETS",
    "Target",
    "coverage",
    "hold_observer_wrappers",
    "is_patched",
    "patch",
    "release_observer_wrappers",
    "unpatch",
]

logger = logging.getLogger("telos_wrap")


#: Makes the wrapt wrapper for a target, given its SDK's name.
WrapperFactory = Callable[[str], Callable[..., Any]]


def _same_for_every_sdk(wrapper: Callable[..., Any]) -> WrapperFactory:
    def make(sdk: str) -> Callable[..., Any]:
        return wrapper

    return make


ENTRY = _same_for_every_sdk(entry_wrapper)
PARSE = _same_for_every_sdk(parse_wrapper)
ASYNC_PARSE = _same_for_every_sdk(async_parse_wrapper)
LITELLM = _same_for_every_sdk(completion_wrapper)


@dataclass(frozen=True, slots=True)
class Target:
    """One method to wrap: ``module``, ``Class.method``, the factory of its wrapper, and whether
    ``record()`` without ``patch()`` needs it (observe-only mode: the request layer sees bodies,
    parsing sees usage)."""

    sdk: str
    module: str
    qualname: str
    make: WrapperFactory
    observer: bool = False


def _entries(sdk: str, module: str, classes: tuple[str, ...], methods: tuple[str, ...]) -> list[Target]:
    return [Target(sdk, module, f"{cls}.{method}", ENTRY) for cls in classes for method in methods]


TARGETS: tuple[Target, ...] = (
    # Entry points: only take telos_hint= out (the rewrite happens once, in request()).
    *_entries(
        "anthropic",
        "anthropic.resources.messages.messages",
        ("Messages", "AsyncMessages"),
        ("create", "stream", "parse", "count_tokens"),
    ),
    *_entries(
        "anthropic",
        "anthropic.resources.beta.messages.messages",
        ("Messages", "AsyncMessages"),
        ("create", "stream", "parse", "count_tokens", "tool_runner"),
    ),
    *_entries(
        "openai",
        "openai.resources.chat.completions.completions",
        ("Completions", "AsyncCompletions"),
        ("create", "parse", "stream"),
    ),
    *_entries(
        "openai",
        "openai.resources.responses.responses",
        ("Responses", "AsyncResponses"),
        ("create", "stream", "parse", "compact"),
    ),
    *_entries(
        "openai",
        "openai.resources.responses.input_tokens",
        ("InputTokens", "AsyncInputTokens"),
        ("count",),
    ),
    # ``client.beta.responses`` (openai 3.x): the same endpoints with ``?beta=true`` (routed by path);
    # absent from openai 2.x, so skipped there.
    *_entries(
        "openai",
        "openai.resources.beta.responses.responses",
        ("Responses", "AsyncResponses"),
        ("create", "compact"),
    ),
    *_entries(
        "openai",
        "openai.resources.beta.responses.input_tokens",
        ("InputTokens", "AsyncInputTokens"),
        ("count",),
    ),
    # The one method every request passes through once per logical call (retries inside).
    Target(
        "anthropic",
        sdk_module("anthropic", "base_client"),
        "SyncAPIClient.request",
        make_request_wrapper,
        observer=True,
    ),
    Target(
        "anthropic",
        sdk_module("anthropic", "base_client"),
        "AsyncAPIClient.request",
        make_async_request_wrapper,
        observer=True,
    ),
    Target(
        "openai",
        sdk_module("openai", "base_client"),
        "SyncAPIClient.request",
        make_request_wrapper,
        observer=True,
    ),
    Target(
        "openai",
        sdk_module("openai", "base_client"),
        "AsyncAPIClient.request",
        make_async_request_wrapper,
        observer=True,
    ),
    # Where every response object is made, raw or not.
    Target("anthropic", sdk_module("anthropic", "response"), "APIResponse.parse", PARSE, observer=True),
    Target(
        "anthropic", sdk_module("anthropic", "response"), "AsyncAPIResponse.parse", ASYNC_PARSE, observer=True
    ),
    Target("openai", sdk_module("openai", "response"), "APIResponse.parse", PARSE, observer=True),
    Target("openai", sdk_module("openai", "response"), "AsyncAPIResponse.parse", ASYNC_PARSE, observer=True),
    # ``with_raw_response`` returns a LegacyAPIResponse in anthropic 0.x and openai < 3 (its parse()
    # is synchronous, also on async clients); absent from newer lines, so skipped there.
    Target(
        "anthropic",
        sdk_module("anthropic", "legacy_response"),
        "LegacyAPIResponse.parse",
        PARSE,
        observer=True,
    ),
    Target(
        "openai", sdk_module("openai", "legacy_response"), "LegacyAPIResponse.parse", PARSE, observer=True
    ),
    # LiteLLM's own providers (``patch/litellm.py``): its module-level ``completion``, under both names
    # (``acompletion`` runs ``litellm.main.completion``; applications call ``litellm.completion``).
    Target("litellm", "litellm.main", "completion", LITELLM),
    Target("litellm", "litellm", "completion", LITELLM),
    # DSPy's built-in HTTP client (``patch/lm15.py``): lm15, vendored inside DSPy >= 3.4, sends every
    # chat request of ``dspy.LM``'s native route through one of these (sync and async, whole or SSE).
    Target(
        "dspy",
        "dspy._vendor.lm15.providers.base",
        "BaseProviderLM._send",
        _same_for_every_sdk(lm15.send_wrapper),
    ),
    Target(
        "dspy",
        "dspy._vendor.lm15.providers.base",
        "BaseProviderLM._stream_raw",
        _same_for_every_sdk(lm15.stream_wrapper),
    ),
    Target(
        "dspy",
        "dspy._vendor.lm15.providers.async_base",
        "AsyncBaseProviderLM._send",
        _same_for_every_sdk(lm15.async_send_wrapper),
    ),
    Target(
        "dspy",
        "dspy._vendor.lm15.providers.async_base",
        "AsyncBaseProviderLM._stream_raw",
        _same_for_every_sdk(lm15.async_stream_wrapper),
    ),
)


def _wrapper_for(target: Target) -> Callable[..., Any]:
    return target.make(target.sdk)


class _Switch:
    """wrapt's ``enabled=`` callable: lets ``unpatch()`` switch off a wrapper it cannot remove."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True

    def __call__(self) -> bool:
        return self.on


@dataclass(slots=True)
class _Installed:
    owner: Any  # a class, or a module for a module-level function
    attribute: str
    original: Any
    wrapper: Any
    switch: _Switch
    #: Another library's wrapt wrapper that ours was installed beneath (see module docstring).
    host: Any = None


_lock = threading.RLock()
_installed: dict[Target, _Installed] = {}
_observer_holds = 0  # active record() contexts


def _resolve(target: Target) -> tuple[Any, str, Any] | None:
    try:
        module = importlib.import_module(target.module)
    except ImportError:
        return None
    class_name, _, attribute = target.qualname.partition(".")
    if not attribute:  # a module-level function (LiteLLM's ``completion``)
        return (
            (module, class_name, vars(module)[class_name]) if callable(vars(module).get(class_name)) else None
        )
    owner = getattr(module, class_name, None)
    # vars(), not getattr(): reading a function through the class would bind it (wrapt's resolve_path).
    if not isinstance(owner, type) or attribute not in vars(owner):
        return None
    return owner, attribute, vars(owner)[attribute]


class _Keep(enum.Enum):
    """The default of every ``patch()`` option: keep the value in effect (module docstring)."""

    KEEP = "keep the current value"

    def __repr__(self) -> str:
        return "KEEP"


#: ``patch()``'s default for every option: the value in effect stays.
KEEP = _Keep.KEEP


def patch(
    *,
    strict: bool | _Keep = KEEP,
    engines: Mapping[str, str] | _Keep | None = KEEP,
    enabled: bool | _Keep = KEEP,
    refpool_threshold: int | _Keep | None = KEEP,
    keep_past_drop: bool | _Keep = KEEP,
    only_what_pays: bool | _Keep = KEEP,
    time_budget: float | _Keep | None = KEEP,
    fleet_learning: bool | _Keep = KEEP,
    output_filter: Any = KEEP,
    context: Any = KEEP,
) -> dict[str, bool]:
    """Patch the installed ``anthropic`` and ``openai`` SDKs (and LiteLLM's own providers and DSPy's
    built-in HTTP client, when they are imported: ``patch/litellm.py``, ``patch/lm15.py``).

    Every option is checked before anything is patched: an invalid one raises ``TelosOptionError``
    saying what is wrong and what is valid. An option left out keeps its current value — the default
    below on the first call, after ``unpatch()``; what an earlier ``patch()`` set, otherwise — so a
    second call changes only the options it names (``patch(engines=...)`` then ``patch(strict=True)``
    keeps the engines; a new ``engines=`` replaces the whole mapping). An SDK (or one of its resource
    modules) not imported yet is patched when it is imported (nothing is imported here).

    Args:
        strict: raise ``TelosStageError`` when telos fails instead of sending the original request
            (default False).
        engines: ``{base_url_or_host: engine}`` for OpenAI-compatible servers telos cannot recognise
            (``{"http://gpu-box:8000/v1": "vllm"}``); self-hosted engines are never guessed. Engine
            names: the built-ins and those added with ``register_engine`` (default: none).
        enabled: False makes every call pass through untouched while staying patched (default True).
        refpool_threshold: system text longer than this goes to the ref-pool (``None``: never;
            default 2048).
        keep_past_drop: keep past turns' per-turn envelopes as history instead of pruning them
            (default False).
        only_what_pays: send a request exactly as the SDK built it when nothing in it can be cached
            (below the model's minimum cacheable prefix, docs/engines.md). ``False`` rewrites every
            request, however small (e.g. to study marker placement on a tiny prompt). Default True.
        time_budget: CPU seconds telos may spend preparing one request (the preparing thread's;
            a slow store has its own timeout);
            past it the request goes out as the SDK built it, counted as stage ``'budget'`` in
            ``failure_counts()`` and logged (docs/reliability.md). ``None``: no budget; default 2.0.
        fleet_learning: a new conversation starts with what earlier conversations of the same
            system-prompt template learned was volatile (verified before use), and publishes what
            it learns, in its session store under the ``isolation`` hint's namespace
            (docs/sessions.md, "Fleet learning"). Default True.
        output_filter: filter tool results before they are sent: ``"off"`` (default), ``"safe"``,
            ``"aggressive"`` or a ``telos_wrap.OutputFilter``; a session's or a call's
            ``output_filter`` overrides it. A result is filtered once and sent with the same bytes on
            every later request of its conversation (docs/output-filter.md).
        context: fold old tool results under pressure in every session without a policy of its
            own: a dict written as Anthropic's ``clear_tool_uses_20250919`` edit, a
            ``ContextPolicy``, or ``None`` (the default: nothing is ever folded). docs/sessions.md,
            "Context under pressure".

    Returns:
        ``coverage()``: which targets are wrapped.
    """
    given = {
        "strict": strict,
        "engines": engines,
        "enabled": enabled,
        "refpool_threshold": refpool_threshold,
        "keep_past_drop": keep_past_drop,
        "only_what_pays": only_what_pays,
        "time_budget": time_budget,
        "fleet_learning": fleet_learning,
        "output_filter": output_filter,
        "context": context,
    }
    with _lock:
        base = current_config() if rewriting() else PatchConfig()
        config = updated(base, {name: value for name, value in given.items() if value is not KEEP})
        set_config(config)
        set_rewriting(True)
        _install(TARGETS)
        return coverage()


#: Modules with a post-import hook registered (wrapt cannot unregister one: the hook checks the mode).
_hooked: set[str] = set()


def _on_import(module: Any) -> None:
    """wrapt post-import hook: a module holding targets was imported; patch them as the mode wants."""
    try:
        with _lock:
            if rewriting():
                wanted: list[Target] | tuple[Target, ...] = TARGETS
            elif _observer_holds:
                wanted = _observer_targets()
            else:
                return
            _install([target for target in wanted if target.module == module.__name__])
    except Exception:  # an import of the application's must never fail because of telos
        logger.warning("telos_wrap could not patch %s when it was imported", module, exc_info=True)


def _install(targets: tuple[Target, ...] | list[Target]) -> None:
    """Wrap every target not wrapped yet (call with ``_lock`` held); defer modules not imported yet."""
    for name in dict.fromkeys(target.module for target in targets):
        if name not in sys.modules and name not in _hooked:
            _hooked.add(name)
            wrapt.register_post_import_hook(_on_import, name)
    for target in targets:
        if target in _installed or target.module not in sys.modules:
            continue
        try:
            resolved = _resolve(target)
            if resolved is None:
                logger.debug(
                    "telos_wrap: %s.%s not present in this SDK version; skipped",
                    target.module,
                    target.qualname,
                )
                continue
            owner, attribute, original = resolved
            switch = _Switch()
            host = original if isinstance(original, wrapt.FunctionWrapper) else None
            if host is not None:  # another library's wrapper: ours goes beneath it
                original = host.__wrapped__
            wrapper = wrapt.FunctionWrapper(original, _wrapper_for(target), enabled=switch)
            if host is not None:
                host.__wrapped__ = wrapper
            else:
                setattr(owner, attribute, wrapper)
            _installed[target] = _Installed(owner, attribute, original, wrapper, switch, host)
        except Exception:  # one broken target never stops the others
            logger.warning("telos_wrap could not patch %s.%s", target.module, target.qualname, exc_info=True)


def unpatch() -> None:
    """Restore every original function object. Never raises.

    A ``record()`` still active keeps observing: its observe-only wrappers are put back.
    """
    with _lock:
        set_rewriting(False)
        _uninstall()
        set_config(PatchConfig(enabled=current_config().enabled))
        if _observer_holds:
            _install(_observer_targets())


def _observer_targets() -> list[Target]:
    return [target for target in TARGETS if target.observer]


def hold_observer_wrappers() -> None:
    """Make sure requests are observed (``record()`` calls this on entry); never raises."""
    global _observer_holds
    with _lock:
        _observer_holds += 1
        if not rewriting():
            _install(_observer_targets())


def release_observer_wrappers() -> None:
    """Undo one :func:`hold_observer_wrappers`; the last one out removes observe-only wrappers."""
    global _observer_holds
    with _lock:
        _observer_holds = max(0, _observer_holds - 1)
        if not _observer_holds and not rewriting():
            _uninstall()


def _inner(wrapper: Any) -> Any:
    return getattr(wrapper, "__wrapped__", None)


def _uninstall() -> None:
    """Remove every installed wrapper (call with ``_lock`` held). Never raises."""
    for target, item in list(_installed.items()):
        try:
            item.switch.on = False  # whatever is left of it below passes calls through
            current = vars(item.owner).get(item.attribute)
            # OpenTelemetry's unwrap() reads the method through the class, which binds it: what it
            # leaves is a bound wrapper whose parent is ours.
            if current is item.wrapper or wrapper_parent(current) is item.wrapper:
                setattr(item.owner, item.attribute, item.original)
            elif current is not None and current is item.host and _inner(current) is item.wrapper:
                current.__wrapped__ = item.original  # out of the other library's chain
            else:
                # Someone wrapped over us: removing ours would remove theirs too. Ours is off.
                logger.info(
                    "telos_wrap: %s.%s is wrapped by another library; telos' wrapper disabled in place",
                    target.module,
                    target.qualname,
                )
        except Exception:
            logger.warning(
                "telos_wrap could not unpatch %s.%s", target.module, target.qualname, exc_info=True
            )
        _installed.pop(target, None)


def is_patched() -> bool:
    """True while ``patch()`` is in effect (observe-only wrappers of ``record()`` do not count)."""
    return rewriting()


def coverage() -> dict[str, bool]:
    """Which entry points and layers are wrapped right now, as ``{"module:Class.method": bool}``.

    The targets of a module not imported yet (an SDK the application has not imported, a resource
    such as ``client.beta.responses`` it has not used) are ``False`` until it is.
    """
    with _lock:
        return {f"{t.module}:{t.qualname}": t in _installed for t in TARGETS}
