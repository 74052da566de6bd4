"""Record and replay: recordings and traces, replayed through the real SDKs and the emulator, compared.

The room's modules, each imported by its own name (this package re-exports nothing, so importing
one of them never loads the others, the SDKs or the emulator):

* ``recording`` — ``record()`` (exported as ``telos_wrap.record``) and its ``Recorder``: every
  request telos handles, with its usage, appended to a file as a trace, bodies redacted or hashed.
  It imports ``patch`` and ``ir`` only: ``import telos_wrap`` loads it and nothing else of the room.
* ``traces`` — the trace format (``TraceRequest``, ``load_trace``, ``group_sessions``,
  ``content_hashing``) and ``jitter()``, a request as a careless harness rebuilds it every turn.
  It imports no other module of the room.
* ``runner`` — ``replay()``, ``patched()``, the strategies (``AS_SENT``, ``AUTO_CACHING``,
  ``TELOS``), ``load_sessions()``, ``demo_path()``: recorded requests through the real SDK to a
  fresh emulator, once per strategy.
* ``results`` — ``ReplayedTurn``, ``RunResult``, ``Prices``: what a replay measured.
* ``comparison`` — ``compare()``, ``run_demo()``: strategies side by side; ``report`` prints them.
* ``responses`` — Chat-shaped traces as Responses requests, and the Responses careless harness.
* ``pruned`` — envelopes a sender pruned from past turns, read off recorded requests.

The pytest-facing side (budgets, cassettes, the careless-harness zoo) is ``telos_wrap.testing``,
built on this room; the command line is ``telos-wrap replay`` (``cli``). Import contracts in
``pyproject.toml`` keep the order above: report over comparison over runner, the runner over the
others, all over ``traces``.
"""
