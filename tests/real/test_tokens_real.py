"""TokenCounter against a real llama-server: its counts are the server's counts."""

from __future__ import annotations

import requests

from llmchat import OpenAICommon, Settings
from llmchat.templates import ChatML
from llmchat.tokens import TokenCounter

from .conftest import LlamaServer

CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy? Answer in one word, please."},
]


def server_tokens(server: LlamaServer, text: str) -> list[int]:
    reply = requests.post(f"{server.root}/tokenize", json={"content": text}, timeout=10)
    reply.raise_for_status()
    return reply.json()["tokens"]


def test_counts_equal_the_servers_tokenize(chatml_server: LlamaServer) -> None:
    counter = TokenCounter(OpenAICommon(chatml_server.url))
    for text in ["", "hello world", "Ünïcödé ✓ and emoji 🎉", "a\nb\n\n  c"]:
        assert counter.count_text(text) == len(server_tokens(chatml_server, text))


def test_chatml_message_counts_equal_the_servers(chatml_server: LlamaServer) -> None:
    template = ChatML()
    counter = TokenCounter(OpenAICommon(chatml_server.url), template)
    overhead = len(server_tokens(chatml_server, template.render([])))
    assert counter.template_overhead() == overhead
    for m in CONVERSATION:
        whole = len(server_tokens(chatml_server, template.render([m])))
        assert counter.count_message(m) == whole - overhead


def test_count_prompt_matches_the_servers_prompt_tokens(chatml_server: LlamaServer) -> None:
    backend = OpenAICommon(
        chatml_server.url, model="tiny", settings=Settings(max_tokens=1, temperature=0)
    )
    counter = TokenCounter(backend, ChatML())
    r = backend.chat_completion(CONVERSATION)
    assert r.usage is not None, r.err  # max_tokens=1 ends in "length"; usage still comes
    prompt_tokens = r.usage["prompt_tokens"]
    # The tiny model's Qwen2 vocab adds no BOS, and `/tokenize` adds no special
    # tokens either, so the rendered ChatML prompt tokenizes exactly as the
    # server's own chatml template does: the counts are equal, not just close.
    assert counter.count_prompt(CONVERSATION) == prompt_tokens
    # ChatML's boundaries are special tokens, so nothing merges across
    # messages and the per-message sum is exact too.
    assert counter.count_conversation(CONVERSATION) == prompt_tokens
