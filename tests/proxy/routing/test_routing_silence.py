"""A node that goes silent mid-stream: bounded by its read timeout, in-band, ejected, slot freed.

The transport's read timeout (a backend's `headers` timeout) bounds every
silence in a body, not only the wait for the headers, on the OpenAI face's
byte relay and on the Response path the other faces use alike. A node that
hangs after some chunks is scripted on loopback (`Stall`: the connection
stays open, nothing more comes), the node's read timeout is made short, and
the real SDKs read through the routed proxy.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import anthropic
import openai
import pytest

from llmchat.proxy.failures import client_message
from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.upstream import PASSIVE_BACKOFF, RoutedUpstream
from llmchat.testing import Pings, Reply, Stall, Write

from ...support.chat_frames import chunk
from ..faces.gemini_support import generate, text_of
from ..support import anthropic_client
from .nodes_support import config, node_config, nodes, openai_client, routed_proxy
from .test_routing_failover import Clock

SILENCE = 0.2
"""The node's read timeout in these tests: how long a silence it is allowed."""


def _silent_after_a_chunk(request: Any, then: Stall | Pings | None = None) -> Reply:
    first = b"data: " + json.dumps(chunk({"role": "assistant", "content": "partial "})).encode()
    return Reply(
        200,
        {"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[Write(first + b"\n\n"), then or Stall()],
    )


def _pinging_after_a_chunk(request: Any) -> Reply:
    """A node that can no longer answer but pings (llama-server after SIGTERM, every 30 s):
    each read is short, so only the time without an event bounds it."""
    return _silent_after_a_chunk(request, Pings(SILENCE / 4))


SILENT_NODES = pytest.mark.parametrize(
    "silent", [_silent_after_a_chunk, _pinging_after_a_chunk], ids=["stalled", "pinging"]
)


def _short_read_timeout(routed: RoutedUpstream, name: str) -> None:
    """The node's backend with a short read timeout (its `headers` timeout); nothing else."""
    backend = routed.nodes[name].backend
    backend.timeouts = dataclasses.replace(backend.timeouts, headers=SILENCE)


def _count_releases(routed: RoutedUpstream, name: str) -> list[int]:
    node = routed.nodes[name]
    released = [0]
    release = node.release

    def counted(index: int | None = None) -> None:
        released[0] += 1
        release(index)

    node.release = counted  # type: ignore[method-assign]
    return released


@SILENT_NODES
@pytest.mark.parametrize("face", ["openai", "anthropic", "gemini"])
def test_a_node_silent_mid_stream_is_an_in_band_timeout_and_is_ejected(
    face: str, silent: Any
) -> None:
    with nodes("a", "b") as (a, b):
        a.override = silent
        routed = RoutedUpstream(
            config([node_config(a), node_config(b)], {"m": [Tier("x", ("a",)), Tier("x", ("b",))]}),
            clock=Clock(),
        )
        _short_read_timeout(routed, "a")
        released = _count_releases(routed, "a")
        with routed_proxy(routed) as (url, sink):
            seen: list[str] = []
            if face == "openai":  # the byte relay
                stream = openai_client(url).chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                )
                with pytest.raises(openai.APIError) as info:
                    for part in stream:
                        seen.append(part.choices[0].delta.content or "")
                assert type(info.value) is openai.APIError  # in-band, not a status
                assert info.value.message == client_message("timeout", None)
                assert seen == ["partial "]
            elif face == "gemini":  # the Response path, Gemini's SSE
                answer, chunks = generate(url, "sse", "m")
                assert answer.status == 200 and text_of(chunks) == "partial ", answer
                # In band after the stream began: the bare error object (Vertex's form).
                last = answer.body.decode().rstrip("\r\n").rsplit("\n", 1)[-1]
                error = json.loads(last)["error"]
                assert error["message"] == client_message("timeout", None)
                assert (error["code"], error["status"]) == (504, "DEADLINE_EXCEEDED")
            else:  # the Response path
                events = anthropic_client(url).messages.create(
                    model="m",
                    max_tokens=8,
                    messages=[{"role": "user", "content": "hi"}],
                    stream=True,
                )
                with pytest.raises(anthropic.APIError, match="did not answer in time"):
                    seen.extend(event.type for event in events)
                assert "content_block_delta" in seen
            [event] = sink.wait(1)
            assert (event["ok"], event["error_type"], event["node"]) == (False, "timeout", "a")
            report = routed.nodes["a"].report()
            assert report["state"] == "ejected" and report["ejected_for_s"] == PASSIVE_BACKOFF
            assert released == [1] and routed.nodes["a"].inflight == 0
            # The next request goes to the other node: a is out for its back-off.
            answer = openai_client(url).chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
            assert answer.headers["x-llmchat-node"] == "b"
            assert b.chats == 1


@SILENT_NODES
def test_the_one_upstream_relay_names_the_read_timeout_it_used(
    caplog: pytest.LogCaptureFixture, silent: Any
) -> None:
    """The log says the silence the backend allowed, not the default's 60 s."""
    from llmchat import OpenAICommon
    from llmchat.testing import ScriptedServer

    from ...support.proxy import UsageSink, running_proxy

    sink = UsageSink()
    with ScriptedServer(silent(None)) as upstream_url:
        with OpenAICommon(upstream_url, headers_timeout=SILENCE) as backend:
            with running_proxy(backend, usage_log=sink) as url:
                client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
                with client, pytest.raises(openai.APIError) as info:
                    for _ in client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                    ):
                        pass
                [event] = sink.wait(1)
    assert info.value.message == client_message("timeout", None)
    assert event["error_type"] == "timeout"
    assert f"Body silent for more than {SILENCE}s" in caplog.text


def test_a_cancel_after_the_first_byte_does_not_eject() -> None:
    """A client that hangs up mid-stream is nobody's fault upstream."""
    with nodes("a") as (a,):
        a.override = _silent_after_a_chunk
        routed = RoutedUpstream(config([node_config(a)], {"m": [Tier("x", ("a",))]}), clock=Clock())
        released = _count_releases(routed, "a")
        with routed_proxy(routed) as (url, sink):
            stream = openai_client(url).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            first = next(iter(stream))
            assert first.choices[0].delta.content == "partial "
            stream.close()  # the client hangs up while the node is silent
            [event] = sink.wait(1)
        assert event["ok"] is False
        assert routed.nodes["a"].report()["state"] != "ejected"
        assert released == [1]


def _ends_on_length(request: Any) -> Reply:
    """A stream the model ends at its token limit: a failure, but the node served it."""
    return Reply.sse(
        [chunk({"role": "assistant", "content": "partial "}), chunk({}, "length")], done=True
    )


def _in_band_error(request: Any) -> Reply:
    """A stream that ends with the server's in-band error about the request."""
    return Reply.sse(
        [chunk({"role": "assistant", "content": "partial "}), {"error": {"message": "bad"}}],
        done=False,
    )


@pytest.mark.parametrize("ending", [_ends_on_length, _in_band_error], ids=["length", "in-band"])
def test_an_answer_the_model_or_server_ended_does_not_eject(ending: Any) -> None:
    """Only a stream that broke off (cut, silent, gone) is the node's fault: a node whose
    answer hit ``max_tokens`` stays eligible for the next request."""
    with nodes("a") as (a,):
        a.override = ending
        routed = RoutedUpstream(config([node_config(a)], {"m": [Tier("x", ("a",))]}), clock=Clock())
        with routed_proxy(routed) as (url, sink):
            events = anthropic_client(url).messages.create(
                model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}], stream=True
            )
            seen = [event.type for event in events] if ending is _ends_on_length else []
            if ending is _in_band_error:
                with pytest.raises(anthropic.APIError):
                    seen.extend(event.type for event in events)
            [event] = sink.wait(1)
        assert "content_block_delta" in seen
        assert event["node"] == "a"
        assert routed.nodes["a"].report()["state"] != "ejected"


def _long_stream(request: Any) -> Reply:
    """A well-formed stream longer than the node's `max_response_bytes` in these tests."""
    deltas = [chunk({"role": "assistant", "content": "word " * 20}) for _ in range(20)]
    return Reply.sse([*deltas, chunk({}, "stop")], done=True)


@pytest.mark.parametrize("face", ["openai", "anthropic"])
def test_a_body_past_the_size_limit_is_in_band_and_does_not_eject(face: str) -> None:
    """The relay and the Response path share one rule (`RoutedUpstream.on_broken`): a body
    that passes the proxy's own size limit is the client's in-band error, and the node,
    which served it, stays eligible (before, the relay ejected on any broken body)."""
    with nodes("a") as (a,):
        a.override = _long_stream
        routed = RoutedUpstream(config([node_config(a)], {"m": [Tier("x", ("a",))]}), clock=Clock())
        routed.nodes["a"].backend.max_response_bytes = 600
        released = _count_releases(routed, "a")
        with routed_proxy(routed) as (url, sink):
            messages = [{"role": "user", "content": "hi"}]
            if face == "openai":
                stream: Any = openai_client(url).chat.completions.create(
                    model="m", messages=messages, stream=True
                )
                error: type[Exception] = openai.APIError
            else:
                stream = anthropic_client(url).messages.create(
                    model="m", max_tokens=8, messages=messages, stream=True
                )
                error = anthropic.APIError
            seen: list[Any] = []
            with pytest.raises(error):
                seen.extend(stream)
            [event] = sink.wait(1)
        assert seen, "the first events were relayed before the limit"
        assert event["ok"] is False and event["node"] == "a"
        assert routed.nodes["a"].report()["state"] != "ejected"
        assert released == [1]
