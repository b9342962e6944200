"""Run one page's Python blocks in order in one namespace, like a doctest session.

``python -m tests.docs.runner [--keep-going] PAGE`` (from the checkout root,
which is on PYTHONPATH; tests/docs/test_code_blocks.py runs it per page, and
so can an author). It starts the loopback server and a real proxy over it
(`urls.doc_servers`) in this process and rewrites each literal documented
address in a block (and each backend's default URL) to them, so the page shows
the addresses a reader uses. Exit 0 when every block ran and printed what its test-expect
comments say; else a message naming the page and the block's line on stderr,
exit 1. Each block announces itself on stderr first, so a timeout names the
block that hung.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import sys
import traceback
import types
from pathlib import Path
from typing import TextIO

from ..support.paths import REPO_ROOT
from .blocks import PYTHON, Block, page_blocks
from .urls import doc_servers, rewrite

# The backends whose default URL is a real service: a block that names none
# reaches the test servers instead (never a paid API).
_BACKEND_MODULES = ("anthropic", "gemini", "koboldcpp", "ollama", "openrouter", "responses")


class _Tee(io.TextIOBase):
    """Writes to the real stream and keeps a copy (the block's output for test-expect)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.copy = io.StringIO()

    def write(self, text: str) -> int:  # type: ignore[override]
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


def _patch_default_urls(pairs: list[tuple[str, str]]) -> None:
    for name in _BACKEND_MODULES:
        module = importlib.import_module(f"llmchat.backends.{name}")
        if isinstance(getattr(module, "DEFAULT_API_URL", None), str):
            module.DEFAULT_API_URL = rewrite(module.DEFAULT_API_URL, pairs)  # type: ignore[attr-defined]
        for value in list(vars(module).values()):
            url = vars(value).get("default_api_url") if isinstance(value, type) else None
            if isinstance(url, str):
                value.default_api_url = rewrite(url, pairs)  # type: ignore[attr-defined]


def _run(code: str, page: str, line: int, namespace: dict[str, object]) -> str:
    """Exec `code` (first line at `line` of `page`); return what it printed."""
    # Padding makes tracebacks name the page's own line numbers; the absolute
    # path lets them quote the page's lines from any working directory.
    compiled = compile("\n" * (line - 1) + code, str(REPO_ROOT / page), "exec")
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        exec(compiled, namespace)  # running the documentation is the point
    return tee.copy.getvalue()


def _page_traceback() -> str:
    """The current exception's traceback from the page's own frames on (not the runner's)."""
    kind, value, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return "".join(traceback.format_exception(kind, value, tb))


class _Failures:
    """Stops the page at its first failure, or (``--keep-going``) reports every one at the end."""

    def __init__(self, keep_going: bool) -> None:
        self.keep_going = keep_going
        self.count = 0

    def __call__(self, message: str) -> None:
        sys.stdout.flush()
        print(message, file=sys.stderr, flush=True)
        self.count += 1
        if not self.keep_going:
            os._exit(1)


def main(page: str, *, keep_going: bool = False) -> None:
    """Run `page`'s blocks; exit 1 with the block's page:line on the first failure."""
    _fail = _Failures(keep_going)
    with doc_servers() as pairs:
        _run_page(page, pairs, _fail)
    sys.stdout.flush()
    sys.stderr.flush()
    # Servers or threads a page left running must not keep the session open.
    os._exit(1 if _fail.count else 0)


def _run_page(page: str, pairs: list[tuple[str, str]], _fail: _Failures) -> None:
    _patch_default_urls(pairs)
    module = types.ModuleType("__main__")  # so dataclasses and pickle find the block's classes
    sys.modules["__main__"] = module
    namespace = module.__dict__
    blocks: list[Block] = [
        b for b in page_blocks(Path(page).resolve()) if b.lang in PYTHON and b.skip is None
    ]
    for block in blocks:
        for at, setup in block.setup:
            print(f"[docs] setup {block.path}:{at}", file=sys.stderr, flush=True)
            try:
                _run(rewrite(setup, pairs), block.path, at, namespace)
            except BaseException:  # any failure is the page's, reported as such
                _fail(f"{block.path}:{at}: the test-setup for the block at line {block.line} "
                      f"failed:\n{_page_traceback()}")  # fmt: skip
                break
        else:
            _run_block(block, pairs, namespace, _fail)


def _run_block(
    block: Block, pairs: list[tuple[str, str]], namespace: dict[str, object], fail: _Failures
) -> None:
    print(f"[docs] block {block.where}", file=sys.stderr, flush=True)
    try:
        printed = _run(rewrite(block.code, pairs), block.path, block.line + 1, namespace)
    except BaseException:  # any failure is the page's, reported as such
        fail(f"{block.where}: the block failed:\n{_page_traceback()}")
        return
    for wanted in block.expect:
        if wanted not in printed:
            fail(f"{block.where}: the block's output does not contain {wanted!r}; "
                 f"it printed:\n{printed}")  # fmt: skip


if __name__ == "__main__":
    args = sys.argv[1:]
    keep = "--keep-going" in args
    args = [a for a in args if a != "--keep-going"]
    if len(args) != 1 or not re.search(r"\.md$", args[0]):
        sys.exit("usage: python -m tests.docs.runner [--keep-going] PAGE.md")
    main(args[0], keep_going=keep)
