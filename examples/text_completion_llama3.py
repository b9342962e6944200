"""Render a conversation with the Llama 3 prompt template and ask for a text completion.

python examples/text_completion_llama3.py   # embedded loopback server
LLMCHAT_API_URL=http://127.0.0.1:8080/v1 python examples/text_completion_llama3.py

The prompt starts with ``<|begin_of_text|>`` as Hugging Face renders it; a
server that adds BOS itself (llama.cpp) wants ``Llama3(bos_token="")``.
"""

from __future__ import annotations

import os

from _server import server_url

from llmchat import OpenAICommon, Settings
from llmchat.templates import Llama3

messages = [
    {"role": "system", "content": "Answer in one sentence."},
    {"role": "user", "content": "What is the capital of France?"},
]

with server_url() as url:
    backend = OpenAICommon(
        url,
        api_key=os.environ.get("LLMCHAT_API_KEY"),
        model=os.environ.get("LLMCHAT_MODEL"),
        settings=Settings(max_tokens=64, temperature=0),
        template=Llama3(),
    )
    # The prompt exactly as it is posted to /completions.
    prompt = backend.prepare_text_request(messages).body["prompt"]
    print(f"prompt: {prompt!r}")
    response = backend.text_completion(messages)
    if response.is_success:
        print(f"answer: {response.msg}")
    else:
        print(f"failed ({response.error_class}): {response.err}; partial: {response.latest!r}")
    backend.close()
