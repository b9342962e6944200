"""Text UTF-8 cannot carry, from the upstream: never a 500, a 400 or a silent cut.

The upstream sends a lone surrogate (the JSON escape ``\\ud800``) in the
text, the model name or a tool call's arguments. Every face, blocking and
streamed, over real sockets: the client gets its answer with the text replaced
(U+FFFD), or the escape passed on as valid JSON (the relay), or the face's own
failure — a 502 in its shape, or its in-band error event as the stream's end.
Which of these is not asserted (a decoder may replace the surrogate before the
proxy sees it); that the stream ends in the face's own way is.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.testing import RecordedRequest, Reply, ScriptedServer

from ..support.proxy import running_proxy

WAIT = 10.0
LONE = "\\ud800"  # as the upstream's JSON text writes it
MESSAGES = [{"role": "user", "content": "hi"}]


def _frame(delta: str, finish: str | None, model: str) -> str:
    return (
        f'data: {{"id":"c1","object":"chat.completion.chunk","model":"{model}",'
        f'"choices":[{{"index":0,"delta":{delta},"finish_reason":{json.dumps(finish)}}}]}}\n\n'
    )


def _script(where: str) -> Any:
    model = f"m{LONE}" if where == "model" else "loopback"
    if where == "tool-arguments":
        arguments = json.dumps('{"city": "' + LONE + '"}')  # the escape inside the JSON text
        call = (
            '{"index":0,"id":"call_1","type":"function",'
            f'"function":{{"name":"get_weather","arguments":{arguments}}}}}'
        )
        first, finish = f'{{"role":"assistant","tool_calls":[{call}]}}', "tool_calls"
    else:
        first, finish = f'{{"role":"assistant","content":"a {LONE} b"}}', "stop"

    def script(request: RecordedRequest) -> Reply:
        if (request.json() or {}).get("stream"):
            frames = [_frame(first, None, model), _frame("{}", finish, model), "data: [DONE]\n\n"]
            return Reply.sse(frames, done=False)
        body = (
            f'{{"id":"c1","object":"chat.completion","model":"{model}","choices":[{{"index":0,'
            f'"message":{first},"finish_reason":"{finish}"}}]}}'
        )
        return Reply(200, {"Content-Type": "application/json"}, body)

    return script


FACES: dict[str, tuple[str, dict[str, Any]]] = {
    "ollama-chat": ("/api/chat", {"model": "m", "messages": MESSAGES}),
    "ollama-generate": ("/api/generate", {"model": "m", "prompt": "hi"}),
    "anthropic": ("/v1/messages", {"model": "c", "max_tokens": 64, "messages": MESSAGES}),
    "responses": ("/v1/responses", {"model": "r", "input": "hi"}),
    "openai": ("/v1/chat/completions", {"model": "m", "messages": MESSAGES}),
}


def _shape_of_failure(face: str, body: Any) -> None:
    """A 502's body is the face's own error shape, with no Python error text."""
    text = json.dumps(body)
    assert "codec" not in text and "surrogate" not in text
    if face.startswith("ollama"):
        assert isinstance(body["error"], str)
    elif face == "anthropic":
        assert body["type"] == "error" and body["error"]["type"]
    else:
        assert body["error"]["message"]


def _stream_end(face: str, text: str) -> None:
    """The stream ends in the face's own way: its success ending or its error event."""
    if face.startswith("ollama"):
        last = json.loads(text.splitlines()[-1])
        assert last.get("done") is True or "error" in last, last
        return
    data = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    if face == "openai":
        assert data[-1] == "[DONE]" or "error" in json.loads(data[-1])
        return
    last = json.loads(data[-1])
    ends = {"anthropic": ("message_stop", "error"), "responses": ("response.completed",)}
    assert last["type"] in (*ends[face], "response.failed", "response.incomplete"), last


@pytest.mark.parametrize("where", ["text", "model", "tool-arguments"])
@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "stream"])
@pytest.mark.parametrize("face", list(FACES))
def test_a_lone_surrogate_is_replaced_or_the_faces_own_failure(
    face: str, stream: bool, where: str
) -> None:
    path, body = FACES[face]
    with ScriptedServer(_script(where)) as upstream_url:
        with OpenAICommon(upstream_url) as backend, running_proxy(backend) as url:
            answer = requests.post(
                url + path, json={**body, "stream": stream}, timeout=WAIT, stream=True
            )
            # A cut (no chunked end) raises here: never a silent cut.
            content = b"".join(answer.iter_content(None))
    assert answer.status_code in (200, 502), (answer.status_code, content)
    text = content.decode("utf-8")  # strict: every byte is UTF-8
    if answer.status_code == 502:
        _shape_of_failure(face, json.loads(text))
    elif stream:
        _stream_end(face, text)
    else:
        json.loads(text)
    if "Content-Length" in answer.headers:
        assert int(answer.headers["Content-Length"]) == len(content)
