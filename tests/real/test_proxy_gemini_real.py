"""The proxy's Gemini face over a real llama-server, on the wire and through llmchat's `Gemini`.

What only a real server proves: that the text, the function call and the
thoughts the face writes are what the server generated for the same request
sent to it directly (greedy, so the same words); that ``usageMetadata``
carries the server's own counts; that ``:countTokens`` is exactly the prompt
the server then reports (its own template and tokenizer); and that a
``functionResponse`` sent back renders into the prompt as the equivalent
OpenAI tool result would. The model is random, so nothing pins a string.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon, Settings
from llmchat.backends.gemini import Gemini

from ..support.proxy import UsageSink, running_proxy
from .conftest import LlamaServer, wait_until
from .test_llamacpp import HELLO, slots_idle

N = 8  # tokens; the model never emits EOS, so every short request ends at its limit
WAIT = 30.0
MODEL = "gemini-2.5-pro"  # what Gemini CLI asks for; the proxy serves its one upstream
GREEDY = {"temperature": 0, "seed": 1}
SAY_HELLO = [{"role": "user", "parts": [{"text": HELLO[0]["content"]}]}]
ASK = [{"role": "user", "content": "Weather in Paris?"}]
# A long name: a result folded into the user's text (``[name result]``) would count
# more tokens than the tool turn the template renders, so the counts tell them apart.
NAME = "look_up_the_weather_forecast_for_one_city"
DECLARATION = {
    "name": NAME,
    "description": "Weather for a city",
    "parameters": {
        "type": "OBJECT",
        "properties": {"city": {"type": "STRING"}},
        "required": ["city"],
    },
}
FORECAST = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
RESULT = "21 C, sunny"


def _idle(server: LlamaServer) -> LlamaServer:
    assert wait_until(lambda: slots_idle(server), 10), "a slot is still busy"
    return server


@pytest.fixture
def server(chatml_server: LlamaServer) -> LlamaServer:
    return _idle(chatml_server)


@pytest.fixture
def proxy(server: LlamaServer) -> Iterator[tuple[str, UsageSink]]:
    sink = UsageSink()
    with (
        OpenAICommon(server.url, model="tiny") as upstream,
        running_proxy(upstream, usage_log=sink) as url,
    ):
        yield url, sink


def _direct(server: LlamaServer, **body: Any) -> dict[str, Any]:
    """A chat completion straight from llama-server, without llmchat: the reference."""
    sent = {"messages": HELLO, "max_tokens": N, **GREEDY, **body}
    answer = requests.post(f"{server.url}/chat/completions", json=sent, timeout=WAIT)
    answer.raise_for_status()
    return dict(answer.json())


def _post(url: str, method: str, body: dict[str, Any], query: str = "") -> requests.Response:
    answer = requests.post(f"{url}/v1beta/models/{MODEL}:{method}{query}", json=body, timeout=WAIT)
    assert answer.status_code == 200, answer.text
    return answer


def _generate(url: str, how: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The GenerateContentResponse chunks: one (``generateContent``), SSE or the JSON array."""
    if how == "generateContent":
        return [_post(url, how, body).json()]
    if how == "array":
        answer = _post(url, "streamGenerateContent", body)
        assert answer.headers["content-type"].startswith("application/json")
        chunks: list[dict[str, Any]] = answer.json()
        return chunks
    answer = _post(url, "streamGenerateContent", body, "?alt=sse")
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = answer.text.split("\r\n\r\n")
    assert events.pop() == "", "the stream ends with a whole event"
    assert all(event.startswith("data: ") for event in events), events
    return [json.loads(event[len("data: ") :]) for event in events]


def _parts(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every part, less the empty text part a stream's last chunk carries (as Gemini's does)."""
    parts = [part for c in chunks for part in c["candidates"][0]["content"].get("parts", [])]
    return [part for part in parts if part != {"text": ""}]


def _text(chunks: list[dict[str, Any]], thought: bool = False) -> str:
    parts = _parts(chunks)
    return "".join(p.get("text", "") for p in parts if p.get("thought", False) is thought)


def _ending(chunks: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The finish reason and usage, which only the last chunk carries."""
    *early, last = chunks
    assert not any("finishReason" in c["candidates"][0] or "usageMetadata" in c for c in early)
    assert {c["responseId"] for c in chunks} == {last["responseId"]}
    return last["candidates"][0]["finishReason"], last["usageMetadata"]


def _gemini(url: str, **settings: Any) -> Gemini:
    """llmchat's own Gemini client, pointed at the proxy."""
    made = Settings(**{"max_tokens": N, **GREEDY, **settings})
    return Gemini(url + "/v1beta", model=MODEL, api_key="unused", settings=made)


# -- text, the length stop, usage ----------------------------------------------------------


@pytest.mark.parametrize("how", ["generateContent", "sse", "array"])
def test_text_ends_at_max_output_tokens_with_the_servers_words_and_counts(server, proxy, how):
    direct = _direct(server)
    url, sink = proxy
    config = {"maxOutputTokens": N, **GREEDY}
    chunks = _generate(url, how, {"contents": SAY_HELLO, "generationConfig": config})
    said = direct["choices"][0]["message"]["content"]
    assert said.strip() and _text(chunks) == said and not _text(chunks, thought=True)
    finish, usage = _ending(chunks)
    assert finish == "MAX_TOKENS"
    prompt = direct["usage"]["prompt_tokens"]
    assert (usage["promptTokenCount"], usage["candidatesTokenCount"]) == (prompt, N)
    assert usage["totalTokenCount"] == prompt + N and "thoughtsTokenCount" not in usage
    [event] = sink.wait(1)
    method = "generateContent" if how == "generateContent" else "streamGenerateContent"
    assert (event["face"], event["route"]) == ("gemini", f"/v1beta/models/{{model}}:{method}")
    assert (event["model"], event["stream"]) == (MODEL, method != "generateContent")
    assert event["ok"] is True and event["status"] == 200 and event["error_type"] is None
    assert (event["input_tokens"], event["output_tokens"]) == (prompt, N)
    assert event["cached_tokens"] == usage.get("cachedContentTokenCount")
    assert event["content_bytes"] == len(said.encode("utf-8"))


def test_llmchats_gemini_client_reads_what_the_server_said(server, proxy):
    direct = OpenAICommon(server.url, model="tiny", settings=Settings(max_tokens=N, **GREEDY))
    reference = direct.chat_completion(HELLO)
    assert reference.finish_reason == "length" and reference.msg.strip()
    with _gemini(proxy[0]) as backend:
        blocking = backend.chat_completion(HELLO)
        streamed = backend.chat_completion_stream(HELLO).wait(WAIT)
    for response in (blocking, streamed):
        assert response.is_done and response.msg == reference.msg
        assert (response.finish_reason, response.err) == ("length", reference.err)
        assert response.provider_finish_reason == "MAX_TOKENS"
        assert (response.prompt_tokens, response.completion_tokens) == (reference.prompt_tokens, N)
    assert [c.content for c in streamed if c.content], "the stream came as chunks"


def test_a_stop_sequence_is_stop_with_the_text_before_it(server, proxy):
    words = _direct(server)["choices"][0]["message"]["content"].split()
    assert len(words) >= 3, words
    config = {"maxOutputTokens": N, "stopSequences": [words[2]], **GREEDY}
    for how in ("generateContent", "sse"):
        chunks = _generate(proxy[0], how, {"contents": SAY_HELLO, "generationConfig": config})
        assert _ending(chunks)[0] == "STOP"
        assert _text(chunks).split() == words[:2]


# -- countTokens -------------------------------------------------------------------------------

HISTORY = {
    "systemInstruction": {"parts": [{"text": "You are a test bot."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "Say hello."}]},
        {"role": "model", "parts": [{"text": "Hello! How can I help?"}]},
        {"role": "user", "parts": [{"text": "Tell me a joke"}, {"text": " about cats."}]},
    ],
}
HISTORY_AS_CHAT = [
    {"role": "system", "content": "You are a test bot."},
    {"role": "user", "content": "Say hello."},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "Tell me a joke about cats."},
]


def _servers_count(server: LlamaServer, messages: list[dict[str, Any]]) -> int:
    """llama-server's own count: its template's prompt, tokenized as a completion does."""
    rendered = requests.post(f"{server.root}/apply-template", json={"messages": messages})
    rendered.raise_for_status()
    tokens = requests.post(
        f"{server.root}/tokenize",
        json={"content": rendered.json()["prompt"], "add_special": True, "parse_special": True},
    )
    tokens.raise_for_status()
    return len(tokens.json()["tokens"])


@pytest.mark.parametrize(
    ("fields", "chat"),
    [({"contents": SAY_HELLO}, HELLO), (HISTORY, HISTORY_AS_CHAT)],
    ids=["one turn", "system and history"],
)
def test_count_tokens_is_the_prompt_the_server_then_reports(server, proxy, fields, chat):
    url, sink = proxy
    counted = _post(url, "countTokens", fields).json()
    # google-genai's older form: the request wrapped, with the model's resource name.
    wrapped = {"generateContentRequest": {"model": f"models/{MODEL}", **fields}}
    again = _post(url, "countTokens", wrapped).json()
    config = {"maxOutputTokens": 1, **GREEDY}
    [answer] = _generate(url, "generateContent", {**fields, "generationConfig": config})
    reported = answer["usageMetadata"]["promptTokenCount"]
    assert counted == again == {"totalTokens": reported}
    assert reported == _servers_count(server, chat) > 0
    events = sink.wait(3)
    counts = [e for e in events if e["route"] == "/v1beta/models/{model}:countTokens"]
    assert len(counts) == 2
    assert [e["input_tokens"] for e in events] == [reported] * 3


# -- a function call, and its response -----------------------------------------------------------


def test_a_function_call_then_its_response_gives_text(tools_server: LlamaServer) -> None:
    """The Command R+ template's grammar forces the call (tests/real/test_tools_real.py).

    Gemini has no parallel-calls switch, so the face sends none and the model runs on
    into a second call, which the face would refuse half-written: the limit is set to
    the tokens one call takes (the server's own count, asked without parallel calls),
    so the answer is that one call, stopped at MAX_TOKENS.
    """
    server = _idle(tools_server)
    tools = [FORECAST]
    direct = _direct(
        server,
        messages=ASK,
        tools=tools,
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=96,
    )
    assert direct["choices"][0]["finish_reason"] == "tool_calls"
    [wire] = direct["choices"][0]["message"]["tool_calls"]
    arguments = json.loads(wire["function"]["arguments"])
    one_call = direct["usage"]["completion_tokens"]
    gemini_tools = [{"functionDeclarations": [DECLARATION]}]
    asked = [{"role": "user", "parts": [{"text": ASK[0]["content"]}]}]
    body = {
        "contents": asked,
        "tools": gemini_tools,
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        "generationConfig": {"maxOutputTokens": one_call, **GREEDY},
    }
    with OpenAICommon(server.url, model="tiny") as upstream, running_proxy(upstream) as url:
        answers = {how: _generate(url, how, body) for how in ("generateContent", "sse")}
        for chunks in answers.values():
            assert _parts(chunks) == [{"functionCall": {"name": NAME, "args": arguments}}]
            finish, usage = _ending(chunks)
            assert finish == "MAX_TOKENS" and usage["candidatesTokenCount"] == one_call
            assert usage["promptTokenCount"] == direct["usage"]["prompt_tokens"]
        # The model's turn goes back as written, the result under the id Gemini CLI makes
        # up for a call that came without one: paired to the call by name.
        [called] = answers["generateContent"]
        result = {
            "functionResponse": {
                "id": f"{NAME}-1764000000000-9a1b",
                "name": NAME,
                "response": {"output": RESULT},
            }
        }
        back = {
            "contents": [
                *asked,
                called["candidates"][0]["content"],
                {"role": "user", "parts": [result]},
            ],
            "tools": gemini_tools,
            "toolConfig": {"functionCallingConfig": {"mode": "NONE"}},
            "generationConfig": {"maxOutputTokens": N, **GREEDY},
        }
        answered = _generate(url, "generateContent", back)
        counted = _post(url, "countTokens", back).json()["totalTokens"]
        with _gemini(url, max_tokens=one_call) as backend:
            calling = backend.chat_completion(ASK, tools=[FORECAST], tool_choice="required")
            [call] = calling.tool_calls
            history = [
                *ASK,
                calling.to_message(),
                {"role": "tool", "tool_call_id": call.id, "content": RESULT},
            ]
            replied = backend.chat_completion(
                history, tools=[FORECAST], tool_choice="none", settings=Settings(max_tokens=N)
            )
    # The same turn as OpenAI says it: the face numbers the call it was given no id for.
    sent_call = {"name": NAME, "arguments": json.dumps(arguments, separators=(",", ":"))}
    as_chat = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_0", "type": "function", "function": sent_call}],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": RESULT},
    ]
    reference = _direct(server, messages=as_chat, tools=tools, tool_choice="none")
    said = reference["choices"][0]["message"]["content"]
    assert said.strip() and _text(answered) == said
    finish, usage = _ending(answered)
    assert finish == "MAX_TOKENS" and usage["candidatesTokenCount"] == N
    assert usage["promptTokenCount"] == reference["usage"]["prompt_tokens"] == counted
    assert (call.name, call.arguments, calling.finish_reason) == (
        NAME,
        arguments,
        "length",
    )
    assert (replied.msg, replied.finish_reason) == (said, "length")


# -- thoughts from llama-server's reasoning_content ------------------------------------------------


def test_reasoning_is_a_thought_part_when_the_client_asks_for_thoughts(
    reasoning_server: LlamaServer,
) -> None:
    """The QwQ template opens a think block the random model never closes: all of the
    answer is the server's ``reasoning_content``. Gemini sends thought parts only when
    ``includeThoughts`` asks; a budget of 0 turns thinking off (``reasoning_effort``
    ``none`` closes the block in the prompt), and the words are the answer's text."""
    server = _idle(reasoning_server)
    thought = _direct(server)["choices"][0]["message"]
    assert thought["reasoning_content"].strip() and not thought["content"]
    quiet = _direct(server, reasoning_effort="none")["choices"][0]["message"]
    assert quiet["content"].strip() and not quiet.get("reasoning_content")
    config: dict[str, Any] = {"maxOutputTokens": N, **GREEDY}
    with OpenAICommon(server.url, model="tiny") as upstream, running_proxy(upstream) as url:
        shown = {"thinkingConfig": {"includeThoughts": True}}
        off = {"thinkingConfig": {"thinkingBudget": 0, "includeThoughts": True}}
        answers = {
            (how, name): _generate(
                url, how, {"contents": SAY_HELLO, "generationConfig": {**config, **extra}}
            )
            for how in ("generateContent", "sse")
            for name, extra in (("shown", shown), ("hidden", {}), ("off", off))
        }
        with _gemini(url, reasoning_budget_tokens=-1) as backend:
            read = backend.chat_completion(HELLO)
            streamed = backend.chat_completion_stream(HELLO).wait(WAIT)
    for (how, name), chunks in answers.items():
        assert _ending(chunks)[0] == "MAX_TOKENS", (how, name)
        if name == "shown":
            assert _text(chunks, thought=True) == thought["reasoning_content"], how
            assert _text(chunks) == ""
        elif name == "hidden":
            assert _parts(chunks) == [], how
        else:
            assert (_text(chunks), _text(chunks, thought=True)) == (quiet["content"], ""), how
    for response in (read, streamed):
        assert response.reasoning_text == thought["reasoning_content"] and response.msg == ""
        assert (response.finish_reason, response.completion_tokens) == ("length", N)
