"""``telos-wrap dashboard``: a local page of where a conversation's cache broke and what telos saved.

Two sources: a recording (``telos_wrap.record``) or trace file, replayed through the real SDKs and the
built-in emulator (``from_replay``), or a Redis session store (``from_store_url``), which holds
counters, positions and digests only. ``page.render`` makes one self-contained HTML file (plotly.js
inlined: it opens offline); ``serve`` serves it on loopback. The values between them are plain
dataclasses (``model``). Needs ``pip install 'telos-wrap[dashboard]'`` (plotly, Jinja2).
"""

from telos_wrap.dashboard.model import BreakView, ConversationView, Dashboard, RequestPoint

__all__ = ["BreakView", "ConversationView", "Dashboard", "RequestPoint"]
