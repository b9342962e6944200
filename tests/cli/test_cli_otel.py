"""`llmchat proxy --otel`: spans exported as the standard ``OTEL_*`` environment says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
import requests

from llmchat.cli import main
from llmchat.testing import ChatResponder, ScriptedServer

from ..support.paths import REPO_ROOT
from ..support.proxy_servers import ProcessLog

pytest.importorskip("opentelemetry.sdk.trace", reason="needs the otel extra")

WAIT = 10.0


def test_otel_exports_each_model_call_and_flushes_at_the_end() -> None:
    with ScriptedServer(ChatResponder()) as upstream_url:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LLMCHAT_", "OTEL_"))}
        env["PYTHONPATH"] = str(REPO_ROOT)
        env["OTEL_TRACES_EXPORTER"] = "console"  # the SDK's own exporter, to stdout
        env["OTEL_SERVICE_NAME"] = "proxy-under-test"
        command = [sys.executable, "-m", "llmchat", "proxy", "--otel", "--log-level", "info"]
        command += ["--upstream", upstream_url, "--port", "0"]
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO_ROOT,
        )
        log = ProcessLog(process.stderr)
        try:
            url = log.wait_for("llmchat proxy: serving ").split("serving ", 1)[1].split()[0]
            answer = requests.post(
                url + "/api/chat",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"x-request-id": "otel-cli-1"},
                timeout=WAIT,
            )
            assert answer.status_code == 200
            # The access line is logged once the answer is sent: it names the request.
            assert '"POST /api/chat HTTP/1.1" 200' in log.wait_for("[otel-cli-1]")
        finally:
            process.send_signal(signal.SIGINT)  # the app's close() shuts the provider down
            # Not communicate(): `log` reads stderr (and closes it at its end), and two
            # readers of one pipe raced (EBADF). stdout is one span, well within a pipe's buffer.
            try:
                process.wait(timeout=WAIT + 20)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait(timeout=WAIT)
                stdout = process.stdout.read() if process.stdout is not None else ""
                if process.stdout is not None:
                    process.stdout.close()
                log.join()
    assert process.returncode == 0, log.text
    [span] = _json_objects(stdout)  # flushed at the end: nothing waited for the batch's delay
    assert span["name"] == "chat m" and span["kind"] == "SpanKind.SERVER"
    assert span["attributes"]["llmchat.request_id"] == "otel-cli-1"
    assert span["attributes"]["gen_ai.operation.name"] == "chat"
    assert span["resource"]["attributes"]["service.name"] == "proxy-under-test"


def _json_objects(text: str) -> list[dict[str, Any]]:
    """The console exporter's output: indented JSON objects one after another."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while (at := len(text) - len(text[at:].lstrip())) < len(text):
        obj, at = decoder.raw_decode(text, at)
        out.append(obj)
    return out


def test_an_unknown_exporter_ends_the_command_before_binding(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
    assert main(["proxy", "--otel", "--upstream", "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err
    assert "OTEL_TRACES_EXPORTER" in err and "carrier-pigeon" in err
