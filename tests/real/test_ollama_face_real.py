"""The proxy's current-Ollama routes over a real llama-server, with the real `ollama` client.

What only the real server can prove: that `/api/show` reads its `/props`
(template capabilities, modalities, context), that `/api/embed` and
`/api/embeddings` get its `/v1/embeddings` vectors (the server started with
``--embeddings --pooling mean``), that ``think: false`` really turns a
reasoning template's thinking off, and that cached prompt tokens are its own.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon

from ..support.proxy import running_proxy
from .conftest import LlamaServer

ollama = pytest.importorskip("ollama")

WAIT = 30.0
OPTIONS = {"num_predict": 8, "temperature": 0, "seed": 1}
ASK = [{"role": "user", "content": "Think, then say hi."}]


def _proxy(server: LlamaServer) -> Any:
    return running_proxy(OpenAICommon(server.url))


def test_embed_and_legacy_embeddings(embedding_server: LlamaServer) -> None:
    with _proxy(embedding_server) as url, ollama.Client(host=url, timeout=WAIT) as client:
        many = client.embed(model="tiny", input=["hello world", "good night"])
        cut = client.embed(model="tiny", input="hello world", dimensions=16)
        legacy = client.embeddings(model="tiny", prompt="hello world")
    direct = requests.post(
        f"{embedding_server.url}/embeddings",
        json={"model": "tiny", "input": ["hello world", "good night"]},
        timeout=WAIT,
    ).json()
    expected = [item["embedding"] for item in sorted(direct["data"], key=lambda d: d["index"])]
    assert len(many.embeddings) == 2
    assert len(many.embeddings[0]) == 64  # the tiny model's n_embd
    for got, want in zip(many.embeddings, expected, strict=True):
        assert got == pytest.approx(want)
    assert many.embeddings[0] != many.embeddings[1]
    assert many.prompt_eval_count == direct["usage"]["prompt_tokens"] > 0
    [short] = cut.embeddings
    assert len(short) == 16
    assert math.sqrt(sum(x * x for x in short)) == pytest.approx(1.0)
    assert list(legacy.embedding) == pytest.approx(expected[0])


def test_show_and_ps_read_props(embedding_server: LlamaServer, tools_server: LlamaServer) -> None:
    with _proxy(embedding_server) as url, ollama.Client(host=url, timeout=WAIT) as client:
        plain = client.show("tiny")
        [running] = client.ps().models
    n_ctx = requests.get(f"{embedding_server.root}/props", timeout=WAIT).json()[
        "default_generation_settings"
    ]["n_ctx"]
    assert plain.capabilities == ["completion"]  # chatml without --jinja takes no tools
    assert plain.modelinfo["llama.context_length"] == n_ctx
    assert running.context_length == n_ctx
    with _proxy(tools_server) as url, ollama.Client(host=url, timeout=WAIT) as client:
        tooled = client.show("tiny")
    assert tooled.capabilities == ["completion", "tools"]


def test_think_on_a_reasoning_template(reasoning_server: LlamaServer) -> None:
    with _proxy(reasoning_server) as url, ollama.Client(host=url, timeout=WAIT) as client:
        shown = client.show("tiny")
        thinking = client.chat(model="tiny", messages=ASK, options=OPTIONS, think=True)
        quiet = client.chat(model="tiny", messages=ASK, options=OPTIONS, think=False)
        streamed = list(
            client.chat(model="tiny", messages=ASK, options=OPTIONS, think=False, stream=True)
        )
    assert "thinking" in shown.capabilities
    assert thinking.message.thinking  # the template opens <think>: all of it is reasoning
    assert not thinking.message.content
    # reasoning_effort "none" closes the think block in the prompt: the text is the answer.
    assert quiet.message.thinking is None and quiet.message.content
    assert "".join(p.message.content or "" for p in streamed) == quiet.message.content


def test_cached_prompt_tokens_are_the_servers(embedding_server: LlamaServer) -> None:
    body = {"model": "tiny", "messages": ASK, "options": OPTIONS, "stream": False}
    with _proxy(embedding_server) as url:
        first = requests.post(f"{url}/api/chat", json=body, timeout=WAIT).json()
        again = requests.post(f"{url}/api/chat", json=body, timeout=WAIT).json()
    assert first["prompt_eval_count"] == again["prompt_eval_count"] > 0
    # The second run finds the prompt in the slot's cache (all but the last token).
    assert again["prompt_eval_cached_count"] > 0
    assert again["prompt_eval_cached_count"] < again["prompt_eval_count"]
