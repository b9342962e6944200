"""`llmchat proxy --config FILE`: refused before anything is bound, the one-upstream flags
refused beside it, the routed app built, and SIGHUP re-reading the file (in a real process).
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import llmchat.cli.routed as routed_command
import llmchat.proxy
from llmchat import OpenAICommon
from llmchat.cli import main
from llmchat.proxy.routing import KeyRing, RoutingConfig

from ..support.paths import REPO_ROOT

WAIT = 20.0
GOOD = """\
nodes:
  - {name: gpu-a, url: "http://127.0.0.1:9/v1"}
models:
  fast: [{model: m, nodes: [gpu-a]}]
keys:
  - {name: alice, key_env: ALICE_KEY, models: [fast]}
"""
BAD = """\
nodes:
  - {name: gpu-a, url: "ftp://127.0.0.1:9/v1", max_con: 2}
  - {name: gpu-a, url: "http://127.0.0.1:9/v1", dialect: grpc}
models:
  fast: [{model: m, nodes: [gpu-a]}, {model: m, nodes: [gpu-c], wait_ms: -1}]
"""


class FakeRouted(OpenAICommon):
    """Stands in for `RoutedUpstream`: a backend the app accepts, with `reload`."""

    def reload(self, config: RoutingConfig) -> None:
        self.reloaded = config


@pytest.fixture()
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ALICE_KEY", "sk-alice-SECRET")
    path = tmp_path / "routes.yaml"
    path.write_text(GOOD)
    return path


@pytest.fixture()
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the routed upstream or a server fails the test: a refusal comes before both."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("reached past the config check")

    monkeypatch.setattr(routed_command, "routed_upstream", refuse)
    monkeypatch.setattr(llmchat.proxy, "make_server", refuse)


@pytest.mark.usefixtures("nothing_starts")
def test_a_bad_file_is_refused_with_every_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "routes.yaml"
    path.write_text(BAD)
    assert main(["proxy", "--config", str(path), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert f"llmchat proxy: error: {path}: 6 errors:" in err
    for line in (
        "nodes[0].max_con: unknown key; did you mean 'max_conns'?",
        "nodes[0].url: 'ftp://127.0.0.1:9/v1' must start with http:// or https://",
        "nodes[1].dialect: 'grpc' is not one of openai, anthropic, responses, ollama, gemini",
        "nodes[1].name: duplicate 'gpu-a' (also nodes[0])",
        "models.fast[1].wait_ms: must be >= 0, got -1",
        "models.fast[1].nodes[0]: unknown node 'gpu-c'",
    ):
        assert f"\n  {line}" in err


@pytest.mark.usefixtures("nothing_starts")
def test_a_missing_file_or_key_is_refused(
    tmp_path: Path,
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert main(["proxy", "--config", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml: 1 error:\n  cannot read the file" in capsys.readouterr().err
    monkeypatch.delenv("ALICE_KEY")
    assert main(["proxy", "--config", str(config)]) == 2
    assert "keys[0].key_env: ALICE_KEY is not set" in capsys.readouterr().err


@pytest.mark.usefixtures("nothing_starts")
@pytest.mark.parametrize(
    "flags",
    [
        ["--upstream", "http://127.0.0.1:9/v1"],
        ["--model", "m"],
        ["--api-key-env", "K"],
        ["--upstream", "http://127.0.0.1:9/v1", "--model", "m"],
    ],
)
def test_the_one_upstream_flags_are_a_usage_error_beside_it(
    config: Path, flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["proxy", "--config", str(config), *flags]) == 2
    err = capsys.readouterr().err
    assert "--config cannot be combined with " + ", ".join(f for f in flags if f[:2] == "--") in err


def test_a_valid_file_builds_the_routed_app(
    config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LLMCHAT_API_URL", "http://127.0.0.1:9/v1")  # not a conflict
    monkeypatch.setenv("LLMCHAT_MODEL", "m")
    built: list[RoutingConfig] = []
    served: dict[str, Any] = {}

    def factory(routing: RoutingConfig, ledger: Any = None) -> FakeRouted:
        built.append(routing)
        return FakeRouted("http://127.0.0.1:9/v1")

    def serve(args: argparse.Namespace, app: Any, upstream: Any, over: str) -> int:
        served.update(app=app, upstream=upstream, over=over)
        served["handler"] = signal.getsignal(signal.SIGHUP)
        app.close()
        return 0

    monkeypatch.setattr(routed_command, "routed_upstream", factory)
    monkeypatch.setattr(routed_command, "serve", serve)
    before = signal.getsignal(signal.SIGHUP)
    assert main(["proxy", "--config", str(config), "--usage-log", os.devnull]) == 0
    [routing] = built
    assert routing.source == str(config) and [n.name for n in routing.nodes] == ["gpu-a"]
    app = served["app"]
    assert app.upstream.backend is served["upstream"]
    assert isinstance(app.keys, KeyRing) and app.keys.identify("sk-alice-SECRET").name == "alice"
    assert served["over"] == f"over 1 node from {config} (sha256 {routing.digest[:12]})"
    assert served["handler"] not in (before, signal.SIG_DFL)
    assert signal.getsignal(signal.SIGHUP) == before  # put back when serving ends


def test_under_workers_a_bad_edit_keeps_the_last_good_config(
    config: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(
        routed_command, "routed_upstream", lambda c, ledger=None: FakeRouted(c.nodes[0].url)
    )
    from llmchat.cli.commands import _parser
    from llmchat.proxy.routing.reload import load_routing

    args = _parser().parse_args(["proxy", "--config", str(config), "--workers", "2"])
    arbiter = routed_command._LastGood(args, load_routing(config, os.environ))
    config.write_text(GOOD.replace("127.0.0.1:9", "127.0.0.1:10"))
    arbiter.reread()  # the arbiter's SIGHUP after a good edit
    app, upstream = arbiter.build()  # a worker forked after it: the new file
    assert upstream.api_url == "http://127.0.0.1:10/v1"
    app.close()
    config.write_text(BAD)
    with caplog.at_level(logging.WARNING, "llmchat.proxy"):
        arbiter.reread()  # after a bad one: refused, logged
        app, upstream = arbiter.build()  # the worker reads no file: the last good
    app.close()
    assert upstream.api_url == "http://127.0.0.1:10/v1"
    assert caplog.text.count("unknown node 'gpu-c'") == 1


def test_help_names_the_config(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["proxy", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--config FILE" in text and "SIGHUP" in text and "examples/routing.yaml" in text


# -- SIGHUP, in a real process ----------------------------------------------------------

_DRIVER = """\
import sys
import llmchat.cli.routed as routed
from llmchat import OpenAICommon

class Routed(OpenAICommon):
    def reload(self, config):
        print("reload called:", [n.name for n in config.nodes], file=sys.stderr, flush=True)

def build(config, ledger=None):
    print("built:", [n.name for n in config.nodes], file=sys.stderr, flush=True)
    return Routed(config.nodes[0].url)

routed.routed_upstream = build
from llmchat.cli import main
sys.exit(main(sys.argv[1:]))
"""


class Running:
    """`llmchat proxy --config` in a subprocess (the driver above), its stderr read by a thread."""

    def __init__(self, config: Path, *options: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLMCHAT_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        command = [sys.executable, "-c", _DRIVER, "proxy", "--config", str(config), *options]
        self.process = subprocess.Popen(
            [*command, "--port", "0"], stderr=subprocess.PIPE, text=True, env=env
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stderr or ():
            self.lines.put(line)

    def wait_for(self, text: str) -> str:
        """The next stderr line holding `text`; queue.Empty after WAIT seconds of nothing."""
        while True:
            line = self.lines.get(timeout=WAIT)
            if text in line:
                return line

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=WAIT)
        self.reader.join(timeout=WAIT)
        if self.process.stderr:
            self.process.stderr.close()


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this platform")
def test_sighup_reloads_a_running_proxy(config: Path) -> None:
    running = Running(config)
    process, wait_for = running.process, running.wait_for
    try:
        wait_for("llmchat proxy: serving http://127.0.0.1:")
        config.write_text(GOOD.replace("gpu-a", "gpu-z"))
        process.send_signal(signal.SIGHUP)
        assert "['gpu-z']" in wait_for("reload called:")
        assert "llmchat proxy: reloaded over 1 node from" in wait_for("reloaded")
        config.write_text(BAD)
        process.send_signal(signal.SIGHUP)
        line = wait_for("refused, the old one stays")
        # A log line (time, level, logger, then "[-]": no request's id, a reload's own).
        assert f" WARNING llmchat.proxy [-] routing config {config} refused, the old one " in line
        assert "unknown node 'gpu-c'" in wait_for("gpu-c")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=WAIT) == 0
    finally:
        running.close()


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this platform")
def test_under_gunicorn_sighup_starts_workers_on_the_new_file(config: Path) -> None:
    pytest.importorskip("gunicorn")
    running = Running(config, "--workers", "1", "--threads", "2")
    try:
        running.wait_for("llmchat proxy: serving http://127.0.0.1:")
        assert "['gpu-a']" in running.wait_for("built:")  # the worker's own
        config.write_text(GOOD.replace("gpu-a", "gpu-z"))
        running.process.send_signal(signal.SIGHUP)
        assert "['gpu-z']" in running.wait_for("built:")
        config.write_text(BAD)
        running.process.send_signal(signal.SIGHUP)
        assert "refused, the old one stays: " in running.wait_for("unknown node 'gpu-c'")
        # The arbiter refused it and kept the good edit: the new worker is built on that.
        assert "['gpu-z']" in running.wait_for("built:")
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(timeout=WAIT) == 0
    finally:
        running.close()


_HEALTH_DRIVER = """\
import os
import sys
import llmchat.cli.routed as routed

real = routed.routed_upstream

def build(config, ledger=None):
    print("built:", [n.name for n in config.nodes], "pid", os.getpid(), file=sys.stderr, flush=True)
    return real(config, ledger)

routed.routed_upstream = build
from llmchat.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this platform")
def test_under_gunicorn_a_bad_edit_after_a_good_one_keeps_the_good_one_in_new_workers(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Good edit + SIGHUP, bad edit + SIGHUP: the workers forked last serve the good edit,
    and ``GET /health`` (a real `RoutedUpstream`) reports its digest; the bad one is
    refused once, by the arbiter."""
    pytest.importorskip("gunicorn")
    import requests

    from llmchat.proxy.routing.reload import load_routing

    monkeypatch.setattr(sys.modules[__name__], "_DRIVER", _HEALTH_DRIVER)
    running = Running(config, "--workers", "1", "--threads", "2")
    try:
        url = running.wait_for("llmchat proxy: serving http://").split()[3]
        first = running.wait_for("built:").split()[-1]  # the start-up worker's pid
        good = GOOD.replace("gpu-a", "gpu-z")
        config.write_text(good)
        digest = load_routing(config, os.environ).config.digest
        running.process.send_signal(signal.SIGHUP)
        assert digest[:12] in running.wait_for("reloaded over 1 node")
        # The new worker is built on the edit, and the start-up one exits (either first).
        pending = {"built: ['gpu-z']", f"Worker exiting (pid: {first})"}
        while pending:
            line = running.lines.get(timeout=WAIT)
            pending = {text for text in pending if text not in line}
        config.write_text(BAD)
        running.process.send_signal(signal.SIGHUP)
        refused = running.wait_for("refused, the old one stays")
        assert "['gpu-z']" in running.wait_for("built:")  # not the start-up config
        health = requests.get(url + "/health", timeout=WAIT).json()
        assert health["config"]["digest"] == digest
        assert [node["name"] for node in health["nodes"]] == ["gpu-z"]
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(timeout=WAIT) == 0
        rest = []
        while not running.lines.empty():
            rest.append(running.lines.get_nowait())
        # Logged once (by the arbiter), not again by each new worker.
        assert sum("refused, the old one stays" in line for line in rest) == 0, refused
    finally:
        running.close()
