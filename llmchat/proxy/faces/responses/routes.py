"""``POST /v1/responses``: the Responses face's handler and what its client gets back.

The body is translated (`translate`) before any upstream I/O; a refusal
is OpenAI's 400 with the ``param`` it names. The chat request then runs
through the proxy's one completion path (`Completions.complete`) with a
`ResponsesAnswer`: a stream of Responses events, or the whole Response object.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ....protocols.responses import BAD_TOOL_CALL, ResponsesStream
from ....protocols.responses_objects import (
    Echo,
    message_item,
    new_id,
    response_object,
    status_for,
    usage_object,
)
from ....protocols.responses_shape import OutputShape
from ....response import Response
from ...answers import Answer
from ...completions import Completions
from ...router import Route, Router
from ...upstream import Failure
from . import memo as responses_memo
from .translate import Unsupported, error_body, responses_request

if TYPE_CHECKING:
    from ...client_exchange import ClientExchange

__all__ = ["ResponsesAnswer", "create", "register"]


def register(router: Router, completions: Completions) -> None:
    """Put ``POST /v1/responses`` in `router`, answering through `completions`."""
    router.add([Route("POST", "/v1/responses", "openai", lambda ex: create(completions, ex))])


def create(completions: Completions, exchange: ClientExchange) -> Iterable[bytes]:
    """Answer one ``POST /v1/responses``."""
    body = exchange.read_json()
    try:
        request, echo = responses_request(body)
    except (ValueError, TypeError) as exc:
        code, param = "invalid_value", None
        if isinstance(exc, Unsupported):
            code, param = exc.code, exc.param
        body = error_body(str(exc), code=code, param=param)
        # The log line names the field first, as every face's does; OpenAI's own
        # wording ("Previous response with id … not found.") names it nowhere.
        said = f"{param}: {exc}" if param and not str(exc).startswith(param) else str(exc)
        return exchange.error(400, said, "invalid_request", body=body)
    return completions.complete(exchange, request, ResponsesAnswer(echo))


class ResponsesAnswer(Answer):
    """``/v1/responses``: Responses API events, or one Response object."""

    def __init__(self, echo: Echo) -> None:
        self.echo = echo

    def translator(self) -> ResponsesStream:
        return ResponsesStream(self.echo, keep=responses_memo.remember)

    def refused(self, response: Response) -> Failure | None:
        """A tool call without a name or with undecodable arguments (or a custom tool's
        call without its raw input): a 502, no call to run (a stream fails in band
        instead, with `response.failed`)."""
        failure = super().refused(response)
        shape = OutputShape.of(self.echo)
        unreadable = any(
            not shape.readable(call.name, call.to_openai()["function"]["arguments"])
            for call in response.tool_calls
        )
        if failure is None and not unreadable:
            return None
        return Failure(502, BAD_TOOL_CALL, "response")

    def body(self, response: Response) -> dict[str, Any]:
        """The whole Response object for a settled upstream `response` (`refused` first)."""
        shape = OutputShape.of(self.echo)
        output: list[dict[str, Any]] = []
        status, details = status_for(response.finish_reason)
        text, reasoning = response.msg, response.reasoning_text
        if reasoning:
            # The last item is the one a token limit cut short, as in the stream.
            last = not (text or response.tool_calls)
            output.append(shape.reasoning(new_id("rs"), reasoning, status if last else "completed"))
        if text or not (reasoning or response.tool_calls):
            output.append(message_item(new_id("msg"), text, status))
        for call in response.tool_calls:
            arguments = call.to_openai()["function"]["arguments"]
            call_id = call.id or new_id("call")
            output.append(shape.call(new_id("fc"), call_id, call.name, arguments, "completed"))
        usage = usage_object(
            response.prompt_tokens,
            response.completion_tokens,
            response.cached_tokens,
            response.reasoning_tokens,
        )
        responses_memo.remember(output)
        return response_object(
            self.echo,
            response_id=new_id("resp"),
            created_at=int(time.time()),
            status=status,
            output=output,
            usage=usage,
            incomplete_details=details,
            model=str(self.echo.get("model") or "") or response.model,
        )
