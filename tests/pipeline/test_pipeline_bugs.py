"""One test per pipeline bug: each fails on the old core and passes on the one-pipeline core.

Black-box over real sockets (the loopback `ScriptedServer`), through the public
API and the documented override points only, so the file runs unchanged on
either core. Each test's comment says what the old core (main at the time of
writing) does instead. Where a test has several paths or scenarios it records
them all and asserts once, so a failure shows every path at a glance.

Waits are on events (the Response settling, the server seeing the hang-up, the
thread that read the body finishing), never on sleeps. The reader thread is
found through the transport seam (`OpenAICommon(transport=...)`): the thread
that iterates the body is the one that would run any late hook, so joining it
is how a test knows nothing more can happen.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from llmchat.response import Response
from llmchat.testing import Reply, ScriptedServer, Step, WaitFor, Write

from .support import (
    CALL,
    CALL_EVENTS,
    HI,
    SETTLE_GUARD,
    SSE,
    URLS,
    Recording,
    chat_body,
    chunk_event,
    final_chunk,
    frames,
    mismatch,
    run,
    text_body,
    text_event,
    usage_event,
)

# -- 1. a tool call the provider ends with "stop" ----------------------------------------


def test_bug1_tool_calls_ended_with_stop_reconcile_the_providers_stop_on_every_path(
    server: ScriptedServer,
) -> None:
    # main: chat blocking keeps "stop" (hook handed "stop"); chat stream rewrites it to
    # "tool_calls" before the hook, so the hook is handed "tool_calls" and the two modes
    # report different finish reasons for the same reply.
    server.push(Reply.json(chat_body({"role": "assistant", "tool_calls": [CALL]}, "stop")))
    server.push(Reply.sse([*CALL_EVENTS, chunk_event(finish="stop"), usage_event()]))
    server.push(Reply.json(text_body("ok", "stop")))
    server.push(Reply.sse([text_event("ok"), text_event(finish="stop")]))
    observed = {}
    for path in ("chat blocking", "chat stream", "text blocking", "text stream"):
        backend = Recording(server.url)
        response = run(backend, path)
        observed[path] = {
            "is_success": response.is_success,
            "provider_finish_reason": response.provider_finish_reason,
            "reconciled": backend.reconciled,
            "tool_calls": [(c.name, c.id, c.arguments) for c in response.tool_calls],
        }
        observed[path]["finish_reason"] = response.finish_reason
    decided = observed["chat blocking"]["finish_reason"]
    assert decided in ("stop", "tool_calls"), decided
    call = [("get_weather", "call_1", {"city": "Oslo"})]
    expected = {
        path: {
            "is_success": True,
            "provider_finish_reason": "stop",
            "reconciled": ["stop"],
            "tool_calls": call if path.startswith("chat") else [],
            "finish_reason": decided if path.startswith("chat") else "stop",
        }
        for path in observed
    }
    assert observed == expected, mismatch(observed, expected)


# -- 2. list content with a thinking part --------------------------------------------------


def test_bug2_thinking_part_of_list_content_is_reasoning_in_both_modes(
    server: ScriptedServer,
) -> None:
    # main: the stream keeps the thinking part as reasoning_text, the blocking body drops
    # it (reasoning_text None): only reasoning_content / reasoning are read there.
    thinking = {"type": "thinking", "thinking": "Let me think."}
    answer = {"type": "text", "text": "Answer."}
    server.push(Reply.json(chat_body({"role": "assistant", "content": [thinking, answer]}, "stop")))
    events = [
        chunk_event({"role": "assistant", "content": [thinking]}),
        chunk_event({"content": [answer]}),
        chunk_event(finish="stop"),
    ]
    server.push(Reply.sse(events))
    observed = {}
    for path in ("chat blocking", "chat stream"):
        response = run(Recording(server.url), path)
        observed[path] = (response.is_success, response.reasoning_text, response.msg)
    expected = {path: (True, "Let me think.", "Answer.") for path in observed}
    assert observed == expected, mismatch(observed, expected)


# -- 3. top-level citations on a stream ------------------------------------------------------


def test_bug3_citations_reach_a_streamed_response_and_its_final_chunk(
    server: ScriptedServer,
) -> None:
    # main: a streamed Response never takes citations (None on the Response and on every
    # chunk); only the blocking path reads the top-level member.
    every = [  # Perplexity's shape: the list on every event
        chunk_event({"role": "assistant", "content": "Paris"}, citations=URLS),
        chunk_event(finish="stop", citations=URLS),
        usage_event() | {"citations": URLS},
    ]
    first_only = [
        chunk_event({"role": "assistant", "content": "Paris"}, citations=URLS),
        chunk_event(finish="stop"),
    ]
    server.push(
        Reply.json(chat_body({"role": "assistant", "content": "Paris"}, "stop", citations=URLS))
    )
    server.push(Reply.sse(every))
    server.push(Reply.sse(first_only))
    observed = {}
    for path in ("chat blocking", "chat stream", "chat stream (first event only)"):
        response = run(Recording(server.url), path.removesuffix(" (first event only)"))
        final = final_chunk(response)
        observed[path] = {
            "is_success": response.is_success,
            "citations": response.citations,
            "final chunk citations": None if final is None else final.citations,
        }
    # Only on the first event: the Response has them; which chunk carries them is open.
    observed["chat stream (first event only)"].pop("final chunk citations")
    expected = {
        "chat blocking": {"is_success": True, "citations": URLS, "final chunk citations": URLS},
        "chat stream": {"is_success": True, "citations": URLS, "final chunk citations": URLS},
        "chat stream (first event only)": {"is_success": True, "citations": URLS},
    }
    assert observed == expected, mismatch(observed, expected)


# -- 4. the final chunk's finish reason is the provider's ----------------------------------


def test_bug4_final_chunk_carries_the_providers_reason_and_the_response_the_decided_one(
    server: ScriptedServer,
) -> None:
    # main: the blocking final chunk carries the decided reason ("stop" for a provider's
    # "eos"), not the provider's; a chat stream's final chunk carries "tool_calls" for a
    # provider's "stop" with calls. Chunk.finish_reason is documented as the provider's.
    server.push(Reply.json(chat_body({"role": "assistant", "content": "hi"}, "eos")))
    server.push(Reply.sse([chunk_event({"content": "hi"}), chunk_event(finish="eos")]))
    server.push(Reply.json(text_body("hi", "eos")))
    server.push(Reply.sse([text_event("hi"), text_event(finish="eos")]))
    server.push(Reply.sse([*CALL_EVENTS, chunk_event(finish="stop")]))
    observed = {}
    for path in ("chat blocking", "chat stream", "text blocking", "text stream", "tools stream"):
        response = run(Recording(server.url, map_eos=True), path.replace("tools", "chat"))
        final = final_chunk(response)
        observed[path] = {
            "final chunk finish_reason": None if final is None else final.finish_reason,
            "provider_finish_reason": response.provider_finish_reason,
            "is_success": response.is_success,
        }
        if path != "tools stream":  # what a stop with calls is decided to be is open
            observed[path]["finish_reason"] = response.finish_reason
    eos = {
        "final chunk finish_reason": "eos",
        "provider_finish_reason": "eos",
        "is_success": True,
        "finish_reason": "stop",
    }
    expected = {path: eos for path in ("chat blocking", "chat stream", "text blocking")}
    expected["text stream"] = eos
    expected["tools stream"] = {
        "final chunk finish_reason": "stop",
        "provider_finish_reason": "stop",
        "is_success": True,
    }
    assert observed == expected, mismatch(observed, expected)


# -- 5. a cancel between the finish chunk and the close ----------------------------------------


def test_bug5_cancel_after_the_finish_chunk_of_a_close_delimited_stream_reconciles_nothing(
    server: ScriptedServer,
) -> None:
    # main: the cancel shuts the socket down, which a close-delimited body reads as its
    # normal end; the reader then settles the stream as if it had ended: it runs
    # _reconcile_finish_reason (["stop"]) and _on_stream_complete (["stream"]) on a
    # Response already cancelled.
    gate = threading.Event()
    steps: list[Step] = [
        Write(frames([chunk_event({"content": "x"})], done=False)),
        Write(frames([chunk_event(finish="stop")], done=False)),
        WaitFor(gate, timeout=SETTLE_GUARD),  # then the server closes: the body's end
        Write(frames([usage_event()])),
    ]
    server.push(Reply(headers=SSE, framing="close", steps=steps))
    backend = Recording(server.url, stream_finish_grace=60)
    response = backend.chat_completion_stream(HI)
    final = next(chunk for chunk in response if chunk.is_final)
    response.cancel()
    gate.set()
    assert backend.tracker.join_readers(), "the reader thread never ended"
    observed = {
        "final chunk": final.finish_reason,
        "is_cancelled": response.is_cancelled,
        "is_success": response.is_success,
        "err": response.err,
        "error_class": response.error_class,
        "finish_reason": response.finish_reason,
        "reconciled": backend.reconciled,
        "completed": backend.completed,
        "msg": response.msg,
    }
    expected = {
        "final chunk": "stop",
        "is_cancelled": True,
        "is_success": False,
        "err": "Cancelled by user",
        "error_class": None,
        "finish_reason": "stop",  # it still names the reason that had arrived
        "reconciled": [],
        "completed": [],
        "msg": "x",
    }
    assert observed == expected, mismatch(observed, expected)


# -- 6. an empty data line is not a dropped frame ----------------------------------------------


def test_bug6_empty_data_line_in_a_tool_call_stream_is_not_a_dropped_frame(
    server: ScriptedServer,
) -> None:
    # main: "data:\n\n" is counted as a dropped frame (dropped_frames 1), and a dropped
    # frame while tool calls stream fails the Response ("1 stream frame(s) dropped while
    # tool calls were streaming; the calls may be corrupt").
    body = frames(CALL_EVENTS[:2], done=False) + b"data:\n\n"
    body += frames([*CALL_EVENTS[2:], chunk_event(finish="tool_calls"), usage_event()])
    server.push(Reply(headers=SSE, framing="chunked", steps=[Write(body)]))
    response = run(Recording(server.url), "chat stream")
    observed = {
        "is_success": response.is_success,
        "err": response.err,
        "dropped_frames": response.dropped_frames,
        "tool_calls": [(c.name, c.id, c.arguments) for c in response.tool_calls],
        "finish_reason": response.finish_reason,
    }
    expected = {
        "is_success": True,
        "err": None,
        "dropped_frames": 0,
        "tool_calls": [("get_weather", "call_1", {"city": "Oslo"})],
        "finish_reason": "tool_calls",
    }
    assert observed == expected, mismatch(observed, expected)


# -- 7. a cancel after the Response is done ------------------------------------------------------


def test_bug7_cancel_after_done_changes_nothing(server: ScriptedServer) -> None:
    # main: the late cancel sets cancel_requested to True on a settled Response (the rest
    # is unchanged). By the spec a cancel after the generation finished is a no-op.
    server.push(Reply.json(chat_body({"role": "assistant", "content": "done"}, "stop")))
    server.push(Reply.sse([chunk_event({"content": "done"}), chunk_event(finish="stop")]))
    observed = {}
    for path in ("chat blocking", "chat stream"):
        backend = Recording(server.url)
        response = run(backend, path)
        response.cancel()
        backend.cancel(response)
        observed[path] = {
            "cancel_requested": response.cancel_requested,
            "is_cancelled": response.is_cancelled,
            "is_success": response.is_success,
            "err": response.err,
            "msg": response.msg,
        }
    expected = {
        "cancel_requested": False,
        "is_cancelled": False,
        "is_success": True,
        "err": None,
        "msg": "done",
    }
    assert observed == dict.fromkeys(observed, expected), mismatch(
        observed, dict.fromkeys(observed, expected)
    )


# -- 8. every payload is lifted; nothing lands after the settle ------------------------------------


def test_bug8_lift_usage_sees_every_decoded_payload(server: ScriptedServer) -> None:
    # main: a stream's _lift_usage is called only for a payload with "usage" or while the
    # Response has no model yet: here 2 of the 5 events (the first and the usage event).
    events = [
        chunk_event({"role": "assistant", "content": ""}),
        chunk_event({"content": "Hel"}),
        chunk_event({"content": "lo"}),
        chunk_event(finish="stop"),
        usage_event(),
    ]
    body = chat_body({"role": "assistant", "content": "Hello"}, "stop")
    server.push(Reply.json(body))
    server.push(Reply.sse(events))
    observed = {}
    for path in ("chat blocking", "chat stream"):
        backend = Recording(server.url)
        response = run(backend, path)
        observed[path] = {
            "is_success": response.is_success,
            "payloads lifted": len(backend.lifted),
            "lifted": backend.lifted,
        }
    expected = {
        "chat blocking": {"is_success": True, "payloads lifted": 1, "lifted": [body]},
        "chat stream": {"is_success": True, "payloads lifted": len(events), "lifted": events},
    }
    assert observed == expected, mismatch(observed, expected)


class CancelsOnB(Recording):
    """Cancels its own stream from `_lift_usage` on the payload whose content is "B".

    It snapshots the Response right after the cancel: the settled state nothing may
    change any more.
    """

    snapshot: dict[str, Any] | None = None

    def _lift_usage(self, response: Response, payload: Mapping[str, Any]) -> None:
        super()._lift_usage(response, payload)
        choices = payload.get("choices") or [{}]
        if (choices[0].get("delta") or {}).get("content") == "B" and self.snapshot is None:
            response.cancel()
            self.snapshot = settled_state(response, self)


def settled_state(response: Response, backend: Recording) -> dict[str, Any]:
    """What must not change once `response` settled."""
    return {
        "is_done": response.is_done,
        "is_cancelled": response.is_cancelled,
        "is_success": response.is_success,
        "err": response.err,
        "msg": response.msg,
        "reasoning_text": response.reasoning_text,
        "tool_calls": list(response.tool_calls),
        "finish_reason": response.finish_reason,
        "chunks": [chunk.content for chunk in response],
        "reconciled": list(backend.reconciled),
        "completed": list(backend.completed),
    }


def test_bug8_nothing_is_added_to_a_response_after_it_settled(server: ScriptedServer) -> None:
    # main: "cancel from a hook mid-read" fails: the reader goes on applying the frames of
    # the read it is in after the Response settled; msg grows from "A" to "AB", the finish
    # reason is stamped, and _reconcile_finish_reason / _on_stream_complete run.
    # The other scenarios hold on main and guard the new core.
    observed: dict[str, Any] = {}
    expected: dict[str, Any] = {}

    # A finished stream, iterated again later: the same chunks and text.
    server.push(Reply.sse([chunk_event({"content": "A"}), chunk_event(finish="stop")]))
    backend = Recording(server.url)
    response = run(backend, "chat stream")
    before = settled_state(response, backend)
    assert backend.tracker.join_readers()
    observed["iterated after done"] = settled_state(response, backend)
    expected["iterated after done"] = before

    # Cancelled from a hook while the reader is inside one read of five frames.
    events = [
        chunk_event({"content": "A"}, model=None),
        chunk_event({"content": "B"}, model=None),
        chunk_event({"content": "C"}, model=None),
        chunk_event(finish="stop", model=None),
    ]
    server.push(Reply(headers=SSE, framing="chunked", steps=[Write(frames(events))]))
    cancels = CancelsOnB(server.url)
    response = cancels.chat_completion_stream(HI)
    assert response.wait(SETTLE_GUARD).is_done
    assert cancels.tracker.join_readers()
    observed["cancel from a hook mid-read"] = settled_state(response, cancels)
    expected["cancel from a hook mid-read"] = cancels.snapshot

    # The server goes on writing after a cancel, and after the deadline.
    scenarios: dict[str, dict[str, Any]] = {
        "after a cancel": {},
        "after the deadline": {"request_timeout": 0.5},
    }
    for scenario, kwargs in scenarios.items():
        gate = threading.Event()
        steps: list[Step] = [
            Write(frames([chunk_event({"content": "A"})], done=False)),
            WaitFor(gate, timeout=SETTLE_GUARD),
            Write(frames([chunk_event({"content": "late"}), chunk_event(finish="stop")])),
        ]
        server.push(Reply(headers=SSE, framing="close", steps=steps))
        backend = Recording(server.url, **kwargs)
        response = backend.chat_completion_stream(HI)
        assert next(iter(response)).content == "A"
        if not kwargs:
            response.cancel()
        assert response.wait(SETTLE_GUARD).is_done
        settled = settled_state(response, backend)
        gate.set()
        assert backend.tracker.join_readers()
        observed[f"server writes on {scenario}"] = settled_state(response, backend)
        expected[f"server writes on {scenario}"] = settled
        assert settled["msg"] == "A" and not settled["is_success"], settled

    assert observed == expected, mismatch(observed, expected)
