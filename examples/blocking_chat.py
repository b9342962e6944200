"""Ask one question and read the settled Response: text, usage, or what went wrong.

python examples/blocking_chat.py            # embedded loopback server
LLMCHAT_API_URL=http://127.0.0.1:8080/v1 python examples/blocking_chat.py
"""

from __future__ import annotations

import os

from _server import server_url

from llmchat import OpenAICommon, Settings

with server_url() as url:
    backend = OpenAICommon(
        url,
        api_key=os.environ.get("LLMCHAT_API_KEY"),
        model=os.environ.get("LLMCHAT_MODEL"),
        settings=Settings(max_tokens=64, temperature=0),
    )
    response = backend.chat_completion(
        [
            {"role": "system", "content": "Answer in one sentence."},
            {"role": "user", "content": "What is the capital of France?"},
        ]
    )
    if response.is_success:
        print(response.msg)
        print(f"({response.prompt_tokens} prompt + {response.completion_tokens} completion tokens)")
    else:
        # Remote failures are states, not exceptions; partial text is kept.
        print(f"failed ({response.error_class}): {response.err}; partial: {response.latest!r}")
    backend.close()
