"""The proxy's layers import only what their package docstrings allow.

Read from the source with `ast` (nothing is imported), so a new import that
crosses a layer fails here, in review's place:

- `proxy/server/` (HTTP/1.1, WSGI) imports the standard library, gunicorn,
  `llmchat.wire_json`, `llmchat.transport.header_fields` and the shared
  `proxy/error_shapes.py`; never the app, a face, usage or any other proxy
  module;
- `proxy/error_shapes.py` imports no other proxy module;
- `proxy/usage/` imports only itself and `llmchat.errors`, `llmchat.redact`
  and `llmchat.wire_json`: neither a face, the server nor the app;
- a face (`proxy/faces/<face>/`) never imports another face, nor `proxy.app`:
  it gets the completion path (`Completions`) when the app registers it;
- of the shared modules at the proxy's root only the router (`app`) imports a
  face, and it imports only a face's package (to call its ``register``),
  never a face's inner modules;
- `proxy/ops/` (the operator's routes) imports neither a face nor the server;
- nothing in the proxy imports `proxy.app` but the package's ``__init__``
  (its public re-export): no module imports back into the router.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROXY = ROOT / "llmchat" / "proxy"

SERVER_MAY_IMPORT = (
    "llmchat.proxy.server",
    "llmchat.proxy.error_shapes",
    "llmchat.wire_json",
    "llmchat.transport.header_fields",
)


ROUTERS = ("llmchat.proxy.app",)
"""The shared modules at the proxy's root that may import a face: the router only."""

APP_IMPORTERS = ("llmchat.proxy",)
"""The proxy modules that may import `proxy.app`: the package, re-exporting `make_app`."""

FACES = ("anthropic", "gemini", "ollama", "openai", "responses")

USAGE_MAY_IMPORT = ("llmchat.proxy.usage", "llmchat.errors", "llmchat.redact", "llmchat.wire_json")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(source: str, module: str, is_package: bool) -> Iterator[str]:
    """Every dotted name `source` imports, relative imports resolved; ``from m import n`` gives m.n.

    Imports inside functions and under ``TYPE_CHECKING`` count too: a layer
    that reaches across lazily still reaches across.
    """
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            yield from (f"{base}.{alias.name}" for alias in node.names)


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def face_of_module(module: str) -> str | None:
    parts = module.split(".")
    return parts[3] if len(parts) > 3 and parts[:3] == ["llmchat", "proxy", "faces"] else None


def crossings(module: str, names: list[str]) -> list[str]:
    """The imports in `names` that `module`'s layer does not allow."""
    bad: list[str] = []
    for name in names:
        if not within(name, "llmchat"):
            continue  # the standard library, gunicorn and the other third parties
        if within(module, "llmchat.proxy.server"):
            if not any(within(name, allowed) for allowed in SERVER_MAY_IMPORT):
                bad.append(name)
        elif module == "llmchat.proxy.error_shapes":
            if within(name, "llmchat.proxy") and not within(name, module):
                bad.append(name)
        elif within(module, "llmchat.proxy.usage"):
            if not any(within(name, allowed) for allowed in USAGE_MAY_IMPORT):
                bad.append(name)
        elif within(module, "llmchat.proxy.ops"):
            if any(within(name, f"llmchat.proxy.{layer}") for layer in ("faces", "server")):
                bad.append(name)
        elif module.count(".") == 2 and module not in ROUTERS:
            if within(name, "llmchat.proxy.faces"):
                bad.append(name)
        elif module in ROUTERS and within(name, "llmchat.proxy.faces"):
            if name not in {f"llmchat.proxy.faces.{face}" for face in FACES}:
                bad.append(name)  # a face's package, never its inner modules
        if within(name, "llmchat.proxy.app") and module not in (*APP_IMPORTERS, *ROUTERS):
            if within(module, "llmchat.proxy") and name not in bad:
                bad.append(name)
        face = face_of_module(module)
        other = face_of_module(name)
        if face is not None and other is not None and other != face:
            bad.append(name)
    return bad


def proxy_modules() -> list[Path]:
    return sorted(PROXY.rglob("*.py"))


@pytest.mark.parametrize("path", proxy_modules(), ids=lambda p: str(p.relative_to(PROXY)))
def test_a_proxy_module_imports_only_what_its_layer_allows(path: Path) -> None:
    module = module_name(path)
    names = list(imported(path.read_text(encoding="utf-8"), module, path.name == "__init__.py"))
    assert crossings(module, names) == []


def test_the_layers_exist() -> None:
    modules = {module_name(path) for path in proxy_modules()}
    assert "llmchat.proxy.server.server" in modules
    assert "llmchat.proxy.error_shapes" in modules
    assert "llmchat.proxy.usage.event" in modules


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (
            "llmchat.proxy.server.connection",
            "from ..app import ProxyApp",
            "llmchat.proxy.app.ProxyApp",
        ),
        ("llmchat.proxy.server.server", "from .. import usage", "llmchat.proxy.usage"),
        (
            "llmchat.proxy.server.x",
            "import llmchat.proxy.faces.ollama",
            "llmchat.proxy.faces.ollama",
        ),
        (
            "llmchat.proxy.server.x",
            "def f():\n    from ..upstream import U",
            "llmchat.proxy.upstream.U",
        ),
        (
            "llmchat.proxy.usage.store",
            "from ..faces.openai import x",
            "llmchat.proxy.faces.openai.x",
        ),
        (
            "llmchat.proxy.usage.store",
            "from ..server.hangup import h",
            "llmchat.proxy.server.hangup.h",
        ),
        (
            "llmchat.proxy.faces.ollama.routes",
            "from ..anthropic import y",
            "llmchat.proxy.faces.anthropic.y",
        ),
        (
            "llmchat.proxy.error_shapes",
            "from .faces.ollama import z",
            "llmchat.proxy.faces.ollama.z",
        ),
        ("llmchat.proxy.answers", "from .faces import ollama", "llmchat.proxy.faces.ollama"),
        (
            "llmchat.proxy.faces.ollama.routes",
            "from ...app import ProxyApp",
            "llmchat.proxy.app.ProxyApp",
        ),
        (
            "llmchat.proxy.faces.openai.routes",
            "if TYPE_CHECKING:\n    from ...app import ProxyApp",
            "llmchat.proxy.app.ProxyApp",
        ),
        ("llmchat.proxy.completions", "from .app import ProxyApp", "llmchat.proxy.app.ProxyApp"),
        (
            "llmchat.proxy.app",
            "from .faces.ollama.routes import OllamaRoutes",
            "llmchat.proxy.faces.ollama.routes.OllamaRoutes",
        ),
        ("llmchat.proxy.usage.event", "from ...backends import b", "llmchat.backends.b"),
    ],
)
def test_the_check_catches_a_crossing(module: str, source: str, expected: str) -> None:
    assert crossings(module, list(imported(source, module, False))) == [expected]


def test_the_check_lets_allowed_imports_pass() -> None:
    source = "\n".join(
        [
            "import socket",
            "from ... import wire_json",
            "from ..error_shapes import b",
            "from . import x",
        ]
    )
    module = "llmchat.proxy.server.connection"
    assert crossings(module, list(imported(source, module, False))) == []
    module = "llmchat.proxy.faces.ollama.routes"
    source = "\n".join(
        [
            "from ...completions import Completions",
            "from ...router import Route, Router",
            "from . import history",
            "from ...server.hangup import H",
        ]
    )
    assert crossings(module, list(imported(source, module, False))) == []
    module = "llmchat.proxy.app"
    source = "from .faces import anthropic, ollama, openai, responses\nfrom .router import Router"
    assert crossings(module, list(imported(source, module, False))) == []
    module = "llmchat.proxy"
    source = "from .app import ProxyApp, make_app"
    assert crossings(module, list(imported(source, module, True))) == []


def test_no_face_and_no_shared_module_imports_the_app() -> None:
    """The rule the import circle broke: the app imports the faces, never the other way."""
    for path in proxy_modules():
        module = module_name(path)
        if module in (*APP_IMPORTERS, *ROUTERS):
            continue
        names = imported(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
        assert not [name for name in names if within(name, "llmchat.proxy.app")], module


def test_every_face_package_offers_register() -> None:
    """Each face registers its routes the same way: ``register(router, completions)``."""
    for face in FACES:
        source = (PROXY / "faces" / face / "routes.py").read_text(encoding="utf-8")
        functions = {
            node.name: [arg.arg for arg in node.args.args]
            for node in ast.parse(source).body
            if isinstance(node, ast.FunctionDef)
        }
        assert functions.get("register") == ["router", "completions"], face
        package = (PROXY / "faces" / face / "__init__.py").read_text(encoding="utf-8")
        assert "from .routes import register" in package, face
