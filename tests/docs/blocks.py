"""The fenced code blocks of the documentation pages, with their test comments.

The conventions (every page follows them, the collector implements exactly these):

- every ```python (or ```py) block runs; a page's blocks run in order in one
  namespace in a fresh subprocess, the checkout on PYTHONPATH, in a scratch
  working directory and HOME (files a page writes never land in the checkout);
- ``<!-- test-setup`` ... ``-->`` right before a block: hidden Python run first;
- ``<!-- test-skip: reason -->`` right before a block: the block does not run,
  and the collector reports the reason;
- ``<!-- test-expect: substring -->`` right after a block: the block's stdout
  must contain the substring (several such comments: each must be found).

"Right before" and "right after" allow blank lines in between. Fences may be
indented (inside an admonition or a content tab); the indentation is removed.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from ..support.paths import REPO_ROOT

__all__ = ["Block", "page_blocks", "pages"]

_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\s`{]*)?(?P<rest>.*)$"
)
_COMMENT_START = re.compile(r"^\s*<!--\s*test-(?P<kind>setup|skip|expect)\b:?(?P<text>.*)$")
PYTHON = frozenset({"python", "py", "python3"})


@dataclass
class Block:
    """One fenced block: where it starts (the fence's 1-based line) and its test comments."""

    path: str  # relative to the repository root, as the page is named in messages
    line: int  # the opening fence's line
    lang: str
    code: str  # the body, dedented by the fence's indentation
    setup: list[tuple[int, str]] = field(default_factory=list)  # (its first line, code)
    skip: str | None = None
    expect: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        """``page:line``, how a failure names the block."""
        return f"{self.path}:{self.line}"


def pages() -> list[Path]:
    """Every page whose blocks are tests: docs/**/*.md and the README."""
    found = sorted((REPO_ROOT / "docs").rglob("*.md"))
    readme = REPO_ROOT / "README.md"
    return [readme, *found] if readme.exists() else found


def _comment(lines: list[str], start: int) -> tuple[str, str, int, int]:
    """The test comment opening at `start` (0-based): (kind, text, its last line's index,
    the 1-based line its text starts on)."""
    match = _COMMENT_START.match(lines[start])
    assert match is not None
    kind, text = match["kind"], match["text"]
    first = start + 1 if text.strip() else start + 2
    if "-->" in text:
        return kind, text.split("-->", 1)[0].strip(), start, first
    body = [text] if text.strip() else []
    end = start + 1
    while end < len(lines) and "-->" not in lines[end]:
        body.append(lines[end])
        end += 1
    if end >= len(lines):
        raise ValueError(f"line {start + 1}: test-{kind} comment is never closed with -->")
    tail = lines[end].split("-->", 1)[0]
    if tail.strip():
        body.append(tail)
    return kind, _dedent("\n".join(body)), end, first


def _dedent(text: str) -> str:
    return textwrap.dedent(text).strip("\n") + "\n"


def page_blocks(path: Path) -> list[Block]:
    """The page's fenced blocks in order, each with the test comments around it."""
    # Named from the checkout root; a page elsewhere (a test's own) by its full path.
    rel = path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    pending: list[tuple[str, str, int]] = []  # comments waiting for the next block
    last: Block | None = None  # the block a test-expect may follow
    i = 0
    while i < len(lines):
        line = lines[i]
        if _COMMENT_START.match(line):
            try:
                kind, text, end, first = _comment(lines, i)
            except ValueError as exc:
                raise ValueError(f"{rel}: {exc}") from None
            if kind == "expect":
                if last is None:
                    raise ValueError(f"{rel}:{i + 1}: test-expect follows no code block")
                last.expect.append(text)
            else:
                pending.append((kind, text, first))
            i = end + 1
            continue
        fence = _FENCE.match(line)
        if fence is None:
            if line.strip():
                pending, last = [], None  # prose between: the comments belong to nothing
            i += 1
            continue
        indent, mark = fence["indent"], fence["fence"]
        body: list[str] = []
        i += 1
        while i < len(lines):
            close = lines[i].strip()
            if close.startswith(mark[0] * len(mark)) and not close.strip(mark[0]):
                break
            body.append(
                lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip()
            )
            i += 1
        block = Block(rel, i - len(body), (fence["info"] or "").lower(), "\n".join(body) + "\n")
        for kind, text, at in pending:
            if kind == "setup":
                block.setup.append((at, text))
            elif not text:
                raise ValueError(f"{rel}:{at}: test-skip must name its reason")
            else:
                block.skip = text
        blocks.append(block)
        pending, last = [], block
        i += 1
    return blocks
