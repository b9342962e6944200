"""pipeline.judge: every ending and state into one verdict (pure, table tests)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from llmchat.pipeline.judge import (
    ERR_STREAM_CLOSED,
    Ending,
    Verdict,
    judge,
    judge_finish,
    judge_reason,
)


@dataclass
class S:
    finish_reason: str | None = None
    done: bool = False
    error: str | None = None
    dropped: int = 0
    undecodable: int = 0
    saw_tool_calls: bool = False
    saw_choice: bool = True
    pending: bool = False


FIN = Verdict(finished=True)
CLOSED = Verdict("response", ERR_STREAM_CLOSED)
UNFINISHED = Verdict("response", "Stream ended inside an unfinished tool call")
TOOLS_DROPPED = Verdict(
    "response",
    "1 stream frame(s) dropped while tool calls were streaming; the calls may be corrupt",
)

TABLE = [
    # provider ends
    ("done", S(), FIN),
    ("done", S(finish_reason="stop"), FIN),
    ("eof", S(finish_reason="length"), FIN),
    ("eof", S(), CLOSED),
    ("grace", S(finish_reason="stop"), FIN),
    ("eof", S(error="boom", finish_reason="stop"), Verdict("response", "boom")),
    ("done", S(dropped=1), FIN),
    ("done", S(dropped=1, saw_tool_calls=True), TOOLS_DROPPED),
    ("eof", S(pending=True, saw_tool_calls=True), UNFINISHED),
    (
        "done",
        S(undecodable=2, dropped=2),
        Verdict("response", "2 stream frame(s) were not valid UTF-8; their text was lost"),
    ),
    ("body", S(finish_reason="stop"), FIN),
    ("body", S(saw_choice=False), Verdict("response", "Response has no choices: {}")),
    # not the provider's end
    ("cut", S(), CLOSED),
    ("cut", S(finish_reason="stop"), FIN),
    ("cancelled", S(finish_reason="stop", done=True), Verdict(cancelled=True)),
]


@pytest.mark.parametrize(("kind", "state", "expected"), TABLE)
def test_provider_and_stream_endings(kind: str, state: S, expected: Verdict) -> None:
    ending = Ending(kind, body="{}") if kind == "body" else Ending(kind)  # type: ignore[arg-type]
    assert judge(ending, state) == expected


@pytest.mark.parametrize(
    ("ending", "expected"),
    [
        (Ending("deadline", "timeout", "No complete"), Verdict("timeout", "No complete")),
        (Ending("transport", "connection", "refused"), Verdict("connection", "refused")),
        (Ending("limit", message="too big"), Verdict("response", "too big")),
        (Ending("http", message="nope", status=429), Verdict("http", "nope", 429)),
        (
            Ending("malformed", message="Empty response body"),
            Verdict("response", "Empty response body"),
        ),
    ],
)
@pytest.mark.parametrize("state", [S(), S(finish_reason="stop", done=True)])
def test_failures_whatever_the_state(ending: Ending, expected: Verdict, state: S) -> None:
    assert judge(ending, state) == expected


@pytest.mark.parametrize(
    ("decided", "calls", "reason", "error_class", "err"),
    [
        ("stop", True, "tool_calls", None, None),
        ("stop", False, "stop", None, None),
        (None, True, None, None, None),
        ("length", False, "length", "response", "Hit max tokens"),
        ("content_filter", False, "content_filter", "response", "Blocked by content filter"),
        ("eos", False, "eos", "response", "Unknown finish reason: eos"),
    ],
)
def test_the_decided_reasons_rules(
    decided: str | None, calls: bool, reason: str | None, error_class: str | None, err: str | None
) -> None:
    got_reason, verdict = judge_reason(decided, calls)
    assert got_reason == reason and (verdict.error_class, verdict.err) == (error_class, err)
    assert judge_finish(reason) == (error_class, err)
