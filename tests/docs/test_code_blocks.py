"""Every code block in the documentation is a test (the conventions: tests/docs/blocks.py).

One test per page with Python blocks: a fresh subprocess runs them in order in
one namespace (tests/docs/runner.py) against the loopback server and a real
llmchat proxy in front of it, started there, each documented address rewritten
to them (tests/docs/urls.py). One skipped test per ``<!-- test-skip: reason -->``,
with its reason. And every ```yaml block that is a proxy config loads with the
proxy's own config loader.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llmchat.proxy.routing.config import parse_config, read_document

from ..support.paths import REPO_ROOT
from .blocks import PYTHON, Block, page_blocks, pages

# Generous: a page is a whole session of examples, on a loaded 2-core machine.
PAGE_TIMEOUT = 180.0
_CONFIG_KEYS = re.compile(r"^(nodes|routing|keys):", re.MULTILINE)


def _all_blocks() -> list[Block]:
    return [block for page in pages() for block in page_blocks(page)]


BLOCKS = _all_blocks()
PYTHON_PAGES = sorted(
    {b.path for b in BLOCKS if b.lang in PYTHON and b.skip is None},
    key=lambda p: (p != "README.md", p),
)
SKIPPED = [b for b in BLOCKS if b.skip is not None]
CONFIGS = [b for b in BLOCKS if b.lang in ("yaml", "yml") and _CONFIG_KEYS.search(b.code)]


def _env() -> dict[str, str]:
    # The reader's own settings must not steer the docs to a real service.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LLMCHAT_")
        and not k.endswith("_API_KEY")
        and k not in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
    }
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    # The keys a reader has set; they only ever reach the test servers.
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"):
        env[name] = "docs-test-key"
    return env


@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_page_python_blocks_run(page: str, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "tests.docs.runner", str(REPO_ROOT / page)]
    # A scratch working directory and HOME: the files a page writes (usage.db,
    # usage.jsonl, ...) land there, never in the checkout or the reader's home.
    env = _env() | {"HOME": str(tmp_path)}
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = process.communicate(timeout=PAGE_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        running = re.findall(r"^\[docs\] \w+ (\S+)$", err, re.MULTILINE)
        pytest.fail(f"{page}: no end after {PAGE_TIMEOUT:.0f} s; running {running[-1:]}\n{err}")
    progress = re.compile(r"^\[docs\] .*\n", re.MULTILINE)
    assert process.returncode == 0, f"{progress.sub('', err)}\n--- stdout ---\n{out}"


# Only when a page has one: an empty parametrization would report a skip of its own.
if SKIPPED:

    @pytest.mark.parametrize("block", SKIPPED, ids=lambda b: b.where)
    def test_skipped_block_names_its_reason(block: Block) -> None:
        pytest.skip(f"{block.where}: {block.skip}")


@pytest.mark.parametrize("block", CONFIGS, ids=lambda b: b.where)
def test_yaml_proxy_config_loads(block: Block) -> None:
    if block.skip is not None:
        pytest.skip(f"{block.where}: {block.skip}")
    source = f"{block.where}.yaml"
    config = parse_config(read_document(block.code.encode(), source), source)
    assert config.nodes, f"{block.where}: a config with no nodes"


def test_the_readme_has_python_blocks() -> None:
    # The collector found the pages: a parser bug must not pass as "nothing to run".
    assert "README.md" in PYTHON_PAGES
