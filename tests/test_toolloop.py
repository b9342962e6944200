"""ToolLoop over real sockets: a callable script on the loopback server plays the model."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.messages import Message
from llmchat.testing import RecordedRequest, Reply, ScriptedServer
from llmchat.toolloop import ToolLoop
from llmchat.tools import ToolCall

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current temperature of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
QUESTION = [{"role": "user", "content": "How warm is it in Paris?"}]


def answer(content: str) -> Reply:
    return Reply.json(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        }
    )


def tool_calls(*calls: tuple[str, str, dict[str, Any]], content: str | None = None) -> Reply:
    return Reply.json(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": content,
                        "tool_calls": [
                            {
                                "id": call_id,
                                "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)},
                            }
                            for call_id, name, args in calls
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
        }
    )


def weather_model(request: RecordedRequest) -> Reply:
    """Asks for the weather once; answers from the tool result it then sees."""
    messages = request.json()["messages"]
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        return tool_calls(("call_1", "get_weather", {"city": "Paris"}))
    return answer(f"It is {results[-1]['content']} in Paris.")


def stubborn_model(request: RecordedRequest) -> Reply:
    """Repeats the same call while tools are on offer; answers once they are not."""
    body = request.json()
    if "tools" not in body:
        return answer("I could not finish.")
    n = request.index
    return tool_calls((f"call_{n}", "get_weather", {"city": "Paris"}))


def run_with(
    script: Callable[[RecordedRequest], Reply], execute: Callable[[ToolCall], Any], **kwargs: Any
) -> tuple[ToolLoop, Any, ScriptedServer]:
    server = ScriptedServer(script)
    with server as url:
        backend = OpenAICommon(url, model="m")
        try:
            loop = ToolLoop(backend, [WEATHER], execute, **kwargs)
            response = loop.run(QUESTION)
        finally:
            backend.close()
    return loop, response, server


@pytest.fixture
def weather() -> Iterator[Callable[[ToolCall], Any]]:
    yield lambda call: "18°C" if call.arguments == {"city": "Paris"} else "unknown"


def test_one_tool_round_then_final_answer(weather: Callable[[ToolCall], Any]) -> None:
    question = [dict(m) for m in QUESTION]
    server = ScriptedServer(weather_model)
    with server as url:
        backend = OpenAICommon(url, model="m")
        loop = ToolLoop(backend, [WEATHER], weather)
        response = loop.run(question)
        backend.close()

    assert response.is_success and response.msg == "It is 18°C in Paris."
    assert question == QUESTION  # the caller's list is untouched
    assert [m.role for m in loop.messages] == ["user", "assistant", "tool", "assistant"]
    assert all(isinstance(m, Message) for m in loop.messages)
    call_turn, result, final = loop.messages[1:]
    assert call_turn.content is None
    assert call_turn.tool_calls == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ]
    assert (result.content, result.tool_call_id) == ("18°C", "call_1")
    assert final.content == "It is 18°C in Paris."
    assert loop.limit_reason is None

    first, second = (r.json() for r in server.requests)
    assert len(server.requests) == 2
    assert first["tools"] == [WEATHER] and first["messages"] == QUESTION
    assert second["tools"] == [WEATHER]
    assert second["messages"][1]["tool_calls"][0]["id"] == "call_1"
    assert second["messages"][2] == {"role": "tool", "content": "18°C", "tool_call_id": "call_1"}


def test_non_str_result_is_json_encoded() -> None:
    loop, response, server = run_with(weather_model, lambda call: {"celsius": 18, "sky": "clear"})
    assert loop.messages[2].content == '{"celsius": 18, "sky": "clear"}'
    assert response.msg == 'It is {"celsius": 18, "sky": "clear"} in Paris.'
    assert server.requests[1].json()["messages"][2]["content"] == loop.messages[2].content


def test_executor_exception_becomes_error_result_and_loop_goes_on() -> None:
    def broken(call: ToolCall) -> Any:
        raise KeyError("no station")

    loop, response, server = run_with(weather_model, broken)
    assert loop.messages[2].content == "Error: KeyError: 'no station'"
    assert loop.messages[2].tool_call_id == "call_1"
    assert response.is_success and response.msg == "It is Error: KeyError: 'no station' in Paris."
    assert len(server.requests) == 2


def test_callbacks_see_each_call_and_result(weather: Callable[[ToolCall], Any]) -> None:
    events: list[tuple[Any, ...]] = []
    run_with(
        weather_model,
        weather,
        on_tool_call=lambda call: events.append(("call", call.name, call.arguments)),
        on_tool_result=lambda call, result: events.append(("result", call.id, result)),
    )
    assert events == [
        ("call", "get_weather", {"city": "Paris"}),
        ("result", "call_1", "18°C"),
    ]


def test_identical_calls_reach_the_limit_and_the_next_request_has_no_tools(
    weather: Callable[[ToolCall], Any],
) -> None:
    reasons: list[str] = []
    executed: list[ToolCall] = []

    def execute(call: ToolCall) -> Any:
        executed.append(call)
        return weather(call)

    loop, response, server = run_with(
        stubborn_model, execute, max_identical_calls=2, on_limit=reasons.append
    )
    assert reasons == ["max_identical_calls"] and loop.limit_reason == "max_identical_calls"
    assert len(executed) == 2
    bodies = [r.json() for r in server.requests]
    assert ["tools" in b for b in bodies] == [True, True, False]
    last = bodies[-1]["messages"]
    assert last[-1]["role"] == "system" and "max_identical_calls=2" in last[-1]["content"]
    assert "answer now" in last[-1]["content"]
    assert [m.role for m in loop.messages] == [
        "user", "assistant", "tool", "assistant", "tool", "system", "assistant",
    ]  # fmt: skip
    assert response.msg == "I could not finish."


def test_identical_means_same_name_and_canonical_arguments() -> None:
    def model(request: RecordedRequest) -> Reply:
        if "tools" not in request.json():
            return answer("done")
        return tool_calls(
            ("a", "get_weather", {"city": "Paris", "unit": "C"}),
            ("b", "get_weather", {"unit": "C", "city": "Paris"}),  # same, keys reordered
            ("c", "get_weather", {"city": "Lyon", "unit": "C"}),
        )

    executed: list[str] = []
    reasons: list[str] = []
    loop, response, server = run_with(
        model,
        lambda call: executed.append(call.id) or "ok",
        max_identical_calls=1,
        on_limit=reasons.append,
    )
    assert executed == ["a", "c"]
    assert reasons == ["max_identical_calls"]
    results = {m.tool_call_id: m.content for m in loop.messages if m.role == "tool"}
    assert results["a"] == results["c"] == "ok"
    assert results["b"].startswith("Error: not run:")
    assert ["tools" in r.json() for r in server.requests] == [True, False]
    assert response.msg == "done"


def test_max_rounds_forces_an_answer_without_tools() -> None:
    def model(request: RecordedRequest) -> Reply:
        if "tools" not in request.json():
            return answer("best effort")
        return tool_calls((f"call_{request.index}", "get_weather", {"day": request.index}))

    reasons: list[str] = []
    loop, response, server = run_with(
        model, lambda call: "ok", max_rounds=3, on_limit=reasons.append
    )
    assert reasons == ["max_rounds"]
    assert ["tools" in r.json() for r in server.requests] == [True, True, True, False]
    assert sum(m.role == "tool" for m in loop.messages) == 3
    assert "max_rounds=3" in server.requests[-1].json()["messages"][-1]["content"]
    assert response.msg == "best effort" and loop.messages[-1].content == "best effort"


def test_max_calls_stops_calls_beyond_the_budget() -> None:
    def model(request: RecordedRequest) -> Reply:
        if "tools" not in request.json():
            return answer("partial")
        n = request.index
        return tool_calls(*((f"c{n}{i}", "get_weather", {"n": n, "i": i}) for i in range(2)))

    executed: list[str] = []
    reasons: list[str] = []
    loop, response, server = run_with(
        model,
        lambda call: executed.append(call.id) or "ok",
        max_calls=3,
        on_limit=reasons.append,
    )
    assert executed == ["c00", "c01", "c10"]
    assert reasons == ["max_calls"]
    results = [m for m in loop.messages if m.role == "tool"]
    assert [m.tool_call_id for m in results] == ["c00", "c01", "c10", "c11"]
    assert results[-1].content == "Error: not run: the tool call limit (3) was reached"
    assert ["tools" in r.json() for r in server.requests] == [True, True, False]
    assert response.msg == "partial"


def test_failed_response_ends_the_loop_and_is_returned() -> None:
    def model(request: RecordedRequest) -> Reply:
        if request.index == 0:
            return tool_calls(("call_1", "get_weather", {"city": "Paris"}))
        return Reply.error(500, "model crashed")

    loop, response, server = run_with(model, lambda call: "18°C")
    assert not response.is_success
    assert response.error_class is not None and "model crashed" in (response.err or "")
    assert len(server.requests) == 2
    assert [m.role for m in loop.messages] == ["user", "assistant", "tool"]


def test_first_request_failing_returns_it_without_running_tools() -> None:
    executed: list[ToolCall] = []
    loop, response, server = run_with(
        lambda request: Reply.error(503, "loading model"), executed.append
    )
    assert not response.is_success and executed == []
    assert [m.role for m in loop.messages] == ["user"] and len(server.requests) == 1


def test_missing_call_ids_are_filled_in_so_results_pair_up() -> None:
    def model(request: RecordedRequest) -> Reply:
        if request.index == 0:
            return tool_calls(("", "get_weather", {"city": "Paris"}))
        return answer("ok")

    loop, _, server = run_with(model, lambda call: "18°C")
    call_id = loop.messages[1].tool_calls[0]["id"]  # type: ignore[index]
    assert call_id and loop.messages[2].tool_call_id == call_id
    sent = server.requests[1].json()["messages"]
    assert sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"] == call_id


class _NoBackend:
    def chat_completion(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no I/O may happen for bad arguments")


@pytest.mark.parametrize(
    ("kwargs", "error", "names"),
    [
        ({"backend": object()}, TypeError, "backend"),
        ({"tools": WEATHER}, TypeError, "tools"),
        ({"tools": []}, ValueError, "tools"),
        ({"tools": ["get_weather"]}, TypeError, "tools[0]"),
        ({"execute": "run"}, TypeError, "execute"),
        ({"max_rounds": 0}, ValueError, "max_rounds"),
        ({"max_calls": 1.5}, TypeError, "max_calls"),
        ({"max_identical_calls": True}, TypeError, "max_identical_calls"),
        ({"on_tool_call": 3}, TypeError, "on_tool_call"),
        ({"on_tool_result": "x"}, TypeError, "on_tool_result"),
        ({"on_limit": []}, TypeError, "on_limit"),
    ],
)
def test_bad_arguments_are_rejected_by_name(
    kwargs: dict[str, Any], error: type[Exception], names: str
) -> None:
    args: dict[str, Any] = {"backend": _NoBackend(), "tools": [WEATHER], "execute": repr}
    args.update(kwargs)
    with pytest.raises(error, match=names.replace("[", r"\[").replace("]", r"\]")):
        ToolLoop(**args)


def test_bad_messages_are_rejected_before_any_io() -> None:
    loop = ToolLoop(_NoBackend(), [WEATHER], repr)
    with pytest.raises(ValueError, match="messages"):
        loop.run([{"role": "robot", "content": "hi"}])
    with pytest.raises(TypeError, match="messages"):
        loop.run("hello")  # type: ignore[arg-type]


def test_run_stream_is_one_chunk_stream_across_rounds(weather: Callable[[ToolCall], Any]) -> None:
    server = ScriptedServer(weather_model)
    with server as url:
        backend = OpenAICommon(url, model="m")
        loop = ToolLoop(backend, [WEATHER], weather)
        chunks = list(loop.run_stream(QUESTION))
        backend.close()
    landed = [c for c in chunks if c.tool_calls]
    assert len(landed) == 1 and landed[0].tool_calls[0].name == "get_weather"  # type: ignore[index]
    assert "".join(c.content for c in chunks) == "It is 18°C in Paris."
    assert loop.response is not None and loop.response.is_success
    assert [m.role for m in loop.messages] == ["user", "assistant", "tool", "assistant"]
    assert all(r.json()["stream"] is True for r in server.requests)
    assert len(server.requests) == 2


def test_closing_run_stream_early_cancels_the_round(weather: Callable[[ToolCall], Any]) -> None:
    server = ScriptedServer(weather_model)
    with server as url:
        backend = OpenAICommon(url, model="m")
        loop = ToolLoop(backend, [WEATHER], weather)
        stream = loop.run_stream(QUESTION)
        next(stream)  # the first round's tool-call chunk
        stream.close()
        backend.close()
    assert len(server.requests) == 1  # no second round after the consumer left
