"""Loading a config with its keys, and `reload_from`: a SIGHUP's work, without the signal."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from llmchat.proxy.routing import ConfigError, KeyRing, RoutingConfig
from llmchat.proxy.routing.reload import (
    ReloadStatus,
    load_routing,
    node_key_warnings,
    reload_from,
)

GOOD = """\
nodes:
  - {name: gpu-a, url: "http://127.0.0.1:8080/v1"}
  - {name: cloud, url: "https://api.example/v1", api_key_env: CLOUD_KEY}
models:
  fast: [{model: m, nodes: [gpu-a]}, {model: n, nodes: [cloud]}]
keys:
  - {name: alice, key_env: ALICE_KEY}
"""
NO_KEYS = """\
nodes: [{name: gpu-b, url: "http://127.0.0.1:8081/v1"}]
models: {slow: [{model: m, nodes: [gpu-b]}]}
"""
BAD = """\
nodes: [{name: gpu-b, url: "ftp://x", max_con: 1}]
models: {slow: [{model: m, nodes: [gpu-c]}]}
"""
ENV = {"ALICE_KEY": "sk-alice-SECRET", "CLOUD_KEY": "sk-cloud-SECRET"}
log = logging.getLogger("llmchat.proxy")


class Routed:
    """Records the configs it is given, as `RoutedUpstream.reload` receives them."""

    def __init__(self, refuse: bool = False) -> None:
        self.configs: list[RoutingConfig] = []
        self.refuse = refuse

    def reload(self, config: RoutingConfig) -> None:
        if self.refuse:
            raise ValueError("node 'gpu-a' cannot change its dialect while serving")
        self.configs.append(config)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "routes.yaml"
    path.write_text(text)
    return path


def test_load_routing_resolves_the_keys(tmp_path: Path) -> None:
    loaded = load_routing(write(tmp_path, GOOD), ENV)
    assert [n.name for n in loaded.config.nodes] == ["gpu-a", "cloud"]
    assert isinstance(loaded.keys, KeyRing) and loaded.keys.identify("sk-alice-SECRET")
    assert loaded.warnings == ()
    assert load_routing(write(tmp_path, NO_KEYS), ENV).keys is None


def test_an_unset_client_key_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    with pytest.raises(ConfigError) as info:
        load_routing(path, {"CLOUD_KEY": "sk"})
    assert info.value.errors == ["keys[0].key_env: ALICE_KEY is not set"]
    assert info.value.source == str(path)


def test_a_node_without_its_key_is_a_warning_not_an_error(tmp_path: Path) -> None:
    loaded = load_routing(write(tmp_path, GOOD), {"ALICE_KEY": "sk-alice-SECRET"})
    assert loaded.warnings == (
        "nodes[1].api_key_env: CLOUD_KEY is not set; node 'cloud' is not eligible",
    )
    bad = {"CLOUD_KEY": " sk-cloud-SECRET"}
    [warning] = node_key_warnings(loaded.config, bad)
    assert warning.startswith("nodes[1].api_key_env: CLOUD_KEY has leading or trailing")
    assert warning.endswith("node 'cloud' is not eligible") and "SECRET" not in warning


def test_a_valid_file_reloads(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    routed, swapped = Routed(), []
    loaded = reload_from(path, routed, log, environ=ENV, on_keys=swapped.append)
    assert loaded is not None and routed.configs == [loaded.config]
    assert swapped == [loaded.keys]
    path.write_text(NO_KEYS)
    again = reload_from(path, routed, log, environ=ENV, on_keys=swapped.append)
    assert again is not None and routed.configs[-1].digest != loaded.config.digest
    assert swapped[-1] is None  # no keys now: the single proxy key applies again


def test_an_invalid_file_is_logged_error_by_error_and_changes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, BAD)
    routed, swapped = Routed(), []
    with caplog.at_level(logging.WARNING, "llmchat.proxy"):
        assert reload_from(path, routed, log, environ=ENV, on_keys=swapped.append) is None
    assert routed.configs == [] and swapped == []
    lines = [r.getMessage() for r in caplog.records]
    assert all(r.levelno == logging.WARNING and r.name == "llmchat.proxy" for r in caplog.records)
    prefix = f"routing config {path} refused, the old one stays: "
    assert lines == [
        prefix + "nodes[0].max_con: unknown key; did you mean 'max_conns'? "
        "known: name, url, dialect, api_key_env, max_conns, weight",
        prefix + "nodes[0].url: 'ftp://x' must start with http:// or https://",
        prefix + "models.slow[0].nodes[0]: unknown node 'gpu-c'",
    ]


def test_unresolved_keys_and_a_vanished_file_are_refused_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, GOOD)
    routed = Routed()
    with caplog.at_level(logging.WARNING, "llmchat.proxy"):
        assert reload_from(path, routed, log, environ={}) is None
        assert reload_from(tmp_path / "gone.yaml", routed, log, environ=ENV) is None
    assert routed.configs == []
    text = caplog.text
    assert "keys[0].key_env: ALICE_KEY is not set" in text
    assert "gone.yaml refused, the old one stays: cannot read the file" in text


def test_a_refusal_by_the_routed_upstream_keeps_the_old_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    swapped: list[Any] = []
    with caplog.at_level(logging.WARNING, "llmchat.proxy"):
        loaded = reload_from(
            write(tmp_path, GOOD), Routed(refuse=True), log, environ=ENV, on_keys=swapped.append
        )
    assert loaded is None and swapped == []
    assert "cannot change its dialect" in caplog.text


def test_node_key_warnings_are_logged_on_reload(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "llmchat.proxy"):
        loaded = reload_from(write(tmp_path, GOOD), Routed(), log, environ={"ALICE_KEY": "sk-a"})
    assert loaded is not None
    assert "CLOUD_KEY is not set; node 'cloud' is not eligible" in caplog.text


def test_every_attempt_reports_its_status(tmp_path: Path) -> None:
    statuses: list[ReloadStatus] = []
    path = write(tmp_path, GOOD)
    loaded = reload_from(path, Routed(), log, environ=ENV, on_status=statuses.append)
    assert loaded is not None
    path.write_text(BAD)
    assert reload_from(path, Routed(), log, environ=ENV, on_status=statuses.append) is None
    path.write_text(GOOD)
    assert (
        reload_from(path, Routed(refuse=True), log, environ=ENV, on_status=statuses.append) is None
    )
    ok, bad, refused = statuses
    assert (ok.outcome, ok.digest, ok.errors, ok.source) == (
        "ok",
        loaded.config.digest,
        (),
        str(path),
    )
    assert bad.outcome == "refused" and bad.digest is None and len(bad.errors) == 3
    assert "unknown node 'gpu-c'" in bad.as_dict()["errors"][2]
    assert refused.outcome == "refused" and "cannot change its dialect" in refused.errors[0]
    assert ok.at <= bad.at <= refused.at
    assert "SECRET" not in str([status.as_dict() for status in statuses])
