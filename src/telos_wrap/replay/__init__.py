"""Replay recorded agent sessions through the real SDKs and the engine emulator, and compare strategies.

The room's modules, each imported by its own name (this package re-exports nothing, so importing
one of them never loads the others, the SDKs or the emulator):

* ``runner`` — ``replay()``, ``patched()``, the strategies (``AS_SENT``, ``AUTO_CACHING``,
  ``TELOS``), ``load_sessions()``, ``demo_path()``: recorded requests through the real SDK to a
  fresh emulator, once per strategy.
* ``results`` — ``ReplayedTurn``, ``RunResult``, ``Prices``: what a replay measured.
* ``comparison`` — ``compare()``, ``run_demo()``: strategies side by side; ``report`` prints them.
* ``responses`` — Chat-shaped traces as Responses requests, and the Responses careless harness.
* ``pruned`` — envelopes a sender pruned from past turns, read off recorded requests.
"""
