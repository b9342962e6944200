"""The public names: `llmchat.__all__` follows API.md's top-level import list."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest

import llmchat

from .support.paths import SHARED

# Names API.md lists that later steps of the plan add; each step removes its
# names here as it lands them, so nothing can be dropped by accident.
NOT_YET: set[str] = set()


def api_md_top_level_names() -> list[str]:
    path = SHARED / "design" / "API.md"
    if not path.is_file():
        pytest.skip(f"{path} not found (only the project workspace has it)")
    text = path.read_text(encoding="utf-8")
    block = re.search(r"from llmchat import \((.*?)\)", text, re.S)
    assert block, "API.md has no top-level import block"
    names = re.sub(r"#[^\n]*", "", block.group(1))  # comments are prose, not names
    return re.findall(r"\w+", names)


def test_all_matches_api_md() -> None:
    expected = sorted(set(api_md_top_level_names()) - NOT_YET)
    assert sorted(llmchat.__all__) == expected


def test_every_exported_name_exists() -> None:
    assert all(hasattr(llmchat, name) for name in llmchat.__all__)


def test_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", llmchat.__version__)


def test_import_stays_light() -> None:
    """`import llmchat` must not pull in the lazily imported heavy modules."""
    code = (
        "import sys, llmchat; "
        "print(sorted(m for m in ('jsonschema', 'jinja2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _modules_loaded_by(code: str) -> set[str]:
    """The modules a fresh interpreter has after running `code`, beyond bare start-up."""
    show = "import sys; print('\\n'.join(sys.modules))"
    found: list[set[str]] = []
    for run in ("", code):
        done = subprocess.run(
            [sys.executable, "-c", f"{run}\n{show}"], capture_output=True, text=True, check=True
        )
        found.append(set(done.stdout.split()))
    start_up, loaded = found
    return loaded - start_up


def test_import_llmchat_loads_only_the_package() -> None:
    """`import llmchat` names nothing, so it loads no backend, transport or requests."""
    assert _modules_loaded_by("import llmchat") == {"llmchat", "llmchat._lazy", "llmchat._version"}


# What each dialect backend brings of its own (its dialect's modules); no other
# backend may load it. The OpenAI modules are everyone's (the base class).
_OWN = {
    "Anthropic": ("llmchat.backends.anthropic", "llmchat.dialects.anthropic"),
    "Gemini": ("llmchat.backends.gemini", "llmchat.dialects.gemini"),
    "Ollama": ("llmchat.backends.ollama", "llmchat.dialects.ollama"),
    "OpenAIResponses": ("llmchat.backends.responses", "llmchat.dialects.responses"),
    "OpenAICommon": (),
}
_NEVER_AT_IMPORT = ("orjson", "jsonschema", "jinja2", "llmchat.proxy", "llmchat.transport.mock")


@pytest.mark.parametrize("name", sorted(_OWN))
def test_a_backend_loads_no_other_dialect(name: str) -> None:
    loaded = _modules_loaded_by(f"from llmchat import {name}")
    assert {*_OWN[name], "requests", "llmchat.backends.openai_common"} <= loaded
    others = [prefix for other, own in _OWN.items() if other != name for prefix in own]
    for prefix in [*others, *_NEVER_AT_IMPORT]:
        assert not any(m == prefix or m.startswith((f"{prefix}.", f"{prefix}_")) for m in loaded), (
            f"from llmchat import {name} loads {prefix}"
        )


def _lazy_packages() -> list[tuple[str, dict[str, str]]]:
    import llmchat.backends
    import llmchat.transport

    mock_names = dict.fromkeys(llmchat.transport._MOCK_NAMES, ".mock")
    return [
        ("llmchat", llmchat._HOMES),
        ("llmchat.backends", llmchat.backends._HOMES),
        ("llmchat.transport", mock_names),
    ]


@pytest.mark.parametrize(("package", "homes"), _lazy_packages())
def test_each_lazy_name_resolves_to_its_home(package: str, homes: dict[str, str]) -> None:
    """Every lazily exported name is its home module's object, listed by `dir()`."""
    module = importlib.import_module(package)
    assert set(homes) <= set(module.__all__)
    if package != "llmchat.transport":  # its eager names are in __all__ too
        assert set(homes) == set(module.__all__)
    assert set(module.__all__) <= set(dir(module))
    for name, home in homes.items():
        source = importlib.import_module(home, package)
        expected = source if home.endswith(f".{name}") else getattr(source, name)
        assert getattr(module, name) is expected, name
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'Nope'"):
        _ = module.Nope


def test_star_import_gets_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from llmchat import *", namespace)
    assert set(llmchat.__all__) <= set(namespace)


def test_proxy_and_translators_have_the_api_md_shapes() -> None:
    import inspect

    from llmchat.protocols.anthropic import AnthropicStream
    from llmchat.protocols.ollama import OllamaStream
    from llmchat.proxy import make_app

    params = inspect.signature(make_app).parameters
    assert list(params)[:5] == ["upstream", "usage_log", "api_key", "max_body_bytes", "usage_db"]
    assert params["ping_interval"].default == 5.0
    assert params["drop_billing_header"].default is False
    assert params["max_body_bytes"].default == 10_000_000
    assert params["usage_log"].default is None and params["api_key"].default is None
    assert params["usage_db"].default is None
    for translator in (OllamaStream("m"), AnthropicStream("m")):
        for name in ("start", "delta", "finish", "error_event", "usage"):
            assert callable(getattr(translator, name)), name
        assert translator.errored is False
        assert isinstance(translator.content_type, str)
    assert list(inspect.signature(OllamaStream.finish).parameters)[1:] == [
        "done_reason",
        "input_tokens",
        "output_tokens",
    ]
    assert list(inspect.signature(AnthropicStream.finish).parameters)[1:] == [
        "stop_reason",
        "input_tokens",
        "output_tokens",
    ]


def test_protocols_depend_only_on_tools_chunk_and_wire_json() -> None:
    """ARCHITECTURE.md: the translators stay usable without the HTTP stack."""
    from pathlib import Path

    allowed = {"tools", "chunk", "wire_json"}
    folder = Path(llmchat.__file__).parent / "protocols"
    for path in folder.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        for module, names in re.findall(r"^from \.\.(\w*) import ([\w, ]+)", text, re.M):
            for name in [module] if module else re.findall(r"\w+", names):
                assert name in allowed, f"{path.name} imports llmchat.{name}"
        assert "import llmchat" not in text.replace("import llmchat.protocols", "")


@pytest.mark.parametrize("room", ["dialects", "pipeline"])
def test_pure_stages_import_neither_backends_nor_transport(room: str) -> None:
    """ARCHITECTURE.md: decoders, the accumulator and the judge do no I/O."""
    from pathlib import Path

    folder = Path(llmchat.__file__).parent / room
    paths = sorted(folder.glob("*.py"))
    assert paths, f"llmchat/{room}/ is empty"
    for path in paths:
        text = path.read_text(encoding="utf-8")
        imported = re.findall(r"^from \.\.(\w+)", text, re.M) + re.findall(
            r"^(?:from|import) llmchat\.(\w+)", text, re.M
        )
        for name in imported:
            assert name not in {"backends", "transport", "proxy"}, f"{path} imports {name}"
        assert "import requests" not in text and "import socket" not in text, path
