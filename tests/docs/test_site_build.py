"""The documentation site builds with `mkdocs build --strict`, as CI builds it.

A broken link, a page listed in the nav and missing (or present and not
listed), a missing snippet or a docstring mkdocstrings cannot render is a
warning, and --strict turns every warning into this test's failure.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..support.paths import REPO_ROOT

needs_mkdocs = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("mkdocs", "material", "mkdocstrings_handlers")),
    reason="mkdocs not installed: pip install -e .[docs]",
)


@needs_mkdocs
def test_site_builds_strict(tmp_path: Path) -> None:
    # The nav's own strictness, never relaxed here (mkdocs.yml reads this for partial checkouts).
    env = {k: v for k, v in os.environ.items() if k != "LLMCHAT_DOCS_MISSING"}
    env["NO_MKDOCS_2_WARNING"] = "1"  # Material's end-of-life banner is not about this site
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # The API reference rendered from the docstrings, not an empty page.
    client = (tmp_path / "site" / "reference" / "client" / "index.html").read_text("utf-8")
    assert 'id="llmchat.backends.openai_common.OpenAICommon.chat_completion"' in client
    # The changelog page carries CHANGELOG.md (the snippet resolved).
    changelog = (tmp_path / "site" / "changelog" / "index.html").read_text("utf-8")
    first_heading = next(
        line
        for line in (REPO_ROOT / "CHANGELOG.md").read_text("utf-8").splitlines()
        if line.startswith("## ")
    )
    assert first_heading[3:].split()[0] in changelog
