"""OllamaStream: an OpenAI chunk stream rewritten as Ollama NDJSON."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from llmchat.protocols.ollama import OllamaStream

RFC3339_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def lines(data: bytes) -> list[dict[str, Any]]:
    """Parse emitted bytes; every line is non-blank, newline-terminated JSON."""
    if not data:
        return []
    assert data.endswith(b"\n")
    parts = data.split(b"\n")[:-1]
    assert all(part.strip() for part in parts)
    return [json.loads(part) for part in parts]


def one(data: bytes) -> dict[str, Any]:
    parsed = lines(data)
    assert len(parsed) == 1
    return parsed[0]


def text_chunk(text: str, model: str | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"choices": [{"index": 0, "delta": {"content": text}}]}
    if model is not None:
        chunk["model"] = model
    return chunk


def finish_chunk(reason: str = "stop", **delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}


def test_basics() -> None:
    stream = OllamaStream("qwen3")
    assert stream.content_type == "application/x-ndjson"
    assert stream.start() == b""
    assert not stream.errored


def test_bad_shape_refused() -> None:
    with pytest.raises(ValueError):
        OllamaStream("m", shape="embed")


def test_text_delta_line() -> None:
    stream = OllamaStream("qwen3")
    line = one(stream.delta(text_chunk("Hello")))
    assert line["model"] == "qwen3"
    assert line["message"] == {"role": "assistant", "content": "Hello"}
    assert line["done"] is False
    assert isinstance(line["created_at"], str)
    assert RFC3339_Z.match(line["created_at"])


def test_role_only_and_usage_only_emit_nothing() -> None:
    stream = OllamaStream("m")
    assert stream.delta({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}) == b""
    assert stream.delta({"choices": [{"index": 0, "delta": {"content": ""}}]}) == b""
    usage = {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}
    assert stream.delta(usage) == b""
    assert stream.usage() == (7, 3, 0)


def test_model_named_until_upstream_names_its_own() -> None:
    stream = OllamaStream("requested")
    assert one(stream.delta(text_chunk("a")))["model"] == "requested"
    assert one(stream.delta(text_chunk("b", model="upstream-1")))["model"] == "upstream-1"
    assert one(stream.delta(text_chunk("c")))["model"] == "upstream-1"
    assert one(stream.finish())["model"] == "upstream-1"


def test_tool_call_assembled_and_emitted_whole_on_finish_line() -> None:
    stream = OllamaStream("m")
    fragments = [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather"}},
        {"index": 0, "function": {"arguments": '{"city":'}},
        {"index": 0, "function": {"arguments": ' "Zürich"}'}},
    ]
    for fragment in fragments:
        chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]}
        assert stream.delta(chunk) == b""
    line = one(stream.delta(finish_chunk("tool_calls")))
    assert line["done"] is False
    assert line["message"]["role"] == "assistant"
    assert line["message"]["tool_calls"] == [
        {
            "id": "call_1",
            "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Zürich"}},
        }
    ]
    assert isinstance(line["message"]["tool_calls"][0]["function"]["arguments"], dict)
    final = one(stream.finish())
    assert final["done"] is True
    assert final["done_reason"] == "tool_calls"
    assert final["message"]["role"] == "assistant"
    assert not stream.errored


def test_parallel_tool_calls() -> None:
    stream = OllamaStream("m")
    frags = [
        {"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x":1}'}},
        {"index": 1, "id": "b", "function": {"name": "g", "arguments": "{}"}},
    ]
    stream.delta({"choices": [{"index": 0, "delta": {"tool_calls": frags}}]})
    line = one(stream.delta(finish_chunk("tool_calls")))
    calls = line["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["f", "g"]
    assert calls[0]["function"]["arguments"] == {"x": 1}
    assert calls[1]["function"]["arguments"] == {}


def test_finish_defaults() -> None:
    stream = OllamaStream("m")
    stream.delta(text_chunk("hi"))
    final = one(stream.finish())
    assert final == {
        "model": "m",
        "created_at": final["created_at"],
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 0,
        "eval_count": 0,
    }
    assert RFC3339_Z.match(final["created_at"])


def test_finish_reason_verbatim_usage_recorded_and_ints() -> None:
    stream = OllamaStream("m")
    stream.delta(text_chunk("hi"))
    assert stream.delta(finish_chunk("length")) == b""
    stream.delta({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 5}})
    final = one(stream.finish())
    assert final["done_reason"] == "length"
    assert final["prompt_eval_count"] == 12 and type(final["prompt_eval_count"]) is int
    assert final["eval_count"] == 5 and type(final["eval_count"]) is int


def test_finish_override_and_idempotence() -> None:
    stream = OllamaStream("m")
    stream.delta(finish_chunk("length"))
    stream.delta({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 5}})
    final = one(stream.finish(done_reason="stop", input_tokens=40, output_tokens=9))
    assert final["done_reason"] == "stop"
    assert final["prompt_eval_count"] == 40
    assert final["eval_count"] == 9
    assert stream.usage() == (40, 9, 0)
    assert stream.finish() == b""
    assert stream.delta(text_chunk("late")) == b""
    assert stream.error_event(500, "late") == b""
    assert not stream.errored


def test_pending_tool_call_at_finish_is_an_error() -> None:
    stream = OllamaStream("m")
    frag = {"index": 0, "id": "c", "function": {"name": "f", "arguments": '{"x":'}}
    assert stream.delta({"choices": [{"index": 0, "delta": {"tool_calls": [frag]}}]}) == b""
    line = one(stream.finish())
    assert set(line) == {"error"}
    assert isinstance(line["error"], str) and line["error"]
    assert "done" not in line
    assert stream.errored
    assert stream.finish() == b""


def test_error_event_ends_stream() -> None:
    stream = OllamaStream("m")
    stream.delta(text_chunk("partial"))
    line = one(stream.error_event(500, "Upstream error: boom"))
    assert line == {"error": "Upstream error: boom"}
    assert stream.errored
    assert stream.delta(text_chunk("more")) == b""
    assert stream.finish() == b""
    assert stream.error_event(500, "again") == b""


def test_upstream_error_object_becomes_error_line() -> None:
    stream = OllamaStream("m")
    line = one(stream.delta({"error": {"message": "rate limited", "code": 429}}))
    assert set(line) == {"error"}
    assert "rate limited" in line["error"]
    assert stream.errored
    assert stream.finish() == b""


def test_malformed_chunk_gets_generic_error() -> None:
    stream = OllamaStream("m")
    line = one(stream.delta({"choices": "nonsense-detail"}))
    assert set(line) == {"error"}
    assert "nonsense-detail" not in line["error"]
    assert stream.errored


def test_usage_content_bytes_counts_utf8() -> None:
    stream = OllamaStream("m")
    stream.delta(text_chunk("héllo "))
    stream.delta(text_chunk("日本"))
    stream.delta(text_chunk("🙂"))
    stream.finish()
    _, _, content_bytes = stream.usage()
    assert content_bytes == len("héllo 日本🙂".encode())
    assert content_bytes == 7 + 6 + 4


def test_non_ascii_written_as_utf8() -> None:
    stream = OllamaStream("m")
    data = stream.delta(text_chunk("Grüße"))
    assert "Grüße".encode() in data
    assert one(data)["message"]["content"] == "Grüße"


def test_generate_shape() -> None:
    stream = OllamaStream("qwen3", shape="generate")
    assert stream.content_type == "application/x-ndjson"
    line = one(stream.delta(text_chunk("Hi")))
    assert line["response"] == "Hi"
    assert "message" not in line
    assert line["done"] is False
    frag = {"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}
    assert stream.delta({"choices": [{"index": 0, "delta": {"tool_calls": [frag]}}]}) == b""
    assert stream.delta(finish_chunk("stop")) == b""
    final = one(stream.finish(input_tokens=3, output_tokens=1))
    assert final["response"] == ""
    assert "message" not in final
    assert final["done"] is True
    assert final["done_reason"] == "stop"
    assert final["prompt_eval_count"] == 3
    assert final["eval_count"] == 1
    assert not stream.errored
    assert stream.usage() == (3, 1, 2)


def test_full_chat_stream_every_line_has_role() -> None:
    stream = OllamaStream("m")
    out = stream.start()
    out += stream.delta({"model": "m", "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
    out += stream.delta(text_chunk("one "))
    out += stream.delta(text_chunk("two"))
    out += stream.delta(finish_chunk("stop"))
    out += stream.delta({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 2}})
    out += stream.finish()
    parsed = lines(out)
    assert len(parsed) == 3
    assert all(p["message"]["role"] == "assistant" for p in parsed)
    assert [p["done"] for p in parsed] == [False, False, True]
    assert "".join(p["message"]["content"] for p in parsed) == "one two"


def test_lines_are_deterministic_bytes() -> None:
    a, b = OllamaStream("m"), OllamaStream("m")
    a._now = b._now = lambda: "2025-01-01T00:00:00.000000Z"  # type: ignore[method-assign]
    assert a.delta(text_chunk("x")) == b.delta(text_chunk("x"))
    assert a.finish() == b.finish()


# -- thinking ----------------------------------------------------------------


def reasoning_chunk(text: str, key: str = "reasoning_content") -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {key: text}}]}


def test_chat_reasoning_only_chunk_writes_thinking_line() -> None:
    stream = OllamaStream("m")
    line = one(stream.delta(reasoning_chunk("Let me think")))
    assert line["message"] == {"role": "assistant", "content": "", "thinking": "Let me think"}
    assert line["done"] is False


def test_chat_reasoning_and_text_in_one_chunk() -> None:
    stream = OllamaStream("m")
    chunk = {"choices": [{"index": 0, "delta": {"reasoning_content": "r", "content": "t"}}]}
    assert one(stream.delta(chunk))["message"] == {
        "role": "assistant",
        "content": "t",
        "thinking": "r",
    }


def test_reasoning_key_fallback_and_precedence() -> None:
    stream = OllamaStream("m")
    line = one(stream.delta(reasoning_chunk("via reasoning", key="reasoning")))
    assert line["message"]["thinking"] == "via reasoning"
    both = {"choices": [{"index": 0, "delta": {"reasoning_content": "rc", "reasoning": "r"}}]}
    assert one(stream.delta(both))["message"]["thinking"] == "rc"
    null_rc = {"choices": [{"index": 0, "delta": {"reasoning_content": None, "reasoning": "r"}}]}
    assert one(stream.delta(null_rc))["message"]["thinking"] == "r"


def test_empty_or_non_string_reasoning_emits_nothing() -> None:
    stream = OllamaStream("m")
    assert stream.delta(reasoning_chunk("")) == b""
    assert stream.delta(reasoning_chunk(None, key="reasoning")) == b""  # type: ignore[arg-type]
    assert stream.delta({"choices": [{"index": 0, "delta": {"reasoning": 5}}]}) == b""
    assert not stream.errored


def test_text_lines_have_no_thinking_key() -> None:
    stream = OllamaStream("m")
    assert "thinking" not in one(stream.delta(text_chunk("x")))["message"]
    assert "thinking" not in one(stream.finish())["message"]


def test_generate_shape_thinking() -> None:
    stream = OllamaStream("m", shape="generate")
    line = one(stream.delta(reasoning_chunk("hmm")))
    assert line["thinking"] == "hmm"
    assert line["response"] == ""
    assert "message" not in line
    assert "thinking" not in one(stream.delta(text_chunk("ok")))


def test_thinking_not_counted_in_content_bytes() -> None:
    stream = OllamaStream("m")
    stream.delta(reasoning_chunk("日本語の思考"))
    stream.delta(text_chunk("ab"))
    stream.finish()
    assert stream.usage()[2] == 2


def _full_stream(shape: str) -> bytes:
    stream = OllamaStream("qwen3", shape=shape)
    out = stream.start()
    out += stream.delta({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
    out += stream.delta(reasoning_chunk("think "))
    out += stream.delta(reasoning_chunk("more", key="reasoning"))
    out += stream.delta(text_chunk("Answer"))
    if shape == "chat":
        frag = {"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"q":"x"}'}}
        out += stream.delta({"choices": [{"index": 0, "delta": {"tool_calls": [frag]}}]})
    out += stream.delta(finish_chunk("stop"))
    out += stream.delta({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 6}})
    out += stream.finish()
    return out


def test_real_ollama_chat_response_model_accepts_every_line() -> None:
    types = pytest.importorskip("ollama._types")
    raw = _full_stream("chat")
    parsed = [types.ChatResponse.model_validate_json(part) for part in raw.splitlines()]
    assert len(parsed) == 5
    assert all(p.message.role == "assistant" for p in parsed)
    assert "".join(p.message.thinking or "" for p in parsed) == "think more"
    assert "".join(p.message.content or "" for p in parsed) == "Answer"
    calls = [call for p in parsed for call in (p.message.tool_calls or [])]
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [("f", {"q": "x"})]
    assert [p.done for p in parsed] == [False, False, False, False, True]
    assert parsed[-1].done_reason == "stop"
    assert parsed[-1].prompt_eval_count == 4
    assert parsed[-1].eval_count == 6


def test_real_ollama_generate_response_model_accepts_every_line() -> None:
    types = pytest.importorskip("ollama._types")
    raw = _full_stream("generate")
    parsed = [types.GenerateResponse.model_validate_json(part) for part in raw.splitlines()]
    assert len(parsed) == 4
    assert "".join(p.thinking or "" for p in parsed) == "think more"
    assert "".join(p.response for p in parsed) == "Answer"
    assert parsed[-1].done is True
    assert parsed[-1].eval_count == 6


def test_created_at_is_now_in_utc_and_never_goes_back() -> None:
    from datetime import datetime, timezone

    stream = OllamaStream("m")
    stamps = [one(stream.delta(text_chunk(str(i))))["created_at"] for i in range(200)]
    assert all(RFC3339_Z.match(s) for s in stamps)
    parsed = [datetime.fromisoformat(s.replace("Z", "+00:00")) for s in stamps]
    assert parsed == sorted(parsed)
    assert abs((datetime.now(timezone.utc) - parsed[-1]).total_seconds()) < 5
