"""Stream an answer through the OpenAI Responses API, then send it back as history.

python examples/responses_chat.py
LLMCHAT_API_URL=http://127.0.0.1:8080/v1 python examples/responses_chat.py   # a llama-server
LLMCHAT_API_URL=https://api.openai.com/v1 LLMCHAT_MODEL=gpt-5-mini OPENAI_API_KEY=sk-... \
    python examples/responses_chat.py

Without LLMCHAT_API_URL a loopback server plays a recorded-style /v1/responses answer.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator

from llmchat import Settings
from llmchat.backends.responses import OpenAIResponses
from llmchat.testing import RecordedRequest, Reply, ScriptedServer

ANSWER = ["Paris ", "is the ", "capital ", "of France."]
USAGE = {"input_tokens": 21, "output_tokens": 6, "total_tokens": 27}


def _loopback(request: RecordedRequest) -> Reply:
    """What a Responses server sends: a response object, or its event stream."""
    text = "".join(ANSWER)
    message = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }
    done = {"id": "resp_1", "object": "response", "model": "loopback", "status": "completed",
            "output": [message], "usage": USAGE}  # fmt: skip
    if not (request.json() or {}).get("stream"):
        return Reply.json(done)
    events = [{"type": "response.created", "response": {**done, "status": "in_progress"}}]
    events += [{"type": "response.output_text.delta", "delta": piece} for piece in ANSWER]
    events.append({"type": "response.completed", "response": done})
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return Reply(200, {"Content-Type": "text/event-stream"}, body, framing="chunked")


@contextlib.contextmanager
def responses_url() -> Iterator[str]:
    configured = os.environ.get("LLMCHAT_API_URL")
    if configured:
        yield configured
        return
    with ScriptedServer(_loopback) as url:
        yield url


with responses_url() as url:
    backend = OpenAIResponses(url, model=os.environ.get("LLMCHAT_MODEL"))
    conversation = [
        {"role": "system", "content": "Answer in one sentence."},  # becomes `instructions`
        {"role": "user", "content": "What is the capital of France?"},
    ]
    with backend.chat_completion_stream(conversation, settings=Settings(max_tokens=64)) as response:
        for text in response.iter_text():
            print(text, end="", flush=True)
    print()
    if not response.is_success:
        print(f"[failed ({response.error_class}): {response.err}]")
    else:
        print(
            f"[{response.finish_reason}/{response.provider_finish_reason}; "
            f"{response.prompt_tokens} prompt tokens, {response.completion_tokens} generated]"
        )
        # The answer (text, tool calls, reasoning items) goes back as the next turn's history.
        conversation += [response.to_message(), {"role": "user", "content": "And of Italy?"}]
        follow_up = backend.chat_completion(conversation, settings=Settings(max_tokens=64))
        print(f"follow-up: {follow_up.msg if follow_up.is_success else follow_up.err}")
    backend.close()
