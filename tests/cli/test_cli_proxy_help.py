"""`llmchat proxy --help` names every face and route, and says what --model does, truly."""

from __future__ import annotations

import re
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.cli import main
from llmchat.proxy import make_app
from llmchat.testing import ChatResponder, ScriptedServer

from ..support.proxy import running_proxy

WAIT = 10.0
MESSAGES = [{"role": "user", "content": "hi"}]


def _help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(["proxy", "--help"])
    assert info.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps where it likes


def test_help_names_every_route_the_app_serves(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    with ScriptedServer(ChatResponder("x")) as url, OpenAICommon(url) as backend:
        app = make_app(backend)
        try:
            paths = {path for path in app.router.paths if path not in ("/",)}
        finally:
            app.close()
    assert "/v1/responses" in paths and "/v1/messages/count_tokens" in paths
    named = set(re.findall(r"/[a-z0-9_/]+", text))
    missing = paths - named
    assert not missing, f"--help does not name {sorted(missing)}"
    for face in ("Ollama", "Anthropic", "Responses", "OpenAI", "Gemini"):
        assert face in text


def test_help_says_which_faces_model_applies_to(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    model_help = text[text.index("--model MODEL") :]
    for path in ("/api/chat", "/api/generate", "/v1/messages", "/v1/responses"):
        assert path in model_help.split("(default")[0]
    assert "/v1/chat/completions" in model_help and "/api/embed" in model_help


# What --help says --model does, checked: the CLI gives it to the backend as `model`.
CALLS: list[tuple[str, dict[str, Any], bool]] = [
    ("/api/chat", {"model": "client", "messages": MESSAGES, "stream": False}, True),
    ("/api/generate", {"model": "client", "prompt": "hi", "stream": False}, True),
    ("/v1/messages", {"model": "client", "messages": MESSAGES, "max_tokens": 5}, True),
    ("/v1/responses", {"model": "client", "input": "hi"}, True),
    ("/v1/chat/completions", {"model": "client", "messages": MESSAGES}, False),
    ("/v1/embeddings", {"model": "client", "input": "hi"}, False),
    ("/api/embed", {"model": "client", "input": "hi"}, False),
]


@pytest.mark.parametrize("path,body,translated", CALLS, ids=[c[0] for c in CALLS])
def test_model_applies_to_the_translating_faces_only(
    path: str, body: dict[str, Any], translated: bool
) -> None:
    upstream = ScriptedServer(ChatResponder("hi")).start()
    try:
        with OpenAICommon(upstream.url, model="the-model") as backend:
            with running_proxy(backend) as url:
                requests.post(url + path, json=body, timeout=WAIT)
    finally:
        upstream.stop()
    [request] = upstream.requests
    assert request.json()["model"] == ("the-model" if translated else "client")
