"""The public names: `llmchat.__all__` follows API.md's top-level import list."""

from __future__ import annotations

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
