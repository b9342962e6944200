"""`proxy/routing/` imports no face, no app and no server (its package docstring's rule).

Read from the source with `ast`, as tests/test_proxy_layers.py reads the other layers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ...test_proxy_layers import ROOT, imported, module_name, within

ROUTING = ROOT / "llmchat" / "proxy" / "routing"
FORBIDDEN = ("llmchat.proxy.faces", "llmchat.proxy.app", "llmchat.proxy.server", "llmchat.cli")


@pytest.mark.parametrize("path", sorted(ROUTING.glob("*.py")), ids=lambda p: p.name)
def test_routing_imports_no_face_app_or_server(path: Path) -> None:
    module = module_name(path)
    names = imported(path.read_text("utf-8"), module, path.name == "__init__.py")
    crossing = [n for n in names if any(within(n, f) for f in FORBIDDEN)]
    assert not crossing, f"{module} imports {crossing}"


def test_the_check_sees_a_crossing() -> None:
    names = list(imported("from ..faces import openai", "llmchat.proxy.routing.x", False))
    assert any(within(n, "llmchat.proxy.faces") for n in names)
