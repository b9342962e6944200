"""Print an answer as it streams, then read the settled state.

python examples/stream_chat.py
LLMCHAT_API_URL=http://127.0.0.1:8080/v1 python examples/stream_chat.py
"""

from __future__ import annotations

import os

from _server import server_url

from llmchat import OpenAICommon, Settings

with server_url() as url:
    backend = OpenAICommon(
        url, api_key=os.environ.get("LLMCHAT_API_KEY"), model=os.environ.get("LLMCHAT_MODEL")
    )
    # Leaving the with-block early (an exception, Ctrl-C) cancels the stream:
    # the connection is dropped and the server stops generating.
    with backend.chat_completion_stream(
        [{"role": "user", "content": "What is the capital of France?"}],
        settings=Settings(max_tokens=64),
    ) as response:
        for text in response.iter_text():
            print(text, end="", flush=True)
    print()
    # Every stream ends in a state you can trust: a truncated answer
    # (finish_reason "length"), a filtered one or a cut-off body is a failure.
    if response.is_success:
        print(
            f"[{response.finish_reason}; {response.completion_tokens} tokens; "
            f"first token after {response.timing.ttft_seconds:.3f}s]"
        )
    else:
        print(f"[failed ({response.error_class}): {response.err}]")
    backend.close()
