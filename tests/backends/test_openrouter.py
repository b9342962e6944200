"""OpenRouter over real sockets: a loopback server that behaves like OpenRouter.

It streams ``: OPENROUTER PROCESSING`` keep-alives and ``reasoning`` deltas,
reports ``cost``/``is_byok`` in usage and the serving ``provider``, and answers
``GET /generation``. Pure body shapes use `responses`. Nothing sleeps.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import responses

from llmchat import Settings
from llmchat.backends.openrouter import (
    DEFAULT_API_URL,
    OpenRouter,
    OpenRouterResponse,
    with_cache_breakpoints,
)
from llmchat.templates import ChatML
from llmchat.testing import RecordedRequest, Reply, ScriptedServer, Stall, Write

KEY = "sk-or-v1-SECRET-loopback-4242"
HI = [{"role": "user", "content": "Hi"}]
GEN_ID = "gen-1700000000-abc"
PROCESSING = ": OPENROUTER PROCESSING\n\n"
EPHEMERAL = {"type": "ephemeral"}


# -- an OpenRouter-shaped loopback server ---------------------------------------


def usage(cost: float | None = 0.0042, is_byok: bool | None = False, **extra: Any) -> dict:
    u: dict[str, Any] = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8, **extra}
    if cost is not None:
        u["cost"] = cost
    if is_byok is not None:
        u["is_byok"] = is_byok
    return u


def completion(
    content: str = "Paris.", *, ident: str | None = GEN_ID, use: dict | None = None, **message: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "object": "chat.completion",
        "model": "openai/gpt-4o-mini",
        "provider": "OpenAI",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": "stop",
            }
        ],
        "usage": usage() if use is None else use,
    }
    if ident is not None:
        body["id"] = ident
    return body


def chunk(finish: str | None = None, **delta: Any) -> dict[str, Any]:
    return {
        "id": GEN_ID,
        "object": "chat.completion.chunk",
        "model": "openai/gpt-4o-mini",
        "provider": "OpenAI",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def stream_events(use: dict | None = None) -> list[Any]:
    final = chunk("stop", content="")
    final["usage"] = usage(is_byok=True) if use is None else use
    return [
        PROCESSING,
        PROCESSING,
        chunk(role="assistant", content=""),
        chunk(reasoning="Thinking "),
        chunk(reasoning="hard."),
        PROCESSING,
        chunk(content="Par"),
        chunk(content="is."),
        final,
    ]


def generation(**data: Any) -> Reply:
    fields = {
        "id": GEN_ID,
        "total_cost": 0.9,
        "provider_name": "Lookup Provider",
        "tokens_prompt": 50,
        "tokens_completion": 30,
        "native_tokens_prompt": 55,
        "native_tokens_completion": 33,
        "native_tokens_reasoning": 4,
        "native_tokens_cached": 40,
        "is_byok": True,
        **data,
    }
    return Reply.json({"data": fields})


def openrouter(
    chat: Reply | None = None, lookup: Reply | None = None
) -> Callable[[RecordedRequest], Reply]:
    """A script: POST /chat/completions answers `chat` (or a stream for a stream body)."""

    def answer(request: RecordedRequest) -> Reply:
        path = request.path.partition("?")[0]
        if request.method == "POST" and path == "/v1/chat/completions":
            if chat is not None:
                return chat
            streamed = (request.json() or {}).get("stream")
            return Reply.sse(stream_events()) if streamed else Reply.json(completion())
        if request.method == "GET" and path == "/v1/generation":
            return lookup if lookup is not None else generation()
        return Reply.error(404, "Not Found")

    return answer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(openrouter())
    with srv:  # `with` yields the URL; the tests want the server
        yield srv


def backend(server: ScriptedServer, **kwargs: Any) -> OpenRouter:
    kwargs.setdefault("api_key", KEY)
    return OpenRouter(api_url=server.url, **kwargs)


# -- construction ----------------------------------------------------------------


def test_defaults_and_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    b = OpenRouter(model="openai/gpt-4o-mini")
    assert b.api_url == DEFAULT_API_URL == "https://openrouter.ai/api/v1"
    assert b.api_key == KEY
    assert OpenRouter("sk-explicit").api_key == "sk-explicit"
    monkeypatch.delenv("OPENROUTER_API_KEY")
    assert OpenRouter().api_key is None
    assert OpenRouter.send_include_usage is False


@pytest.mark.parametrize(
    ("kwargs", "error", "names"),
    [
        ({"http_referer": 5}, TypeError, "http_referer"),
        ({"x_title": "a\r\nX-Evil: 1"}, ValueError, "x_title"),
        ({"provider": ["OpenAI"]}, TypeError, "provider"),
        ({"models": "openai/gpt-4o"}, TypeError, "models"),
        ({"models": ["ok", ""]}, ValueError, "models[1]"),
        ({"transforms": [3]}, ValueError, "transforms[0]"),
        ({"cache_breakpoints": "yes"}, TypeError, "cache_breakpoints"),
        ({"generation_lookup": None}, TypeError, "generation_lookup"),
        ({"api_url": "openrouter.ai"}, ValueError, "api_url"),
        ({"nonsense": 1}, TypeError, "nonsense"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(
    kwargs: dict[str, Any], error: type[Exception], names: str
) -> None:
    with pytest.raises(error, match=names.replace("[", r"\[")):
        OpenRouter(**kwargs)


def test_clone_keeps_openrouter_fields_and_applies_changes() -> None:
    b = OpenRouter(
        KEY,
        "m",
        http_referer="https://app.example",
        x_title="App",
        provider={"order": ["OpenAI"]},
        models=["a/b"],
        transforms=["middle-out"],
        cache_breakpoints=False,
        generation_lookup=False,
        api_url="http://127.0.0.1:9/v1",
        server_probe_timeout=0.5,
    )
    c = b.clone(x_title="Other")
    assert type(c) is OpenRouter and c.api_key == KEY and c.model == "m"
    assert (c.http_referer, c.x_title) == ("https://app.example", "Other")
    assert (c.provider, c.models, c.transforms) == ({"order": ["OpenAI"]}, ["a/b"], ["middle-out"])
    assert (c.cache_breakpoints, c.generation_lookup) == (False, False)
    assert c.api_url == "http://127.0.0.1:9/v1" and c.timeouts.probe == 0.5
    with pytest.raises(TypeError, match="unknown"):
        b.clone(colour="red")


def test_provider_is_copied_at_construction() -> None:
    prefs = {"order": ["OpenAI"]}
    b = OpenRouter(provider=prefs)
    prefs["order"].append("Azure")
    assert b.prepare_chat_request(HI).body["provider"] == {"order": ["OpenAI"]}


# -- headers ---------------------------------------------------------------------


def test_attribution_headers_are_sent_when_set(server: ScriptedServer) -> None:
    response = backend(
        server, http_referer="https://app.example", x_title="My App"
    ).chat_completion(HI)
    assert response.is_success
    chat, lookup = server.requests
    for seen in (chat, lookup):  # the lookup carries the same headers
        assert seen.headers["HTTP-Referer"] == "https://app.example"
        assert seen.headers["X-Title"] == "My App"
        assert seen.headers["Authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("value", [None, ""])
def test_attribution_headers_are_absent_when_unset_or_empty(
    server: ScriptedServer, value: str | None
) -> None:
    backend(server, http_referer=value, x_title=value, generation_lookup=False).chat_completion(HI)
    (seen,) = server.requests
    assert "HTTP-Referer" not in seen.headers and "X-Title" not in seen.headers


# -- body extras (shape only) ------------------------------------------------------


@responses.activate
def test_body_extras_and_reasoning_effort_mapping() -> None:
    responses.post("http://h/v1/chat/completions", json=completion(ident=None))
    b = OpenRouter(
        KEY,
        "openai/gpt-4o-mini",
        Settings(reasoning_effort="low", max_tokens=50),
        provider={"order": ["OpenAI", "Azure"], "allow_fallbacks": False},
        models=["anthropic/claude-3.5-haiku"],
        transforms=["middle-out"],
        api_url="http://h/v1",
    )
    response = b.chat_completion(
        HI, settings=Settings(reasoning_effort="high", extra_body={"usage": {"include": True}})
    )
    assert response.is_success and isinstance(response, OpenRouterResponse)
    sent = json.loads(responses.calls[0].request.body)
    assert sent["reasoning"] == {"effort": "high"}  # the per-call setting wins
    assert "reasoning_effort" not in sent
    assert sent["provider"] == {"order": ["OpenAI", "Azure"], "allow_fallbacks": False}
    assert sent["models"] == ["anthropic/claude-3.5-haiku"]
    assert sent["transforms"] == ["middle-out"]
    assert sent["usage"] == {"include": True}  # extra_body passes any other field through
    assert sent["max_tokens"] == 50 and "stream" not in sent


def test_extra_body_wins_over_constructor_extras() -> None:
    b = OpenRouter(provider={"sort": "price"}, models=["a/b"])
    body = b.prepare_chat_request(
        HI,
        settings=Settings(
            reasoning_effort="medium",
            extra_body={"provider": {"sort": "latency"}, "reasoning": {"max_tokens": 99}},
        ),
    ).body
    assert body["provider"] == {"sort": "latency"} and body["models"] == ["a/b"]
    assert body["reasoning"] == {"effort": "medium", "max_tokens": 99}


def test_no_reasoning_member_without_effort() -> None:
    body = OpenRouter(model="m").prepare_chat_request(HI).body
    assert "reasoning" not in body and "reasoning_effort" not in body
    assert body["model"] == "m"


def test_request_hooks_leave_their_input_unchanged() -> None:
    settings = Settings(reasoning_effort="low", extra_body={"reasoning": {"exclude": True}})
    snapshot = copy.deepcopy(settings.extra_body)
    b = OpenRouter(provider={"sort": "price"})
    body = b.prepare_chat_request(HI, settings=settings).body
    body["provider"]["sort"] = "changed"
    body["reasoning"]["exclude"] = False
    assert settings.extra_body == snapshot and settings.reasoning_effort == "low"
    assert b.provider == {"sort": "price"}


def test_streams_send_no_stream_options(server: ScriptedServer) -> None:
    response = backend(server, generation_lookup=False).chat_completion_stream(HI).wait(10)
    assert response.is_success
    (seen,) = server.requests
    sent = seen.json()
    assert sent["stream"] is True and "stream_options" not in sent


# -- cache_control breakpoints -------------------------------------------------------


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def marked(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": EPHEMERAL}]


def test_marks_head_and_last_two_text_turns() -> None:
    messages = [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "u3"},
    ]
    out = with_cache_breakpoints(messages)
    assert [m["content"] for m in out] == [
        marked("Rules."),
        "u1",
        "a1",
        "u2",
        marked("a2"),
        marked("u3"),
    ]
    assert out[1] is messages[1]  # unmarked messages are passed through


def test_skips_tool_results_and_tool_call_turns_without_text() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [call]},
        {"role": "user", "content": "Also Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    out = with_cache_breakpoints(messages)
    assert out[3]["content"] == marked("Also Paris?")
    assert out[2]["content"] == marked("Let me look.") and out[2]["tool_calls"] == [call]
    assert out[4] is messages[4] and out[5] is messages[5]
    assert out[1] is messages[1] and out[0]["content"] == marked("Rules.")


def test_list_content_marks_its_last_text_part() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [{"role": "user", "content": [text_part("look"), text_part("here"), image]}]
    (out,) = with_cache_breakpoints(messages)
    assert out["content"] == [
        text_part("look"),
        {"type": "text", "text": "here", "cache_control": EPHEMERAL},
        image,
    ]
    assert messages[0]["content"][1] == text_part("here")


def test_existing_markers_count_toward_four() -> None:
    pre = [{"type": "text", "text": "x", "cache_control": EPHEMERAL}]
    messages = [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": pre},
        {"role": "assistant", "content": pre},
        {"role": "user", "content": "u2"},
        {"role": "assistant", "content": "a2"},
    ]
    out = with_cache_breakpoints(messages)
    count = sum(
        1
        for m in out
        if isinstance(m["content"], list)
        for p in m["content"]
        if "cache_control" in p
    )
    assert count == 4
    assert out[0]["content"] == marked("Rules.")  # the head first, then the latest turn
    assert out[4]["content"] == marked("a2") and out[3]["content"] == "u2"


def test_a_lone_user_message_is_marked_once() -> None:
    (out,) = with_cache_breakpoints([{"role": "user", "content": "Hi"}])
    assert out["content"] == marked("Hi")
    assert with_cache_breakpoints([]) == []


def test_finalize_builds_new_dicts_and_leaves_its_input_alone() -> None:
    b = OpenRouter(model="m")
    messages = [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": [text_part("q")]},
    ]
    caller = copy.deepcopy(messages)
    body = b.prepare_chat_request(messages).body
    assert body["messages"][0]["content"] == marked("Rules.")
    assert messages == caller  # the caller's messages are untouched

    given = {"model": "m", "messages": copy.deepcopy(caller)}
    snapshot = copy.deepcopy(given)
    out = b._finalize_request_body(given)
    assert given == snapshot and out is not given
    assert out["messages"][1]["content"] == [{**text_part("q"), "cache_control": EPHEMERAL}]


def test_text_bodies_and_disabled_breakpoints_are_unchanged() -> None:
    b = OpenRouter(model="m", template=ChatML())
    text_body = b.prepare_text_request(HI).body
    assert "cache_control" not in json.dumps(text_body) and "prompt" in text_body
    off = OpenRouter(model="m", cache_breakpoints=False).prepare_chat_request(HI).body
    assert off["messages"] == HI


# -- response extras and reasoning ------------------------------------------------------


def test_blocking_lifts_extras_and_reasoning(server: ScriptedServer) -> None:
    server.set_script(openrouter(chat=Reply.json(completion(reasoning="Because."))))
    b = backend(server, generation_lookup=False)
    response = b.chat_completion(HI)
    assert response.is_success and isinstance(response, OpenRouterResponse)
    assert (response.cost, response.generation_id, response.provider_name, response.is_byok) == (
        0.0042,
        GEN_ID,
        "OpenAI",
        False,
    )
    assert response.msg == "Paris." and response.reasoning_text == "Because."
    assert response.prompt_tokens == 5 and len(server.requests) == 1


def test_lift_usage_leaves_the_payload_unchanged_and_is_presence_gated() -> None:
    payload = completion(use=usage(is_byok=True))
    snapshot = copy.deepcopy(payload)
    response = OpenRouter().make_response({})
    OpenRouter()._lift_usage(response, payload)
    assert payload == snapshot
    assert (response.cost, response.is_byok, response.generation_id) == (0.0042, True, GEN_ID)
    OpenRouter()._lift_usage(response, {"usage": {"prompt_tokens": 1}})  # a later frame
    assert (response.cost, response.is_byok, response.provider_name) == (0.0042, True, "OpenAI")


def test_reasoning_content_lands_in_reasoning_text_too(server: ScriptedServer) -> None:
    server.set_script(Reply.json(completion(reasoning_content="Old name.")))
    response = backend(server, generation_lookup=False).chat_completion(HI)
    assert response.reasoning_text == "Old name." and response.msg == "Paris."


def test_absent_fields_stay_none_and_zero_cost_is_kept(server: ScriptedServer) -> None:
    body = completion(use=usage(cost=0, is_byok=None))
    del body["provider"]
    server.set_script(Reply.json(body))
    response = backend(server, generation_lookup=False).chat_completion(HI)
    assert response.cost == 0 and response.is_byok is None and response.provider_name is None


def test_stream_with_keepalives_reasoning_and_extras(server: ScriptedServer) -> None:
    response = backend(server, generation_lookup=False).chat_completion_stream(HI).wait(10)
    assert response.is_success and response.err is None
    assert response.msg == "Paris." and response.reasoning_text == "Thinking hard."
    assert response.dropped_frames == 0
    assert "".join(c.content for c in response) == "Paris."
    assert (response.cost, response.generation_id, response.provider_name, response.is_byok) == (
        0.0042,
        GEN_ID,
        "OpenAI",
        True,
    )


def test_keepalive_comments_refresh_last_activity_but_are_not_progress() -> None:
    reply = Reply(
        headers={"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[Write(PROCESSING), Write(PROCESSING), Stall()],
    )
    with ScriptedServer(reply) as url:
        started = time.monotonic()
        b = OpenRouter(KEY, api_url=url, request_timeout=0.5)
        response = b.chat_completion_stream(HI).wait(10)
    assert response.is_done and not response.is_success
    assert response.last_activity_at is not None and response.last_activity_at > started
    assert response.timing.ttft_seconds is None and response.msg == ""
    assert response.dropped_frames == 0 and list(response) == []


def test_finish_reason_error_mid_stream_fails_with_the_provider_message(
    server: ScriptedServer,
) -> None:
    failed = chunk("error", content="")
    failed["error"] = {"code": 502, "message": "Upstream provider disconnected"}
    server.set_script(
        openrouter(chat=Reply.sse([PROCESSING, chunk(content="Half an ans"), failed]))
    )
    response = backend(server).chat_completion_stream(HI).wait(10)
    assert not response.is_success and response.error_class == "response"
    assert response.err == "Upstream provider disconnected"
    assert response.latest == "Half an ans"
    assert len(server.requests) == 1  # no generation lookup after a failure


def test_finish_reason_error_without_an_error_object_is_a_failure(
    server: ScriptedServer,
) -> None:
    server.set_script(openrouter(chat=Reply.sse([chunk(content="Hal"), chunk("error")])))
    response = backend(server).chat_completion_stream(HI).wait(10)
    assert not response.is_success and response.error_class == "response"
    assert "finish_reason 'error'" in (response.err or "") and response.latest == "Hal"


# -- the /generation lookup ---------------------------------------------------------------


def test_lookup_fills_only_unset_fields(server: ScriptedServer) -> None:
    body = completion(use=usage(cost=0.0042, is_byok=None))
    del body["provider"]
    server.set_script(openrouter(chat=Reply.json(body)))
    response = backend(server).chat_completion(HI)
    assert response.is_success
    assert response.cost == 0.0042  # the body's value is kept
    assert (response.prompt_tokens, response.completion_tokens) == (5, 3)
    assert response.provider_name == "Lookup Provider"
    assert response.cached_tokens == 40 and response.reasoning_tokens == 4
    assert response.is_byok is True
    lookup = server.requests[1]
    assert lookup.method == "GET" and lookup.path == f"/v1/generation?id={GEN_ID}"
    assert lookup.body == b"" and "Content-Type" not in lookup.headers


def test_lookup_after_a_stream(server: ScriptedServer) -> None:
    server.set_script(openrouter(lookup=generation(native_tokens_cached=12)))
    response = backend(server).chat_completion_stream(HI).wait(10)
    assert response.is_success and response.cached_tokens == 12
    assert response.cost == 0.0042 and response.provider_name == "OpenAI"
    assert [r.path.partition("?")[0] for r in server.requests] == [
        "/v1/chat/completions",
        "/v1/generation",
    ]


def test_lookup_fills_counts_a_body_did_not_report(server: ScriptedServer) -> None:
    body = completion()
    del body["usage"]
    server.set_script(
        openrouter(chat=Reply.json(body), lookup=generation(native_tokens_prompt=None))
    )
    response = backend(server).chat_completion(HI)
    assert response.cost == 0.9 and response.prompt_tokens == 50  # falls back to tokens_prompt
    assert response.completion_tokens == 33 and response.provider_name == "OpenAI"


def test_lookup_is_skipped_without_an_id(server: ScriptedServer) -> None:
    server.set_script(openrouter(chat=Reply.json(completion(ident=None))))
    response = backend(server).chat_completion(HI)
    assert response.is_success and response.generation_id is None
    assert response.cached_tokens is None and len(server.requests) == 1


def test_lookup_is_off_with_the_flag(server: ScriptedServer) -> None:
    response = backend(server, generation_lookup=False).chat_completion(HI)
    assert response.is_success and response.cached_tokens is None
    assert len(server.requests) == 1


def test_lookup_is_skipped_when_nothing_is_missing(server: ScriptedServer) -> None:
    full = completion(use=usage(prompt_tokens_details={"cached_tokens": 0}))
    server.set_script(openrouter(chat=Reply.json(full)))
    response = backend(server).chat_completion(HI)
    assert response.is_success and response.cached_tokens == 0
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "lookup",
    [
        Reply.error(404, "Generation not found"),
        Reply.json({"data": "nope"}),
        Reply.text("not json"),
        Reply(headers={"Content-Type": "application/json"}, before_headers=[Stall()]),
    ],
    ids=["404", "no-data-object", "not-json", "stall"],
)
def test_a_failing_lookup_leaves_the_call_successful(
    server: ScriptedServer, lookup: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    server.set_script(openrouter(lookup=lookup))
    caplog.set_level(logging.DEBUG, logger="llmchat")
    b = backend(server, server_probe_timeout=0.3)
    response = b.chat_completion(HI)
    assert response.is_success and response.err is None and response.msg == "Paris."
    assert response.cost == 0.0042 and response.cached_tokens is None
    assert len(server.requests) == 2
    assert "generation lookup gave nothing" in caplog.text
    assert KEY not in caplog.text


def test_a_stalled_lookup_is_bounded_on_the_stream_path(server: ScriptedServer) -> None:
    server.set_script(openrouter(lookup=Reply(before_headers=[Stall()])))
    started = time.monotonic()
    response = backend(server, server_probe_timeout=0.3).chat_completion_stream(HI).wait(10)
    assert response.is_success and response.msg == "Paris."
    assert time.monotonic() - started < 5


# -- secrets ------------------------------------------------------------------------------


def test_key_never_in_reprs_errors_or_logs(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="llmchat")
    server.set_script(openrouter(lookup=Reply.error(401, f"bad key {KEY}")))
    b = backend(server, x_title="App")
    blocking = b.chat_completion(HI)
    streamed = b.chat_completion_stream(HI).wait(10)
    server.set_script(Reply.error(401, f"No auth credentials for {KEY}"))
    failed = b.chat_completion(HI)
    assert blocking.is_success and streamed.is_success and failed.error_status == 401
    texts = [repr(b), str(b), repr(b.clone()), repr(b.prepare_chat_request(HI))]
    texts += [repr(r) for r in (blocking, streamed, failed)] + [failed.err or "", caplog.text]
    assert all(KEY not in text for text in texts)
    assert "[redacted]" in (failed.err or "")
