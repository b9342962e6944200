"""google-genai (PyPI) against the proxy's Gemini face, over a scripted OpenAI upstream.

The SDK runs on its defaults with only its base URL changed, under both API
versions it can be given (``v1beta``, its default, and ``v1``: the face
serves the same routes under each). Each test asserts what the SDK parsed
(text, thought parts, the function call's name, args and id, finish reason,
usage) and what the upstream received in OpenAI's terms.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from llmchat.testing import ChatResponder, RecordedRequest, Reply, ScriptedServer

from ..support.agent_upstream import chat_reply
from ..support.proxy_servers import ServedProxy, serve_proxy

genai = pytest.importorskip("google.genai", reason="google-genai is not installed (test extra)")
from google.genai import errors, types  # noqa: E402  (after the skip that names it)

KEY = "gemini-sdk-test-key"
MODEL = "gemini-test"
VERSIONS = ("v1beta", "v1")
WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="The weather in a city.",
    parameters_json_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
CALL = {
    "id": "call_weather_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}


@dataclass
class Turn:
    """One scripted upstream answer (`chat_reply`'s arguments)."""

    message: dict[str, Any]
    finish: str = "stop"
    reasoning: str | None = None
    usage: dict[str, Any] = field(
        default_factory=lambda: {"prompt_tokens": 12, "completion_tokens": 5}
    )


class Upstream:
    """An OpenAI chat server answering `turns` in order; keeps each chat body.

    ``/apply-template`` and ``/tokenize`` play llama-server's: the template
    renders each message as ``<|role|> text`` (tools as ``<|tool|> name``) and
    the tokenizer counts one token per word, plus one for BOS when asked.
    """

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.chats: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._models = ChatResponder("unused", model=MODEL)

    def __call__(self, request: RecordedRequest) -> Reply:
        path = request.path.partition("?")[0]
        body = request.json()
        if path.endswith("/chat/completions") and isinstance(body, dict):
            with self._lock:
                self.chats.append(body)
                turn = self.turns.pop(0) if self.turns else Turn({"content": "unscripted"})
            return chat_reply(body, turn.message, turn.finish, turn.reasoning, turn.usage)
        if path == "/apply-template" and isinstance(body, dict):
            parts = [f"<|{m['role']}|> {_text(m.get('content'))}" for m in body["messages"]]
            parts += [f"<|tool|> {t['function']['name']}" for t in body.get("tools") or ()]
            return Reply.json({"prompt": " ".join(parts) + " <|assistant|>"})
        if path == "/tokenize" and isinstance(body, dict):
            words = body["content"].split()
            return Reply.json({"tokens": list(range(len(words) + bool(body.get("add_special"))))})
        return self._models(request)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return str(content or "")


@pytest.fixture
def upstream() -> Iterator[tuple[Upstream, ScriptedServer]]:
    script = Upstream()
    server = ScriptedServer(script)
    with server:  # started here, stopped after the test
        yield script, server


@pytest.fixture
def proxy(upstream, tmp_path) -> Iterator[ServedProxy]:
    _, server = upstream
    with serve_proxy("embedded", server.url, tmp_path, api_key=KEY) as served:
        yield served


@pytest.fixture
def client(proxy: ServedProxy) -> Iterator[Callable[..., Any]]:
    """Makes SDK clients of the proxy (`version`, `key`); each is closed after the test."""
    made: list[Any] = []

    def make(version: str = "v1beta", key: str = KEY) -> Any:
        options = types.HttpOptions(base_url=proxy.url, api_version=version)
        made.append(genai.Client(api_key=key, http_options=options))
        return made[-1]

    yield make
    for sdk in made:
        sdk.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_generate_content_text(upstream, proxy, version, client):
    script, _ = upstream
    script.turns.append(Turn({"content": "Hello from the upstream."}))
    config = types.GenerateContentConfig(
        system_instruction="Be brief.",
        temperature=0.2,
        top_p=0.9,
        max_output_tokens=64,
        stop_sequences=["END"],
    )
    sdk = client(version)
    answer = sdk.models.generate_content(model=MODEL, contents="Say hello.", config=config)
    assert answer.text == "Hello from the upstream."
    [candidate] = answer.candidates
    assert candidate.finish_reason == types.FinishReason.STOP
    assert candidate.content.role == "model"
    usage = answer.usage_metadata
    assert (usage.prompt_token_count, usage.candidates_token_count) == (12, 5)
    assert usage.total_token_count == 17
    [sent] = script.chats
    assert sent["model"] == MODEL
    roles = [(m["role"], _text(m["content"])) for m in sent["messages"]]
    assert roles == [("system", "Be brief."), ("user", "Say hello.")]
    assert (sent["temperature"], sent["top_p"]) == (0.2, 0.9)
    assert sent.get("max_tokens", sent.get("max_completion_tokens")) == 64
    assert sent["stop"] == ["END"]
    [event] = proxy.usage.wait(1)
    assert event["face"] == "gemini" and event["status"] == 200


@pytest.mark.parametrize("version", VERSIONS)
def test_stream_thinks_then_calls_a_function_then_gets_its_result(upstream, version, client):
    script, _ = upstream
    usage = {"prompt_tokens": 30, "completion_tokens": 20}
    usage["completion_tokens_details"] = {"reasoning_tokens": 7}
    thought = "Weather needs the tool."
    script.turns.append(Turn({"tool_calls": [CALL]}, "tool_calls", thought, usage))
    script.turns.append(Turn({"content": "It is 18C in Paris."}))
    sdk = client(version)
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER])],
        thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=1024),
    )
    question = types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])
    chunks = list(
        sdk.models.generate_content_stream(model=MODEL, contents=[question], config=config)
    )
    parts = [p for c in chunks if c.candidates for p in c.candidates[0].content.parts or ()]
    assert "".join(p.text for p in parts if p.thought) == thought
    [called] = [p.function_call for p in parts if p.function_call]
    assert (called.name, called.args) == ("get_weather", {"city": "Paris"})
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    counted = chunks[-1].usage_metadata
    assert (counted.prompt_token_count, counted.thoughts_token_count) == (30, 7)
    assert (counted.candidates_token_count, counted.total_token_count) == (13, 50)
    first = script.chats[0]
    assert first["stream"] is True
    [tool] = first["tools"]
    assert tool["function"]["name"] == "get_weather"
    assert tool["function"]["parameters"]["properties"] == {"city": {"type": "string"}}

    # The next turn: the model's turn as the SDK parsed it, then the function's result.
    said = types.Content(role="model", parts=[p for p in parts if not p.thought])
    result = types.Part.from_function_response(name="get_weather", response={"temp": "18C"})
    reply = types.Content(role="user", parts=[result])
    answer = sdk.models.generate_content(
        model=MODEL, contents=[question, said, reply], config=config
    )
    assert answer.text == "It is 18C in Paris."
    messages = script.chats[1]["messages"]
    [calling] = [m for m in messages if m.get("tool_calls")]
    [tool_message] = [m for m in messages if m["role"] == "tool"]
    # Gemini has no call ids: the face pairs the result with its call by name, one id for both.
    assert calling["tool_calls"][0]["id"] == tool_message["tool_call_id"]
    assert json.loads(calling["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert "18C" in _text(tool_message["content"])


@pytest.mark.parametrize("stream", [False, True])
def test_a_length_stop_is_max_tokens(upstream, stream, client):
    script, _ = upstream
    script.turns.append(Turn({"content": "Once upon a"}, "length"))
    sdk = client()
    models = sdk.models
    config = types.GenerateContentConfig(max_output_tokens=3)
    if stream:
        chunks = list(
            models.generate_content_stream(model=MODEL, contents="Tell a story.", config=config)
        )
        text = "".join(c.text or "" for c in chunks)
        finish = chunks[-1].candidates[0].finish_reason
    else:
        answer = models.generate_content(model=MODEL, contents="Tell a story.", config=config)
        text, finish = answer.text, answer.candidates[0].finish_reason
    assert text == "Once upon a"
    assert finish == types.FinishReason.MAX_TOKENS


def test_json_output_asks_the_upstream_for_the_schema(upstream, client):
    script, _ = upstream
    script.turns.append(Turn({"content": '{"city": "Paris"}'}))
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    config = types.GenerateContentConfig(
        response_mime_type="application/json", response_json_schema=schema
    )
    sdk = client()
    answer = sdk.models.generate_content(model=MODEL, contents="Which city?", config=config)
    assert json.loads(answer.text) == {"city": "Paris"}
    format_ = script.chats[0]["response_format"]
    assert format_["type"] == "json_schema" and format_["json_schema"]["schema"] == schema


@pytest.mark.parametrize("version", VERSIONS)
def test_count_tokens_is_the_upstreams_own_count(upstream, version, client):
    sdk = client(version)
    counted = sdk.models.count_tokens(model=MODEL, contents="one two three")
    # <|user|> one two three <|assistant|>, plus BOS
    assert counted.total_tokens == 5 + 1
    script, _ = upstream
    assert not script.chats  # counted, not generated


def test_models_list_and_get(client):
    sdk = client()
    names = [model.name for model in sdk.models.list()]
    assert f"models/{MODEL}" in names, names
    assert sdk.models.get(model=MODEL).name == f"models/{MODEL}"


def test_upstream_and_key_errors_are_the_sdks_errors(upstream, client):
    script, server = upstream
    wrong, right = client(key="wrong-key"), client()
    with pytest.raises(errors.ClientError) as refused:
        wrong.models.generate_content(model=MODEL, contents="hi")
    # Google's answer to a bad key: 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
    assert refused.value.code == 400 and refused.value.status == "INVALID_ARGUMENT"
    assert refused.value.message == "API key not valid. Please pass a valid API key."
    assert refused.value.details["error"]["details"][0]["reason"] == "API_KEY_INVALID"
    assert not script.chats
    server.push(Reply.error(400, "the prompt is too long", "invalid_request_error"))
    with pytest.raises(errors.ClientError) as failed:
        right.models.generate_content(model=MODEL, contents="hi")
    assert failed.value.code == 400 and failed.value.status == "INVALID_ARGUMENT"
    # In llmchat's words: no upstream text reaches the client.
    assert failed.value.message == "The upstream server rejected the request (HTTP 400)"
