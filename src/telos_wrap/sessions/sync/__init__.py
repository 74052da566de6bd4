"""Keeping a session's state in step with its store: the sans-IO plans and the sync and async drivers
that run them."""
