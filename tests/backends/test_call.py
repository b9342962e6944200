"""The per-call `Call`: the runners read it, never the backend; hooks are bound per call."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.backends import _runners, _settle
from llmchat.backends.call import Call
from llmchat.response import Response
from llmchat.transport import MockTransport
from llmchat.transport.mock_script import MockRequest, MockResponse

MESSAGES = [{"role": "user", "content": "Hi"}]
BODY = {
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}


def _answer(request: MockRequest) -> MockResponse:
    if request.json.get("stream"):
        events: list[Mapping[str, Any]] = [
            {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
        ]
        return MockResponse.sse(events)
    return MockResponse.json(BODY)


def _backend(cls: type[OpenAICommon] = OpenAICommon) -> OpenAICommon:
    return cls("http://mock.invalid/v1", api_key="sk-secret", transport=MockTransport(_answer))


def _run(backend: OpenAICommon, stream: bool) -> Response:
    if stream:
        response = backend.chat_completion_stream(MESSAGES)
        response.wait(5)
        return response
    return backend.chat_completion(MESSAGES)


def test_no_runner_or_settle_function_takes_a_backend() -> None:
    for module in (_runners, _settle):
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ == module.__name__:
                assert "backend" not in inspect.signature(fn).parameters, name


def test_the_call_holds_no_backend() -> None:
    backend = _backend()
    call = backend._call(backend.prepare_chat_request(MESSAGES), "chat", stream=False)
    for field in dataclasses.fields(Call):
        value = getattr(call, field.name)
        assert value is not backend
        assert getattr(value, "__self__", None) in (None, backend)  # hooks are bound methods
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.kind = "text"  # type: ignore[misc]


@pytest.mark.parametrize("stream", [False, True])
def test_class_overrides_run(stream: bool) -> None:
    seen: list[str] = []

    class Custom(OpenAICommon):
        def _lift_usage(self, response: Response, payload: Mapping[str, Any]) -> None:
            seen.append("lift")
            super()._lift_usage(response, payload)

        def _reconcile_finish_reason(
            self, response: Response, reason: str, request: Mapping[str, Any]
        ) -> str:
            seen.append("reconcile")
            return reason

        def _on_complete(self, response: Response) -> None:
            seen.append("complete")

    response = _run(_backend(Custom), stream)
    assert response.is_success, response.err
    assert "lift" in seen and seen[-2:] == ["reconcile", "complete"]


@pytest.mark.parametrize("stream", [False, True])
def test_instance_overrides_run(stream: bool) -> None:
    backend = _backend()
    seen: list[str] = []

    def reconcile(response: Response, reason: str, request: Mapping[str, Any]) -> str:
        seen.append("reconcile")
        return reason

    backend._reconcile_finish_reason = reconcile  # type: ignore[method-assign]
    backend._on_complete = lambda response: seen.append("complete")  # type: ignore[method-assign]
    response = _run(backend, stream)
    assert response.is_success, response.err
    assert seen == ["reconcile", "complete"]
    assert response.prompt_tokens == 3
