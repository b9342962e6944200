"""ToolLoop: chat, run the model's tool calls, send the results, until it answers.

One `run(messages)` call drives the conversation: every round asks the model
with `tools`; when it answers with tool calls, each call goes to `execute`,
the assistant tool-call turn and one tool result per call are appended, and
the model is asked again. The loop ends when the model answers without tool
calls (the final answer) or when a request fails.

Limits stop a model that will not stop: `max_rounds` (model rounds that made
tool calls), `max_calls` (calls in all) and `max_identical_calls` (calls with
the same name and the same arguments). When one is reached, `on_limit(reason)`
is called, a system message tells the model to answer with what it has, and
the next request goes out without tools, so it must answer. Calls beyond a
limit are not run; each still gets an error tool result, because every call
of an assistant turn needs its answer on the wire.

Synchronous; no threads of its own. The caller's list is never changed; the
whole conversation, as `Message`s, is on `loop.messages`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, cast

from .chunk import Chunk
from .errors import InvalidArgumentError, InvalidTypeError
from .messages import Message, MessageLike, coerce_messages
from .response import Response
from .tools import ToolCall, tool_definitions

__all__ = ["LIMIT_REASONS", "ToolLoop"]

LIMIT_REASONS: Final = ("max_rounds", "max_calls", "max_identical_calls")
"""The `reason` values `on_limit` receives: the name of the limit that was reached."""

LIMIT_MESSAGE: Final = (
    "Tool limit reached ({detail}). Do not call any more tools; "
    "answer now with the information you already have."
)


class ToolLoop:
    """Run chat → tool calls → tool results → chat until the model answers without tools.

    `backend` is anything with ``chat_completion(messages, tools=...) -> Response``
    (e.g. `OpenAICommon`); `tools` the OpenAI tool definitions sent each round;
    `execute(call: ToolCall) -> Any` runs one call. A str result is sent as it
    is, anything else JSON-encoded. An exception from `execute` becomes the
    tool result ``"Error: <ExceptionType>: <message>"`` and the loop goes on.

    `on_tool_call(call)` runs before each executed call, `on_tool_result(call,
    result)` after it (`result` is the error text when `execute` raised),
    `on_limit(reason)` once when a limit is reached (`reason` is one of
    `LIMIT_REASONS`). Exceptions from the callbacks propagate.

    Bad arguments raise `TypeError`/`ValueError` naming them, before any I/O.
    """

    def __init__(
        self,
        backend: Any,
        tools: Sequence[Mapping[str, Any]],
        execute: Callable[[ToolCall], Any],
        max_rounds: int = 4,
        max_calls: int = 12,
        max_identical_calls: int = 2,
        on_tool_call: Callable[[ToolCall], Any] | None = None,
        on_tool_result: Callable[[ToolCall, Any], Any] | None = None,
        on_limit: Callable[[str], Any] | None = None,
    ) -> None:
        if not callable(getattr(backend, "chat_completion", None)):
            raise InvalidTypeError(
                f"backend must have a chat_completion method, got {type(backend).__name__}"
            )
        tool_definitions(tools)
        if not tools:
            raise InvalidArgumentError("tools must not be empty; a ToolLoop needs a tool to offer")
        for index, tool in enumerate(tools):
            if not isinstance(tool, Mapping):
                raise InvalidTypeError(
                    f"tools[{index}] must be a mapping, got {type(tool).__name__}"
                )
        if not callable(execute):
            raise InvalidTypeError(f"execute must be callable, got {type(execute).__name__}")
        for name, value in (
            ("max_rounds", max_rounds),
            ("max_calls", max_calls),
            ("max_identical_calls", max_identical_calls),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidTypeError(f"{name} must be an int, got {type(value).__name__}")
            if value < 1:
                raise InvalidArgumentError(f"{name} must be at least 1, got {value}")
        for hook_name, hook in (
            ("on_tool_call", on_tool_call),
            ("on_tool_result", on_tool_result),
            ("on_limit", on_limit),
        ):
            if hook is not None and not callable(hook):
                raise InvalidTypeError(
                    f"{hook_name} must be callable or None, got {type(hook).__name__}"
                )
        self.backend = backend
        self.tools: list[Mapping[str, Any]] = list(tools)
        self.execute = execute
        self.max_rounds = max_rounds
        self.max_calls = max_calls
        self.max_identical_calls = max_identical_calls
        self.on_tool_call = on_tool_call
        self.on_tool_result = on_tool_result
        self.on_limit = on_limit
        self.messages: list[Message] = []
        """The last run's transcript: its input, then everything the loop appended."""
        self.response: Response | None = None
        """The final Response of the last run: the answer, or the first failed round."""
        self.limit_reason: str | None = None
        """The limit the last run reached (one of `LIMIT_REASONS`); None if none."""

    def run(self, messages: Iterable[MessageLike]) -> Response:
        """Run the loop from `messages`; return the final Response.

        The final Response is the model's answer without tool calls, or the
        first failed Response (not `is_success`), returned as it is. The
        caller's list is never changed; `self.messages` holds the transcript
        (a successful final answer is appended to it as an assistant message).
        """
        for _ in self._loop(messages, stream=False):
            pass  # the blocking form yields nothing
        return cast(Response, self.response)  # every way out of _loop sets it

    def run_stream(self, messages: Iterable[MessageLike]) -> Iterator[Chunk]:
        """Run the loop streaming: yield every round's chunks as they arrive, as one stream.

        Tool calls land whole on a round's final chunk; the tools run, and the
        next round's chunks follow. When the iteration ends, `self.response`
        is the final Response (the answer, or the first failed round) and
        `self.messages` the transcript. Stopping the iteration early (``break``,
        an exception, closing the generator) cancels the live round.
        """
        return self._loop(messages, stream=True)

    def _loop(self, messages: Iterable[MessageLike], *, stream: bool) -> Iterator[Chunk]:
        self.messages = coerce_messages(messages)  # validates before any I/O
        self.limit_reason = None
        self.response = None
        rounds = 0
        total_calls = 0
        seen: dict[str, int] = {}
        while True:
            offer_tools = self.limit_reason is None
            tools = self.tools if offer_tools else None
            if stream:
                response = self.backend.chat_completion_stream(list(self.messages), tools=tools)
                with response:  # closing this generator early cancels the round
                    yield from response
            else:
                response = self.backend.chat_completion(list(self.messages), tools=tools)
            self.response = response
            if not response.is_success:
                return
            calls = list(response.tool_calls)
            if not calls or not offer_tools:
                # Tool calls made without tools on offer are left on the Response, unrun.
                turn = response.to_message()  # keeps the dialect's reasoning parts
                self.messages.append(
                    dataclasses.replace(turn, content=response.msg, tool_calls=None)
                )
                return
            rounds += 1
            calls = [
                call if call.id else dataclasses.replace(call, id=f"call_{rounds}_{index}")
                for index, call in enumerate(calls)
            ]
            # The turn as the dialect gave it (reasoning parts included: Anthropic
            # refuses a tool result whose call lost its thinking block), with ids.
            self.messages.append(
                dataclasses.replace(
                    response.to_message(), tool_calls=[call.to_openai() for call in calls]
                )
            )
            reason: str | None = None
            for call in calls:
                key = _call_key(call)
                if total_calls >= self.max_calls:
                    reason = reason or "max_calls"
                    content = f"Error: not run: the tool call limit ({self.max_calls}) was reached"
                elif seen.get(key, 0) >= self.max_identical_calls:
                    reason = reason or "max_identical_calls"
                    content = (
                        "Error: not run: this exact call was already made "
                        f"{self.max_identical_calls} time(s)"
                    )
                else:
                    total_calls += 1
                    seen[key] = seen.get(key, 0) + 1
                    content = self._run_call(call)
                    if total_calls >= self.max_calls:
                        reason = reason or "max_calls"
                    elif seen[key] >= self.max_identical_calls:
                        reason = reason or "max_identical_calls"
                self.messages.append(Message("tool", content=content, tool_call_id=call.id))
            if reason is None and rounds >= self.max_rounds:
                reason = "max_rounds"
            if reason is not None:
                self._reach_limit(reason)

    def _run_call(self, call: ToolCall) -> str:
        if self.on_tool_call is not None:
            self.on_tool_call(call)
        try:
            result: Any = self.execute(call)
        except Exception as exc:  # an executor failure is the model's to read, not ours
            result = f"Error: {type(exc).__name__}: {exc}"
        if self.on_tool_result is not None:
            self.on_tool_result(call, result)
        return _result_text(result)

    def _reach_limit(self, reason: str) -> None:
        self.limit_reason = reason
        if self.on_limit is not None:
            self.on_limit(reason)
        limit = getattr(self, reason)
        detail = f"{reason}={limit}"
        self.messages.append(Message("system", LIMIT_MESSAGE.format(detail=detail)))


def _call_key(call: ToolCall) -> str:
    """Identical calls share a key: same name, same arguments in any key order."""
    if call.arguments_undecodable:
        arguments = call.arguments_json
    else:
        arguments = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False, default=str)
    return json.dumps([call.name, arguments])


def _result_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, default=str)
