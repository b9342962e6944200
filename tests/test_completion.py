"""completion: reading finished bodies (golden llama-server captures) and the finish rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat.completion import (
    error_message,
    judge_finish,
    no_finish,
    parse_completion,
    usage_fields,
)

from .support.paths import CAPTURES_DIR

LLAMACPP = CAPTURES_DIR / "llamacpp"


def _capture_bodies() -> list[Any]:
    """Every captured 200 body that has `choices`, with its kind."""
    if not LLAMACPP.is_dir():
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=f"{LLAMACPP} absent"))]
    params = []
    for path in sorted(LLAMACPP.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        status, body = (
            (data[0], data[1])
            if isinstance(data, list)
            else (data.get("status"), data.get("response"))
        )
        if status == 200 and isinstance(body, dict) and "choices" in body:
            kind = "text" if body.get("object") == "text_completion" else "chat"
            params.append(pytest.param(body, kind, id=path.stem))
    return params


@pytest.mark.parametrize(("body", "kind"), _capture_bodies())
def test_captured_bodies(body: dict[str, Any], kind: str) -> None:
    got = parse_completion(body, kind=kind)
    choice = body["choices"][0]
    assert got.finish_reason == choice["finish_reason"]
    assert got.model == body["model"] and got.id == body["id"]
    if kind == "text":
        assert got.text == choice["text"]
        return
    message = choice["message"]
    assert got.text == (message.get("content") or "")
    assert got.reasoning == (message.get("reasoning_content") or None)
    calls = message.get("tool_calls") or []
    assert [c.name for c in got.tool_calls] == [c["function"]["name"] for c in calls]
    assert [c.arguments for c in got.tool_calls] == [
        json.loads(c["function"]["arguments"]) for c in calls
    ]
    fields = usage_fields(body)
    usage = body["usage"]
    assert fields["prompt_tokens"] == usage["prompt_tokens"]
    assert fields["completion_tokens"] == usage["completion_tokens"]
    details = usage.get("prompt_tokens_details") or {}
    assert fields.get("cached_tokens") == details.get("cached_tokens")


def test_captures_cover_reasoning() -> None:
    """The random-weight model never completes a tool call in a blocking body;
    tool calls are covered by the stream transcripts and the unit cases here."""
    if not LLAMACPP.is_dir():
        pytest.skip(f"{LLAMACPP} absent")
    bodies = [p.values[0] for p in _capture_bodies()]
    parsed = [parse_completion(b) for b in bodies]
    assert any(c.reasoning for c in parsed), "no capture exercised reasoning"


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (None, (None, None)),
        ("stop", (None, None)),
        ("tool_calls", (None, None)),
        ("length", ("response", "Hit max tokens")),
        ("content_filter", ("response", "Blocked by content filter")),
        ("eos", ("response", "Unknown finish reason: eos")),
    ],
)
def test_judge_finish(reason: str | None, expected: tuple[Any, Any]) -> None:
    assert judge_finish(reason) == expected


@pytest.mark.parametrize("reason", [None, "", "null"])
def test_no_finish_spellings(reason: Any) -> None:
    assert no_finish(reason)
    body = {"choices": [{"message": {"content": "x"}, "finish_reason": reason}]}
    assert parse_completion(body).finish_reason is None


def test_reasoning_alias_refusal_and_list_content() -> None:
    got = parse_completion(
        {
            "choices": [
                {
                    "message": {
                        "content": [{"type": "text", "text": "a"}, {"type": "image_url"}],
                        "reasoning": "thought",
                        "refusal": "no",
                    },
                    "finish_reason": "stop",
                }
            ]
        }
    )
    assert (got.text, got.reasoning, got.refusal) == ("a", "thought", "no")


def test_undecodable_tool_arguments_are_flagged_not_fatal() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
    got = parse_completion({"choices": [{"message": {"tool_calls": [call]}}]})
    (tool,) = got.tool_calls
    assert tool.arguments == {} and tool.arguments_undecodable
    assert tool.arguments_json == "{oops"


def test_inband_errors() -> None:
    assert parse_completion({"error": {"message": "overloaded"}}).error == "overloaded"
    body = {"choices": [{"error": {"message": "upstream died"}, "finish_reason": "error"}]}
    assert parse_completion(body).error == "upstream died"


def test_usage_zero_is_kept_absent_is_left_out() -> None:
    fields = usage_fields(
        {
            "usage": {
                "prompt_tokens": 0,
                "completion_tokens": 3,
                "completion_tokens_details": {"reasoning_tokens": 2},
            }
        }
    )
    assert fields["prompt_tokens"] == 0
    assert fields["reasoning_tokens"] == 2
    assert "total_tokens" not in fields and "cached_tokens" not in fields
    assert usage_fields({"choices": []}) == {}


def test_usage_fields_do_not_change_the_payload() -> None:
    payload = {"usage": {"prompt_tokens": 1}, "model": "m"}
    snapshot = json.dumps(payload)
    usage_fields(payload)["usage"]["prompt_tokens"] = 99
    assert json.dumps(payload) == snapshot


@pytest.mark.parametrize(
    ("payload", "text", "expected"),
    [
        (
            {"error": {"code": 400, "message": "'messages' is required"}},
            "",
            "'messages' is required",
        ),
        ({"error": "bad key"}, "", "bad key"),
        ({"detail": "Not Found"}, "", "Not Found"),
        (None, "<html>502 Bad Gateway</html>", "<html>502 Bad Gateway</html>"),
        (None, "   ", "HTTP 503"),
    ],
)
def test_error_message(payload: Any, text: str, expected: str) -> None:
    assert error_message(payload, text, 503) == expected
