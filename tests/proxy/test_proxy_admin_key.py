"""The operator's routes (``/metrics``, ``/admin/``) and the admin key, over a real socket.

Without an admin key ``/admin/`` does not exist (404) and ``/metrics`` is open,
like ``/health``; with one, both need it and no client key opens them, while
the client routes never accept it. The config's ``admin.key_env`` is resolved
like the client keys: unset is a config error naming the path, never the value.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.proxy import make_app
from llmchat.proxy.app import is_operator_path
from llmchat.testing import ChatResponder, ScriptedServer

from ..support.proxy import running_proxy

ADMIN = "admin-secret-0123456789"
CLIENT = "client-secret-0123456789"


@pytest.mark.parametrize(
    ("path", "operator"),
    [("/metrics", True), ("/admin", True), ("/admin/nodes", True), ("/administer", False)],
)
def test_which_paths_are_the_operators(path: str, operator: bool) -> None:
    assert is_operator_path(path) is operator


def _get(url: str, path: str, key: str | None = None) -> requests.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return requests.get(url + path, headers=headers, timeout=10)


def test_without_an_admin_key_admin_is_a_404_and_metrics_is_not_refused() -> None:
    with ScriptedServer(ChatResponder()) as upstream_url:
        with running_proxy(OpenAICommon(upstream_url), api_key=CLIENT) as url:
            assert _get(url, "/admin/nodes", CLIENT).status_code == 404
            assert _get(url, "/admin/nodes").status_code == 404
            # Not refused for want of a client key (no route yet answers it: 404, not 401).
            assert _get(url, "/metrics").status_code != 401


def test_with_an_admin_key_only_it_opens_the_operators_routes() -> None:
    with ScriptedServer(ChatResponder()) as upstream_url:
        app = make_app(OpenAICommon(upstream_url), admin_key=ADMIN)
        assert ADMIN not in repr(app) and "admin_key=set" in repr(app)
        with running_proxy(OpenAICommon(upstream_url), api_key=CLIENT, admin_key=ADMIN) as url:
            for path in ("/metrics", "/admin/nodes", "/admin"):
                assert _get(url, path).status_code == 401, path
                refused = _get(url, path, CLIENT)
                assert refused.status_code == 401, path
                assert ADMIN not in refused.text
                assert _get(url, path, ADMIN).status_code != 401, path
            # The admin key is not a client key.
            assert _get(url, "/v1/models", ADMIN).status_code == 401
            assert _get(url, "/v1/models", CLIENT).status_code == 200


def test_admin_key_is_checked_like_the_api_key() -> None:
    with pytest.raises(TypeError, match="admin_key"):
        make_app(OpenAICommon("http://127.0.0.1:9/v1"), admin_key="")


def test_the_configs_admin_key_is_resolved_and_an_unset_one_is_a_config_error(
    tmp_path: Any,
) -> None:
    import json

    from llmchat.proxy.routing import ConfigError
    from llmchat.proxy.routing.reload import load_routing

    path = tmp_path / "routing.json"
    config = {
        "nodes": [{"name": "a", "url": "http://127.0.0.1:9/v1"}],
        "models": {"m": [{"model": "m", "nodes": ["a"]}]},
        "admin": {"key_env": "OPS_KEY"},
    }
    path.write_text(json.dumps(config))
    loaded = load_routing(path, {"OPS_KEY": ADMIN})
    assert loaded.admin_key == ADMIN and ADMIN not in repr(loaded)
    with pytest.raises(ConfigError) as info:
        load_routing(path, {})
    assert any("admin.key_env" in error and "OPS_KEY" in error for error in info.value.errors)
