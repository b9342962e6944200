"""A chain of backends: a local llama-server first, OpenRouter second.

    python examples/fallback_chain.py

Offline (the default), two embedded servers stand in: the "local" one is
overloaded (503, twice) and the "remote" one answers. With LLMCHAT_API_URL
and OPENROUTER_API_KEY set, the real ones are used.

Which failures retry, which move on and which stop at once comes from the
Response's error class, never from string-matching exceptions (see
`llmchat.retry.classify`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from llmchat import OpenAICommon, OpenRouter
from llmchat.retry import Attempt, Exhausted, Inference
from llmchat.testing import ChatResponder, Reply, ScriptedServer


@contextlib.contextmanager
def backends() -> Iterator[list[OpenAICommon]]:
    local_url = os.environ.get("LLMCHAT_API_URL")
    if local_url and os.environ.get("OPENROUTER_API_KEY"):
        yield [OpenAICommon(local_url), OpenRouter(model="openai/gpt-4o-mini")]
        return
    busy = [Reply.error(503, "loading model", headers={"Retry-After": "0"})] * 2
    with ScriptedServer(busy) as local, ScriptedServer(ChatResponder("Paris.")) as remote:
        yield [OpenAICommon(local, model="local"), OpenAICommon(remote, model="remote")]


def show(record: Attempt) -> None:
    print(f"  {record.describe()}")


with backends() as chain:
    inference = Inference(chain, max_retries=1, timeout=30, on_attempt=show)
    try:
        response = inference.run([{"role": "user", "content": "Capital of France?"}])
        print(f"answer: {response.msg} (from {response.model})")
    except Exhausted as exc:
        print(f"every backend failed:\n{exc}")
