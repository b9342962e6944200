"""The public names: `llmchat.__all__` follows API.md's top-level import list."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import llmchat

from .conftest import SHARED

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
    return re.findall(r"\w+", block.group(1))


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
