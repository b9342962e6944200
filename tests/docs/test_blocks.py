"""The collector itself: which comments belong to which block, and what a failure says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..support.paths import REPO_ROOT
from .blocks import page_blocks
from .urls import rewrite, url_pairs

PAGE = """\
# A page

<!-- test-setup
secret = "from the setup"
-->
```python
print(secret)
```
<!-- test-expect: from the setup -->

<!-- test-skip: needs a paid service -->
```py
raise SystemExit("never runs")
```

<!-- test-setup: stray = 1 -->
Prose in between: the comment above belongs to no block.

=== "Python"

    ```python
    if True:
        print("indented")
    ```

```yaml
nodes: []
```
"""


def _page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_comments_attach_to_the_block_beside_them(tmp_path: Path) -> None:
    first, skipped, tabbed, config = page_blocks(_page(tmp_path, PAGE))
    assert (first.line, first.lang, first.code) == (6, "python", "print(secret)\n")
    assert first.setup == [(4, 'secret = "from the setup"\n')]
    assert first.expect == ["from the setup"]
    assert (skipped.line, skipped.skip, skipped.setup) == (12, "needs a paid service", [])
    # In a content tab: dedented by the fence's own indentation; the stray setup is dropped.
    assert (tabbed.line, tabbed.code, tabbed.setup) == (21, 'if True:\n    print("indented")\n', [])
    assert (config.lang, config.code) == ("yaml", "nodes: []\n")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "<!-- test-skip: -->\n```python\npass\n```\n",
            "page.md:1: test-skip must name its reason",
        ),
        ("<!-- test-setup\nx = 1\n```python\n", "line 1: test-setup comment is never closed"),
        ("Prose.\n<!-- test-expect: x -->\n", "page.md:2: test-expect follows no code block"),
    ],
)
def test_a_malformed_comment_names_its_line(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        page_blocks(_page(tmp_path, text))


def test_rewrite_leaves_other_ports_and_hosts_alone() -> None:
    pairs = url_pairs("http://127.0.0.1:1", "http://127.0.0.1:2")
    text = (
        "http://127.0.0.1:8080/v1 http://127.0.0.1:80801 https://api.anthropic.com/v1 https://x.org"
    )
    assert rewrite(text, pairs) == (
        "http://127.0.0.1:1/v1 http://127.0.0.1:80801 http://127.0.0.1:2/v1 https://x.org"
    )


def _run_page(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMCHAT_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run(
        [sys.executable, "-m", "tests.docs.runner", str(_page(tmp_path, text))],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_runner_plays_a_page_against_the_rewritten_servers(tmp_path: Path) -> None:
    page = """\
```python
from llmchat import Anthropic, OpenAICommon

question = [{"role": "user", "content": "Capital of France?"}]
print(OpenAICommon("http://127.0.0.1:8080/v1").chat_completion(question).msg)
```
<!-- test-expect: Paris is the capital of France. -->

```python
# No URL: the backend's default (api.anthropic.com) reaches the proxy's Anthropic face.
print("claude:", Anthropic(model="m").chat_completion(question).msg)
```
<!-- test-expect: claude: Paris is the capital of France. -->
"""
    result = _run_page(tmp_path, page)
    assert result.returncode == 0, result.stderr
    assert "claude: Paris is the capital of France." in result.stdout


def test_a_failure_names_the_page_and_the_block(tmp_path: Path) -> None:
    page = "Text.\n\n```python\nx = 1\n```\n\n```python\nprint(x)\n```\n<!-- test-expect: 2 -->\n"
    result = _run_page(tmp_path, page)
    assert result.returncode == 1
    where = f"{tmp_path / 'page.md'}:7"
    assert f"{where}: the block's output does not contain '2'; it printed:\n1\n" in result.stderr
    result = _run_page(tmp_path, "```python\nundefined_name\n```\n")
    assert result.returncode == 1
    assert f"{tmp_path / 'page.md'}:1: the block failed:" in result.stderr
    assert "NameError: name 'undefined_name' is not defined" in result.stderr
