"""OpenRouter's answers over real sockets: response extras and reasoning, the /generation
lookup, and the key kept secret (construction and request bodies: test_openrouter.py).
"""

from __future__ import annotations

import copy
import logging
import time

import pytest

from llmchat.backends.openrouter import (
    OpenRouter,
    OpenRouterResponse,
)
from llmchat.testing import Reply, ScriptedServer, Stall, Write

from .openrouter_support import (
    GEN_ID,
    HI,
    KEY,
    PROCESSING,
    backend,
    chunk,
    completion,
    generation,
    openrouter,
    usage,
)

# The `server` fixture (tests/conftest.py) runs this script, fresh for each test.
SERVER_SCRIPT = openrouter


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
