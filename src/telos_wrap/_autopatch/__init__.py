"""The directory ``telos-wrap run`` puts first on ``PYTHONPATH``: its ``sitecustomize`` patches the
application at start-up (``telos_wrap.autopatch``). Nothing here is imported by telos_wrap itself."""
