"""``/admin/`` under real gunicorn (2 workers): the admin key, and the reload status every
worker reports (the arbiter's last attempt, inherited through the fork)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from . import test_cli_config as config_tests
from .test_cli_config import _HEALTH_DRIVER, BAD, GOOD, WAIT, Running

ADMIN = "sk-admin-SECRET-0123456789"
WITH_ADMIN = GOOD + "admin: {key_env: ADMIN_KEY}\n"


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this platform")
def test_admin_config_reports_the_last_reload_under_two_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("gunicorn")
    import requests

    from llmchat.proxy.routing.reload import load_routing

    monkeypatch.setenv("ALICE_KEY", "sk-alice-SECRET")
    monkeypatch.setenv("ADMIN_KEY", ADMIN)
    monkeypatch.setattr(config_tests, "_DRIVER", _HEALTH_DRIVER)
    config = tmp_path / "routes.yaml"
    config.write_text(WITH_ADMIN)
    running = Running(config, "--workers", "2", "--threads", "2")
    try:
        url = running.wait_for("llmchat proxy: serving http://").split()[3]
        admin = {"Authorization": f"Bearer {ADMIN}"}
        for path in ("/admin/config", "/admin/nodes", "/admin/nope"):
            refused = requests.get(url + path, timeout=WAIT)
            assert refused.status_code == 401 and ADMIN not in refused.text
        start = requests.get(url + "/admin/config", headers=admin, timeout=WAIT).json()
        assert start["reload"] is None and start["routed"] is True
        assert ADMIN not in str(start) and "sk-alice-SECRET" not in str(start)
        assert start["config"]["admin"] == {"key_env": "ADMIN_KEY"}
        good = WITH_ADMIN.replace("gpu-a", "gpu-z")
        config.write_text(good)
        digest = load_routing(config, os.environ).config.digest
        running.process.send_signal(signal.SIGHUP)
        running.wait_for("reloaded over 1 node")
        config.write_text(BAD + "admin: {key_env: ADMIN_KEY}\n")
        running.process.send_signal(signal.SIGHUP)
        running.wait_for("refused, the old one stays")
        # New workers are forked after the refusal, on the good edit; poll until one answers
        # (the old ones drain first; their lines interleave, so stderr cannot tell).
        deadline = time.monotonic() + WAIT
        body = requests.get(url + "/admin/config", headers=admin, timeout=WAIT).json()
        while (body["reload"] or {}).get("outcome") != "refused" and time.monotonic() < deadline:
            threading.Event().wait(0.05)
            body = requests.get(url + "/admin/config", headers=admin, timeout=WAIT).json()
        assert body["reload"]["outcome"] == "refused"
        assert body["digest"] == digest and body["reload"]["digest"] is None
        assert any("gpu-c" in error for error in body["reload"]["errors"])
        assert [node["name"] for node in body["config"]["nodes"]] == ["gpu-z"]
        nodes = requests.get(url + "/admin/nodes", headers=admin, timeout=WAIT).json()
        assert "nodes" in nodes
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(timeout=WAIT) == 0
    finally:
        running.close()
