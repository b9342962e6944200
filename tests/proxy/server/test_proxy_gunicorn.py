"""`llmchat proxy --workers N --threads M`: what only the gunicorn path has.

Several processes appending usage to one file, a graceful SIGTERM, a quick
SIGINT, the settings gunicorn is given, and the clear error without the
``proxy`` extra. Behaviour shared with the embedded server is in
`test_proxy_servers`.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import requests
from gunicorn.workers.gthread import ThreadWorker

from llmchat.cli import main
from llmchat.proxy.server.gunicorn_app import WorkerOptions, gunicorn_settings
from llmchat.proxy.usage.backend import open_store
from llmchat.testing import ChatResponder, Reply, ScriptedServer, WaitFor, Write

from ...support.proxy_servers import WAIT, serve_proxy, stop
from ...support.usage import KINDS, fresh_target

TEXT = "Hello from the loopback server, twice as long as a chunk."
MESSAGES = [{"role": "user", "content": "say hi"}]


def _chunk(content: str | None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    event = {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta}]}
    event["choices"][0]["finish_reason"] = finish
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _two_workers_at_once_then_six(
    tmp_path: Path, *, usage_log: Path | None, extra: tuple[str, ...] = ()
) -> None:
    """Eight /api/chat requests through two worker processes, the first two for
    certain in different processes (one thread and one connection per worker,
    both held at the upstream at once)."""
    gate = threading.Event()
    held = Reply.sse(
        [{"choices": [{"index": 0, "delta": {"content": "held"}, "finish_reason": "stop"}]}],
        before_headers=[WaitFor(gate, WAIT)],
    )
    upstream = ScriptedServer([held, held]).start()
    args = ("--workers", "2", "--threads", "1", "--max-connections", "1", *extra)
    answers: list[int] = []

    def ask() -> None:
        reply = requests.post(
            proxy.url + "/api/chat",
            json={"model": "m", "messages": MESSAGES, "stream": False},
            timeout=WAIT,
        )
        answers.append(reply.status_code)

    try:
        with serve_proxy(
            "gunicorn", upstream.url, tmp_path, usage_log=usage_log, gunicorn_args=args
        ) as proxy:
            both = [threading.Thread(target=ask) for _ in range(2)]
            for thread in both:
                thread.start()
            in_flight = upstream.wait_for_requests(2, WAIT)
            gate.set()
            for thread in both:
                thread.join(WAIT)
            upstream.set_script(ChatResponder(TEXT))
            for _ in range(6):
                ask()
    finally:
        gate.set()
        upstream.stop()
    assert in_flight, "two requests were never at the upstream at once: one worker served both"
    assert answers == [200] * 8


def test_several_workers_append_whole_usage_lines_to_one_file(tmp_path: Path):
    usage = tmp_path / "usage.jsonl"
    _two_workers_at_once_then_six(tmp_path, usage_log=usage)
    lines = usage.read_bytes().splitlines()
    events = [json.loads(line) for line in lines]  # a torn append would not parse
    chats = [e for e in events if e["route"] == "/api/chat"]
    assert len(chats) == 8 and all(e["ok"] for e in chats)
    assert len({e["request_id"] for e in events}) == len(events)


@pytest.mark.parametrize("kind", KINDS)
def test_several_workers_record_usage_in_one_store(tmp_path: Path, kind: str):
    target = fresh_target(kind, tmp_path)
    _two_workers_at_once_then_six(tmp_path, usage_log=None, extra=("--usage-db", target))
    store = open_store(target)
    try:
        [chats] = [t for t in store.totals("model") if t.key == "m"]
    finally:
        store.close()
    assert (chats.requests, chats.ok, chats.failed) == (8, 8, 0)
    assert chats.content_bytes == len("held") * 2 + len(TEXT) * 6


def test_sigterm_lets_an_inflight_stream_finish(tmp_path: Path):
    release = threading.Event()
    stream = Reply(
        200,
        {"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[
            Write(_chunk("first ")),
            WaitFor(release, WAIT),
            Write(_chunk("second")),
            Write(_chunk(None, "stop")),
            Write(b"data: [DONE]\n\n"),
        ],
    )
    upstream = ScriptedServer([stream]).start()
    try:
        with serve_proxy("gunicorn", upstream.url, tmp_path) as proxy:
            body = {"model": "m", "messages": MESSAGES, "stream": True}
            with requests.post(
                proxy.url + "/api/chat", json=body, stream=True, timeout=WAIT
            ) as answer:
                lines = answer.iter_lines()
                first = json.loads(next(lines))
                assert proxy.process is not None and proxy.log is not None
                proxy.process.send_signal(signal.SIGTERM)
                proxy.log.wait_for("Handling signal: term")
                release.set()  # only now, with the shutdown under way, may it go on
                rest = [json.loads(line) for line in lines if line]
            [event] = proxy.usage.wait(1, route="/api/chat")
            assert proxy.process.wait(WAIT) == 0
    finally:
        release.set()
        upstream.stop()
    assert first["message"]["content"] == "first "
    assert "".join(p["message"]["content"] for p in rest) == "second"
    assert rest[-1]["done"] is True and rest[-1]["done_reason"] == "stop"
    assert event["ok"] is True and event["status"] == 200


def test_sigint_stops_at_once_and_cleanly(tmp_path: Path):
    with ScriptedServer(ChatResponder(TEXT)) as url:
        with serve_proxy("gunicorn", url, tmp_path) as proxy:
            assert proxy.process is not None and proxy.log is not None
            stop(proxy.process, signal.SIGINT)
            code = proxy.process.returncode
            log = proxy.log
    # The fixture has checked the log for tracebacks; SIGINT is gunicorn's quick stop.
    assert code == 0
    assert "Handling signal: int" in log.text


# -- settings, options, and the missing extra -------------------------------------


def test_gunicorn_settings_from_the_options():
    options = WorkerOptions(workers=3, threads=8, keepalive=90, max_connections=100)
    settings = gunicorn_settings("127.0.0.1", 8080, options)
    assert settings["bind"] == ["127.0.0.1:8080"]
    # gthread, with the embedded server's read deadlines (gunicorn_worker)
    assert issubclass(settings["worker_class"], ThreadWorker)
    assert settings["worker_class"].limits.header_timeout == options.header_timeout == 10.0
    assert (settings["limit_request_fields"], settings["limit_request_field_size"]) == (100, 65536)
    assert (settings["workers"], settings["threads"]) == (3, 8)
    assert settings["worker_connections"] == 100
    assert settings["keepalive"] == 90
    assert settings["preload_app"] is False  # each worker builds its own upstream
    assert settings["accesslog"] is None  # nothing about requests or their keys is logged
    assert gunicorn_settings("::1", 80, WorkerOptions())["bind"] == ["[::1]:80"]
    # Never fewer connections than threads, which would leave threads idle.
    assert WorkerOptions(threads=64, max_connections=10).worker_connections == 64


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("workers", 0, ValueError),
        ("threads", -1, ValueError),
        ("keepalive", -1, ValueError),
        ("graceful_timeout", 0, ValueError),
        ("max_connections", 0, ValueError),
        ("threads", True, TypeError),
        ("workers", "2", TypeError),
        ("header_timeout", 0, ValueError),
        ("body_timeout", "60", TypeError),
        ("send_timeout", float("inf"), ValueError),
    ],
)
def test_worker_options_reject_bad_values_by_name(name: str, value: Any, error: type):
    with pytest.raises(error, match=name):
        WorkerOptions(**{name: value})


@pytest.mark.parametrize("option", ["--workers", "--threads"])
def test_worker_options_on_the_command_line_are_checked(option: str, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["proxy", "--upstream", "http://127.0.0.1:9/v1", option, "0"])
    assert exit_info.value.code == 2
    assert f"argument {option}: must be >= 1, got 0" in capsys.readouterr().err


def test_without_gunicorn_workers_are_a_clear_error_before_binding(monkeypatch, capsys):
    for name in ("gunicorn", "gunicorn.app", "gunicorn.app.base"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails, as if not installed
    monkeypatch.delitem(sys.modules, "llmchat.proxy.server.gunicorn_app")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]  # binding it would fail differently
        code = main(
            ["proxy", "--upstream", "http://127.0.0.1:9/v1", "--port", str(port), "--workers", "2"]
        )
    err = capsys.readouterr().err
    assert code == 2
    assert "gunicorn, which is not installed: pip install 'llmchat[proxy]'" in err
    assert "in use" not in err
