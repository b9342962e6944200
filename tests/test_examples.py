"""Every example runs as-is against the embedded server and says something useful."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .support.paths import REPO_ROOT

EXAMPLES = sorted(p for p in (REPO_ROOT / "examples").glob("*.py") if not p.name.startswith("_"))
EXPECTED = {
    "blocking_chat.py": b"Paris is the capital of France.",
    "custom_gateway.py": b'"priority":"fast"',
    "probe_llamacpp.py": b"4096 tokens per slot, 2 slots",
    "stream_chat.py": b"[stop; ",
    "cancel_stream.py": b"is_cancelled=True err='Cancelled by user' error_class=None",
    "koboldcpp_json_schema.py": b"fields in order: evidence, verdict",
    "openrouter_chat.py": b"cost: 0.000021 credits; provider: Loopback",
    "text_completion_llama3.py": b"answer: Paris is the capital of France.",
    "tool_loop.py": "final: It is 18°C in Paris.".encode(),
    "fallback_chain.py": b"answer: Paris. (from loopback)",
    "anthropic_chat.py": "It is 18°C in Paris.\n[stop (end_turn); 40 prompt tokens".encode(),
    "gemini_chat.py": "It is 18°C in Paris.\nthinking: 'The tool says 18.'".encode(),
    "ollama_chat.py": (
        b"ollama: Paris is the capital of France.\n[stop; 6 prompt tokens, 6 generated]\n"
        b"blocking: Paris is the capital of France. [server time: "
    ),
    "responses_chat.py": b"[stop/completed; 21 prompt tokens, 6 generated]\nfollow-up: Paris",
    "ollama_face.py": (
        b"ollama: Paris is the capital of France.\n[stop; 6 prompt tokens, 6 generated]"
    ),
}


def test_every_example_has_an_expectation() -> None:
    assert sorted(p.name for p in EXAMPLES) == sorted(EXPECTED)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path: object) -> None:
    # Without these the examples use their embedded servers, never the real services.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LLMCHAT_")
        and k not in ("OPENROUTER_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
    }
    # The checkout under test, not whichever llmchat the interpreter has installed.
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, str(path)], capture_output=True, check=False, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr.decode()
    assert EXPECTED[path.name] in result.stdout  # type: ignore[attr-defined]
