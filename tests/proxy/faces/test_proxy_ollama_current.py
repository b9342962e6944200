"""The proxy's Ollama face as current Ollama clients expect it, with the real `ollama` client.

The upstream is llmchat's scripted loopback server, answering by route like a
small llama-server (`/props`, `/v1/models`, `/v1/chat/completions`,
`/v1/embeddings`); the proxy runs under its own WSGI server on loopback.
Fields the `ollama` client's models drop (tool-call ids, ``function.index``,
``prompt_eval_cached_count``) are read off the raw wire with `requests`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.protocols.translator import MALFORMED
from llmchat.proxy.faces.ollama.shapes import OLLAMA_VERSION
from llmchat.testing import Reply, ScriptedServer
from llmchat.testing.record import RecordedRequest

from ...support.chat_frames import WEATHER
from ...support.chat_frames import chunk as _chunk
from ...support.proxy import UsageSink, running_proxy

ollama = pytest.importorskip("ollama")

WAIT = 10.0
TOOLS = [WEATHER]
ASK = [{"role": "user", "content": "weather in Oslo?"}]
THINKING_TEMPLATE = "{% if enable_thinking %}<think>{% endif %}{{ messages }}"
PROPS_FULL = {
    "default_generation_settings": {"n_ctx": 8192},
    "total_slots": 1,
    "modalities": {"vision": True, "video": False, "audio": False},
    "chat_template": THINKING_TEMPLATE,
    "chat_template_caps": {"supports_tools": True, "supports_tool_calls": True},
}
PROPS_PLAIN = {
    "default_generation_settings": {"n_ctx": 2048},
    "total_slots": 1,
    "modalities": {"vision": False},
    "chat_template": "{{ messages }}",
    "chat_template_caps": {"supports_tools": False, "supports_tool_calls": False},
}


def _usage_frame(usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": usage}


def _tool_frames(arguments: str, call_id: str = "call_up_1") -> list[dict[str, Any]]:
    fragment = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": arguments},
    }
    return [
        _chunk({"role": "assistant", "content": None}),
        _chunk({"content": "Checking. "}),
        _chunk({"tool_calls": [fragment]}),
        _chunk({}, "tool_calls"),
        _usage_frame({"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}),
    ]


class Upstream:
    """Answers by route; records the chat and embeddings bodies it was sent."""

    def __init__(
        self,
        chat: list[dict[str, Any]] | None = None,
        *,
        props: dict[str, Any] | None = None,
        models: list[dict[str, Any]] | None = None,
        embed: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.chat = chat or [_chunk({"content": "Hi."}), _chunk({}, "stop")]
        self.props = props
        self.models = models if models is not None else [{"id": "loopback", "object": "model"}]
        self.embed = embed
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        path = request.path.partition("?")[0]
        if path == "/props" and self.props is not None:
            return Reply.json(self.props)
        if path.endswith("/models"):
            return Reply.json({"object": "list", "data": self.models})
        if path.endswith("/chat/completions"):
            self.bodies.append(request.json())
            return Reply.sse(self.chat)
        if path.endswith("/embeddings") and self.embed is not None:
            body = request.json()
            self.bodies.append(body)
            return Reply.json(self.embed(body))
        return Reply.error(404, "File Not Found", "not_found_error")


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """`serve(upstream, **proxy_options)`: the proxy's URL over a scripted upstream."""
    stack: list[Any] = []

    def start(upstream: Upstream, **options: Any) -> str:
        server = ScriptedServer(upstream).start()
        stack.append(server.stop)
        backend = OpenAICommon(server.url, stream_finish_grace=5.0)
        stack.append(backend.close)
        proxy = running_proxy(backend, **options)
        url = proxy.__enter__()
        stack.append(lambda: proxy.__exit__(None, None, None))
        return url

    yield start
    while stack:
        stack.pop()()


def _client(url: str) -> Any:
    return ollama.Client(host=url, timeout=WAIT)


def _ndjson(response: requests.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


# -- undecodable tool-call arguments -------------------------------------------


def test_undecodable_arguments_end_the_stream_with_the_generic_error(serve):
    sink = UsageSink()
    url = serve(Upstream(_tool_frames('{"city": "Os')), usage_log=sink)
    seen: list[Any] = []
    with _client(url) as client, pytest.raises(ollama.ResponseError) as caught:
        for part in client.chat(model="m", messages=ASK, tools=TOOLS, stream=True):
            seen.append(part)
    assert caught.value.error == MALFORMED
    assert "".join(p.message.content or "" for p in seen) == "Checking. "
    assert not any(p.message.tool_calls for p in seen)  # never a call with {} arguments
    assert not any(p.done for p in seen)  # and no successful close
    [event] = sink.wait(1)
    assert event["ok"] is False and event["status"] == 200


def test_undecodable_arguments_without_streaming_are_a_502(serve):
    sink = UsageSink()
    url = serve(Upstream(_tool_frames("not json at all")), usage_log=sink)
    with _client(url) as client, pytest.raises(ollama.ResponseError) as caught:
        client.chat(model="m", messages=ASK, tools=TOOLS)
    assert caught.value.status_code == 502
    assert caught.value.error == MALFORMED
    [event] = sink.wait(1)
    assert event["ok"] is False and event["error_type"] == "response"


@pytest.mark.parametrize("arguments", ["[1, 2]", '"a string"'])
def test_arguments_that_are_json_but_no_object_are_rejected_too(serve, arguments):
    url = serve(Upstream(_tool_frames(arguments)))
    with _client(url) as client, pytest.raises(ollama.ResponseError) as caught:
        list(client.chat(model="m", messages=ASK, tools=TOOLS, stream=True))
    assert caught.value.error == MALFORMED


# -- tool-call ids, usage spellings, cached tokens ----------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_tool_calls_carry_the_upstream_id_and_index(serve, stream):
    url = serve(Upstream(_tool_frames('{"city": "Oslo"}', call_id="call_up_7")))
    body = {"model": "m", "messages": ASK, "tools": TOOLS, "stream": stream}
    response = requests.post(f"{url}/api/chat", json=body, timeout=WAIT)
    lines = _ndjson(response) if stream else [response.json()]
    calls = [c for line in lines for c in line["message"].get("tool_calls", [])]
    assert calls == [
        {
            "id": "call_up_7",
            "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Oslo"}},
        }
    ]
    with _client(url) as client:  # and the real client still reads them
        reply = client.chat(model="m", messages=ASK, tools=TOOLS)
    assert [(c.function.name, dict(c.function.arguments)) for c in reply.message.tool_calls] == [
        ("get_weather", {"city": "Oslo"})
    ]


@pytest.mark.parametrize("stream", [True, False])
def test_usage_spelled_input_and_output_tokens(serve, stream):
    frames = [
        _chunk({"content": "Hi."}),
        _chunk({}, "stop"),
        _usage_frame({"input_tokens": 31, "output_tokens": 4, "total_tokens": 35}),
    ]
    url = serve(Upstream(frames))
    with _client(url) as client:
        reply = client.chat(model="m", messages=ASK, stream=stream)
        final = list(reply)[-1] if stream else reply
    assert (final.prompt_eval_count, final.eval_count) == (31, 4)


@pytest.mark.parametrize("stream", [True, False])
def test_cached_prompt_tokens_become_prompt_eval_cached_count(serve, stream):
    usage = {
        "prompt_tokens": 22,
        "completion_tokens": 3,
        "total_tokens": 25,
        "prompt_tokens_details": {"cached_tokens": 21},
    }
    url = serve(Upstream([_chunk({"content": "Hi."}), _chunk({}, "stop"), _usage_frame(usage)]))
    body = {"model": "m", "messages": ASK, "stream": stream}
    response = requests.post(f"{url}/api/chat", json=body, timeout=WAIT)
    final = _ndjson(response)[-1] if stream else response.json()
    assert final["done"] is True
    assert (final["prompt_eval_count"], final["prompt_eval_cached_count"]) == (22, 21)


# -- think ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("think", "props", "sent"),
    [
        ("high", None, {"reasoning_effort": "high"}),
        ("low", PROPS_FULL, {"reasoning_effort": "low"}),
        (True, PROPS_FULL, {}),  # no level named: the server's default stands
        (False, PROPS_FULL, {"reasoning_effort": "none"}),  # llama-server: thinking off
        (False, None, {}),  # an upstream of unknown kind is sent nothing
    ],
)
def test_think_becomes_reasoning_effort(serve, think, props, sent):
    upstream = Upstream(
        [_chunk({"reasoning_content": "hmm "}), _chunk({"content": "Hi."}), _chunk({}, "stop")],
        props=props,
    )
    url = serve(upstream)
    with _client(url) as client:
        reply = client.chat(model="m", messages=ASK, think=think)
    [body] = upstream.bodies
    assert {k: body[k] for k in ("reasoning_effort",) if k in body} == sent
    assert reply.message.content == "Hi."
    assert reply.message.thinking == (None if think is False else "hmm ")


# -- show, ps, version ----------------------------------------------------------------


def test_show_reports_what_llama_server_can_tell(serve):
    url = serve(Upstream(props=PROPS_FULL))
    with _client(url) as client:
        shown = client.show("loopback")
    assert shown.capabilities == ["completion", "tools", "thinking", "vision"]
    assert shown.modelinfo["general.architecture"] == "llama"
    assert shown.modelinfo["llama.context_length"] == 8192
    assert shown.parameters == "num_ctx 8192"


def test_show_without_tool_support_in_the_template(serve):
    url = serve(Upstream(props=PROPS_PLAIN))
    with _client(url) as client:
        shown = client.show("loopback")
    assert shown.capabilities == ["completion"]
    assert shown.modelinfo["llama.context_length"] == 2048


def test_show_for_an_upstream_that_cannot_tell(serve):
    entry = {"id": "gpt-x", "object": "model", "max_model_len": 32768}
    url = serve(Upstream(models=[entry]))
    with _client(url) as client:
        shown = client.show("gpt-x")
        bare = client.show("other")  # the only listed entry answers for any name
    assert shown.capabilities == ["completion", "tools"]  # the stated default
    assert shown.modelinfo["llama.context_length"] == 32768  # vLLM's max_model_len
    assert bare.modelinfo["llama.context_length"] == 32768


def test_show_vision_from_the_model_entry(serve):
    entry = {"id": "m", "architecture": {"input_modalities": ["text", "image"]}}
    url = serve(Upstream(models=[entry]))
    with _client(url) as client:
        assert client.show("m").capabilities == ["completion", "tools", "vision"]


def test_show_names_the_missing_model_field(serve):
    url = serve(Upstream())
    response = requests.post(f"{url}/api/show", json={}, timeout=WAIT)
    assert response.status_code == 400
    assert response.json()["error"].startswith("model:")


def test_ps_has_current_ollamas_shape(serve):
    url = serve(Upstream(props=PROPS_FULL))
    with _client(url) as client:
        running = client.ps()
    [model] = running.models
    assert (model.name, model.model, model.context_length) == ("loopback", "loopback", 8192)
    assert model.expires_at is not None and model.expires_at.year == 9999
    assert (model.size, model.size_vram, model.digest) == (0, 0, "")
    raw = requests.get(f"{url}/api/ps", timeout=WAIT).json()["models"][0]
    assert set(raw) == {
        "name",
        "model",
        "size",
        "digest",
        "details",
        "expires_at",
        "size_vram",
        "context_length",
    }


def test_version_is_semver(serve):
    url = serve(Upstream())
    body = requests.get(f"{url}/api/version", timeout=WAIT).json()
    assert body == {"version": OLLAMA_VERSION}
    parts = [int(p) for p in OLLAMA_VERSION.split(".")]
    assert len(parts) == 3 and parts >= [0, 6, 4]  # VS Code Copilot's minimum


# -- embeddings -------------------------------------------------------------------


def _vectors(body: dict[str, Any]) -> dict[str, Any]:
    """Upstream embeddings: [i+1, 2, 2] per input (norm 3 for the first), out of order."""
    data = [
        {"object": "embedding", "index": i, "embedding": [float(i + 1), 2.0, 2.0]}
        for i, _ in enumerate(body["input"])
    ]
    return {
        "object": "list",
        "model": "embedder",
        "data": list(reversed(data)),
        "usage": {"prompt_tokens": 3 * len(data), "total_tokens": 3 * len(data)},
    }


def test_embed_list_and_string(serve):
    sink = UsageSink()
    upstream = Upstream(embed=_vectors)
    url = serve(upstream, usage_log=sink)
    with _client(url) as client:
        many = client.embed(model="emb", input=["a", "b"])
        one = client.embed(model="emb", input="a", truncate=True)
    assert many.embeddings == [[1.0, 2.0, 2.0], [2.0, 2.0, 2.0]]  # back in input order
    assert many.model == "emb" and many.prompt_eval_count == 6
    assert isinstance(many.total_duration, int) and many.load_duration == 0
    assert one.embeddings == [[1.0, 2.0, 2.0]]
    assert upstream.bodies[0] == {"model": "emb", "input": ["a", "b"]}
    assert upstream.bodies[1] == {"model": "emb", "input": ["a"]}  # truncate is not sent
    events = sink.wait(2, route="/api/embed")
    assert [e["input_tokens"] for e in events] == [6, 3] and all(e["ok"] for e in events)


def test_embed_dimensions_are_sent_and_enforced(serve):
    upstream = Upstream(embed=_vectors)  # ignores dimensions, as llama-server does
    url = serve(upstream)
    with _client(url) as client:
        reply = client.embed(model="emb", input="a", dimensions=2)
    assert upstream.bodies[0]["dimensions"] == 2
    [vector] = reply.embeddings
    assert len(vector) == 2
    assert vector == pytest.approx([1 / math.sqrt(5), 2 / math.sqrt(5)])


def test_embed_without_input_asks_nothing_upstream(serve):
    upstream = Upstream(embed=_vectors)
    url = serve(upstream)
    with _client(url) as client:
        assert client.embed(model="emb", input=[]).embeddings == []
    assert upstream.bodies == []


def test_legacy_embeddings(serve):
    upstream = Upstream(embed=_vectors)
    url = serve(upstream)
    with _client(url) as client:
        reply = client.embeddings(model="emb", prompt="hello")
    assert list(reply.embedding) == [1.0, 2.0, 2.0]
    assert upstream.bodies == [{"model": "emb", "input": ["hello"]}]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": "a"}, "model:"),
        ({"model": "e", "input": 3}, "input:"),
        ({"model": "e", "input": ["a", 1]}, "input[1]:"),
        ({"model": "e", "input": "a", "dimensions": 0}, "dimensions:"),
        ({"model": "e", "input": "a", "truncate": "yes"}, "truncate:"),
    ],
)
def test_embed_errors_name_the_field_before_any_upstream_io(serve, body, field):
    upstream = Upstream(embed=_vectors)
    url = serve(upstream)
    response = requests.post(f"{url}/api/embed", json=body, timeout=WAIT)
    assert response.status_code == 400
    assert response.json()["error"].startswith(field)
    assert upstream.bodies == []


def test_embed_upstream_failure_is_a_fixed_message(serve):
    url = serve(Upstream())  # no /embeddings route: llama-server without --embeddings
    with _client(url) as client, pytest.raises(ollama.ResponseError) as caught:
        client.embed(model="emb", input="a")
    assert caught.value.status_code == 404
    assert "File Not Found" not in caught.value.error  # the upstream's words stay out


def test_embed_unusable_answer_is_a_502(serve):
    url = serve(Upstream(embed=lambda body: {"data": [{"embedding": "AAAA"}]}))
    with _client(url) as client, pytest.raises(ollama.ResponseError) as caught:
        client.embed(model="emb", input="a")
    assert caught.value.status_code == 502
