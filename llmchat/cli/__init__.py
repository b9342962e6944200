"""The `llmchat` command line (`python -m llmchat`, the ``llmchat`` console script).

`commands` holds `main`, the parser and the `demo`, `chat`, `probe` and `wire`
commands; `proxy_command` the `proxy` command's options and serving; `routed`
serving a routing config (``proxy --config``) and re-reading it on SIGHUP;
`workers` the gunicorn options and hand-off (imports `llmchat.proxy` only when
the command runs, so the command line starts without the proxy or gunicorn);
`env` the API-key reading every command shares. This package may import any
other part of llmchat (it sits on top); nothing in llmchat imports it but
`llmchat.__main__`.
"""

from __future__ import annotations

from .commands import main

__all__ = ["main"]
