"""llmchat against a real llama.cpp `llama-server` (tiny random-weight model).

What the loopback server cannot prove: that the server really stops when a
stream is cancelled, that grammar-constrained output follows `required`
order, that strict chat templates accept normalized conversations.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import requests
import urllib3.util.connection

from llmchat import OpenAICommon, Settings
from llmchat.templates import ChatML

from .conftest import LlamaServer, wait_until

HELLO = [{"role": "user", "content": "Say hello."}]
LONG = 1500  # tokens; the model never emits EOS, so a generation this long is still running


def backend(server: LlamaServer, **kwargs: Any) -> OpenAICommon:
    kwargs.setdefault("settings", Settings(max_tokens=16, temperature=0))
    return OpenAICommon(server.url, model="tiny", **kwargs)


def predicted_tokens(server: LlamaServer) -> float:
    """The server's running total of generated tokens (its /metrics)."""
    return server.metrics().get("llamacpp:tokens_predicted_total", 0.0)


def slots_idle(server: LlamaServer) -> bool:
    return not any(slot.get("is_processing") for slot in server.get("/slots"))


# -- limits, blocking, streaming, usage -------------------------------------------


def test_probe_reports_the_per_slot_context_and_slots(chatml_server: LlamaServer) -> None:
    assert backend(chatml_server).probe_server_limits() == {
        "source": "llama.cpp",
        "context_length": 1024,  # -c 2048 shared by -np 2
        "slots": 2,
    }


def test_blocking_chat_hits_max_tokens_as_a_failure(chatml_server: LlamaServer) -> None:
    response = backend(chatml_server).chat_completion(HELLO)
    assert (response.is_success, response.finish_reason, response.err) == (
        False,
        "length",
        "Hit max tokens",
    )
    assert response.latest.strip() and response.completion_tokens == 16
    assert response.prompt_tokens and response.prompt_tokens > 0


def test_streaming_chat_reads_usage_after_the_finish(chatml_server: LlamaServer) -> None:
    b = backend(chatml_server)
    blocking = b.chat_completion(HELLO)
    streamed = b.chat_completion_stream(HELLO).wait(30)
    assert streamed.is_done and streamed.finish_reason == "length"
    assert streamed.msg == blocking.msg  # greedy decoding: the same words either way
    assert streamed.completion_tokens == 16 and streamed.prompt_tokens == blocking.prompt_tokens
    chunks = list(streamed)
    final = [c for c in chunks if c.is_final]
    assert len(final) == 1 and chunks[-1].usage is not None  # usage came after the finish


def test_connections_the_server_closes_after_streams_never_fail_a_call(
    chatml_server: LlamaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This llama-server closes the connection right after a stream's chunked
    # terminator (it keeps it after a blocking answer). llmchat reads that
    # terminator and pools the connection; the next request then finds it
    # dropped (urllib3's check) or dead (the one resend): never a failed call.
    connects: list[object] = []
    connect = urllib3.util.connection.create_connection

    def counting(*args: Any, **kwargs: Any) -> Any:
        connects.append(args[0])
        return connect(*args, **kwargs)

    monkeypatch.setattr(urllib3.util.connection, "create_connection", counting)
    with backend(chatml_server, settings=Settings(max_tokens=4, temperature=0)) as b:
        for _ in range(4):
            streamed = b.chat_completion_stream(HELLO).wait(30)
            assert streamed.finish_reason == "length", streamed.err
        assert b.chat_completion(HELLO).finish_reason == "length"
        before = len(connects)
        for _ in range(3):
            assert b.chat_completion(HELLO).finish_reason == "length"
    assert len(connects) == before  # blocking answers kept their connection


def test_repeated_prompt_reports_cached_tokens(chatml_server: LlamaServer) -> None:
    b = backend(chatml_server, settings=Settings(max_tokens=4, temperature=0, id_slot=0))
    messages = [{"role": "user", "content": "Repeat after me: " + "cache " * 40}]
    b.chat_completion(messages)
    second = b.chat_completion_stream(messages).wait(30)
    assert second.cached_tokens is not None and second.cached_tokens > 0
    assert second.prompt_tokens is not None and second.cached_tokens <= second.prompt_tokens


def test_stop_sequence_is_a_success(chatml_server: LlamaServer) -> None:
    b = backend(chatml_server)
    words = b.chat_completion(HELLO).latest.split()
    assert len(words) >= 3, "the tiny model should write words"
    stop = words[2]
    response = b.chat_completion(HELLO, settings=Settings(stop=[stop]))
    assert response.is_success and response.finish_reason == "stop"
    assert stop not in response.msg


def test_id_slot_pins_the_request(chatml_server: LlamaServer) -> None:
    before = {s["id"]: s.get("id_task") for s in chatml_server.get("/slots")}
    response = backend(chatml_server, settings=Settings(max_tokens=4, id_slot=1)).chat_completion(
        [{"role": "user", "content": "slot one please"}]
    )
    assert response.is_done
    after = {s["id"]: s.get("id_task") for s in chatml_server.get("/slots")}
    assert after[1] != before[1], "slot 1 did not run the request"
    assert after[0] == before[0], "slot 0 ran it instead"


def test_text_completion_through_completions(chatml_server: LlamaServer) -> None:
    b = backend(chatml_server, template=ChatML())
    response = b.text_completion(HELLO)
    assert response.finish_reason == "length" and response.latest.strip()
    streamed = b.text_completion_stream(HELLO).wait(30)
    assert streamed.latest == response.latest


# -- cancellation really stops the server --------------------------------------------


def test_cancel_mid_stream_frees_the_slot(chatml_server: LlamaServer) -> None:
    assert wait_until(lambda: slots_idle(chatml_server), 10)
    b = backend(chatml_server, settings=Settings(max_tokens=LONG, temperature=0, id_slot=0))
    before = predicted_tokens(chatml_server)
    response = b.chat_completion_stream(HELLO)
    first = next(iter(response))
    assert first is not None
    response.cancel()
    assert response.is_cancelled and response.error_class is None
    assert wait_until(lambda: slots_idle(chatml_server), 5), "the slot kept generating"
    # A slot going idle alone proves little: the slot's context (1024) ends this
    # generation by itself within seconds. The server's own token count must show
    # it stopped near where it was cancelled, not at the end of the window.
    generated = predicted_tokens(chatml_server) - before
    assert generated < 100, f"the server generated {generated} tokens after the cancel"


def test_cancel_while_queued_behind_busy_slots(chatml_server: LlamaServer) -> None:
    assert wait_until(lambda: slots_idle(chatml_server), 10)
    b = backend(chatml_server, settings=Settings(max_tokens=LONG, temperature=0))
    busy = [b.chat_completion_stream([{"role": "user", "content": f"busy {i}"}]) for i in (0, 1)]
    for response in busy:
        next(iter(response))  # both slots are generating now
    queued = b.chat_completion_stream([{"role": "user", "content": "queued"}])
    assert wait_until(lambda: chatml_server.metrics().get("llamacpp:requests_deferred", 0) >= 1, 5)
    queued.cancel()
    assert queued.is_cancelled and queued.msg == ""
    for response in busy:
        response.cancel()
    # The queued request must never start: once both slots are free, nothing is
    # processing and nothing is deferred.
    assert wait_until(
        lambda: (
            slots_idle(chatml_server)
            and chatml_server.metrics().get("llamacpp:requests_deferred", 0) == 0
        ),
        5,
    )
    assert slots_idle(chatml_server)


# -- structured output follows `required` -----------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "alpha": {"type": "integer"},
        "mid": {"type": "boolean"},
        "zulu": {"type": "integer"},
    },
    "required": ["zulu", "mid", "alpha"],
    "additionalProperties": False,
}


def _keys_in_order(text: str) -> list[str]:
    return list(json.loads(text, object_pairs_hook=lambda pairs: [k for k, _ in pairs]))


def test_json_schema_fields_come_out_in_required_order(chatml_server: LlamaServer) -> None:
    settings = Settings(max_tokens=64, temperature=0, json_schema=SCHEMA)
    response = backend(chatml_server).chat_completion(HELLO, settings=settings)
    assert response.is_success, response.err
    assert _keys_in_order(response.msg) == ["zulu", "mid", "alpha"]


def test_without_llmchats_ordering_the_fields_would_be_sorted(chatml_server: LlamaServer) -> None:
    """The same schema sent with plainly sorted keys: the grammar follows that order."""
    body = {
        "model": "tiny",
        "messages": HELLO,
        "max_tokens": 64,
        "temperature": 0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": SCHEMA, "strict": False},
        },
    }
    reply = requests.post(
        f"{chatml_server.url}/chat/completions",
        data=json.dumps(body, sort_keys=True),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    content = reply.json()["choices"][0]["message"]["content"]
    assert _keys_in_order(content) == ["alpha", "mid", "zulu"]


# -- reasoning ------------------------------------------------------------------------------


def test_reasoning_controls(reasoning_server: LlamaServer) -> None:
    b = backend(reasoning_server, settings=Settings(max_tokens=24, temperature=0))
    default = b.chat_completion(HELLO)
    assert default.reasoning_text and default.msg == ""  # the whole budget went to thinking
    budget = b.chat_completion(HELLO, settings=Settings(reasoning_budget_tokens=4))
    assert budget.reasoning_text and len(budget.reasoning_text) < len(default.reasoning_text)
    assert budget.msg.strip(), "after the budget the model answers"
    none = b.chat_completion(HELLO, settings=Settings(reasoning_effort="none"))
    assert none.reasoning_text is None and none.msg.strip()
    streamed = b.chat_completion_stream(HELLO).wait(30)
    assert streamed.reasoning_text == default.reasoning_text
    assert all(c.thinking is None or c.content == "" for c in streamed)


# -- strict chat templates ----------------------------------------------------------------

TOOL_CALL = {
    "id": "call1abcd",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
STRICT_CASES = {
    "two user turns": [
        {"role": "user", "content": "Part 1"},
        {"role": "user", "content": "Part 2"},
    ],
    "tool result then user": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
        {"role": "tool", "content": "18C", "tool_call_id": "call1abcd"},
        {"role": "user", "content": "And in Rome?"},
    ],
    "mid-conversation system message": [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "How are you?"},
    ],
}


@pytest.mark.parametrize("case", sorted(STRICT_CASES))
def test_strict_template_refuses_then_accepts_normalized(
    strict_server: LlamaServer, case: str
) -> None:
    messages = STRICT_CASES[case]
    raw = backend(strict_server).chat_completion(messages)
    assert (raw.error_class, raw.error_status) == ("http", 400), raw.err
    assert "alternate" in (raw.err or "").lower()
    normalized = backend(strict_server, message_normalization="alternate-roles")
    response = normalized.chat_completion(messages)
    assert response.error_class in (None, "response"), response.err  # length is fine here
    assert response.finish_reason in ("stop", "length") and response.latest.strip()


def test_cancelling_from_another_thread_during_prefill(chatml_server: LlamaServer) -> None:
    """A cancel before any response byte still settles at once and frees the slot."""
    b = backend(chatml_server, settings=Settings(max_tokens=LONG, temperature=0))
    response = b.chat_completion_stream([{"role": "user", "content": "word " * 900}])
    cancelled = threading.Event()

    def cancel() -> None:
        response.cancel()
        cancelled.set()

    threading.Thread(target=cancel).start()
    assert cancelled.wait(5) and response.is_cancelled
    assert wait_until(lambda: slots_idle(chatml_server), 5)
