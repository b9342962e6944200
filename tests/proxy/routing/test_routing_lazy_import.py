"""The one-upstream proxy never loads the routed upstream (nodes, health, admission, probes)
nor the config (its loader, its schema checks).

`import llmchat.proxy` (and an app over one upstream) leaves routing's
upstream half unimported; a `RoutedUpstream` still makes a routed app. Each
check runs in a fresh interpreter, whose `sys.modules` is the evidence.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ...test_proxy_layers import ROOT

HEAVY = (
    "llmchat.proxy.routing.config",
    "llmchat.proxy.routing.config_checks",
    "llmchat.proxy.routing.upstream",
    "llmchat.proxy.routing.health",
    "llmchat.proxy.routing.admission",
    "llmchat.proxy.routing.nodes",
    "llmchat.proxy.routing.probes",
    "llmchat.proxy.routing.relayed",
)
"""Routing's modules a proxy over one upstream has no use for (it checks key policies on
every request, so `routing.keys` it loads: a module of plain functions)."""


def _loaded(code: str) -> list[str]:
    """The llmchat.proxy.routing modules loaded after running `code` in a new interpreter."""
    listing = "sorted(m for m in sys.modules if m.startswith('llmchat.proxy.routing'))"
    probe = f"{code}\nimport json, sys\nprint(json.dumps({listing}))"
    # cwd: `-c` puts it first on the path, so this checkout's llmchat is the one imported.
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


ONE_UPSTREAM = {
    "import": "import llmchat.proxy",
    "app": "from llmchat import OpenAICommon\n"
    "from llmchat.proxy import make_app\n"
    "make_app(OpenAICommon('http://127.0.0.1:9/v1'))",
}


@pytest.mark.parametrize("code", ONE_UPSTREAM.values(), ids=list(ONE_UPSTREAM))
def test_the_one_upstream_proxy_loads_no_routed_upstream(code: str) -> None:
    loaded = _loaded(code)
    assert "llmchat.proxy.routing.upstream" not in loaded
    assert not [name for name in HEAVY if name in loaded], loaded


def test_a_routed_upstream_still_makes_a_routed_app() -> None:
    loaded = _loaded(
        "from llmchat.proxy import make_app\n"
        "from llmchat.proxy.routing import RoutedUpstream, parse_config\n"
        "config = parse_config({'nodes': [{'name': 'a', 'url': 'http://127.0.0.1:9/v1'}],\n"
        "                       'models': {'m': [{'model': 'm', 'nodes': ['a']}]}})\n"
        "upstream = RoutedUpstream(config)\n"
        "app = make_app(upstream)\n"
        "assert app.upstream is upstream, app.upstream\n"
        "upstream.close()"
    )
    assert "llmchat.proxy.routing.upstream" in loaded
