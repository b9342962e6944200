"""`llmchat proxy`'s log lines on stderr: each names its request's ``x-request-id``."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
import requests

from llmchat.cli.logs import LOG_FORMAT, configure_logging
from llmchat.proxy.request_scope import RequestScope, enter, leave
from llmchat.testing import ScriptedServer

from ..proxy.support import cut_stream
from ..support.proxy_servers import serve_proxy

WAIT = 10.0


def test_under_gunicorn_a_line_logged_mid_stream_names_the_request(tmp_path: Path) -> None:
    pytest.importorskip("gunicorn", reason="needs the proxy extra (gunicorn)")
    with ScriptedServer([cut_stream()]) as upstream_url:
        workers = ("--workers", "1", "--threads", "2")
        with serve_proxy("gunicorn", upstream_url, tmp_path, gunicorn_args=workers) as served:
            with requests.post(
                served.url + "/api/chat",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"x-request-id": "cli-cut-1"},
                stream=True,
                timeout=WAIT,
            ) as answer:
                last = [json.loads(line) for line in answer.iter_lines() if line][-1]
            assert "error" in last
            assert served.log is not None
            line = served.log.wait_for("[cli-cut-1]")
    assert " WARNING llmchat.proxy [cli-cut-1] upstream failed (" in line


def test_the_format_names_the_request_and_a_configured_root_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = logging.getLogger()
    # Under pytest the root logger has handlers: the command leaves them as they are.
    assert root.handlers and configure_logging("info") is False
    with pytest.raises(ValueError, match="log level"):
        configure_logging("loud")
    # A root with no handler (the command's own process) gets the one stderr handler.
    monkeypatch.setattr(root, "handlers", [])
    stderr = io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)
    llmchat_logger = logging.getLogger("llmchat")
    level = llmchat_logger.level
    try:
        assert configure_logging("info") is True
        [handler] = root.handlers
        assert handler.formatter is not None and handler.formatter._fmt == LOG_FORMAT
        token = enter(RequestScope("req_abc"))
        try:
            logging.getLogger("llmchat.proxy").info("inside")
        finally:
            leave(token)
        logging.getLogger("llmchat.proxy").info("outside")
        logging.getLogger("urllib3").info("a library's INFO line stays out")
    finally:
        llmchat_logger.setLevel(level)  # setLevel: the loggers' cached levels are reset too
    first, second = stderr.getvalue().splitlines()
    assert first.endswith(" INFO llmchat.proxy [req_abc] inside")
    assert second.endswith(" INFO llmchat.proxy [-] outside")
