"""OpenAIResponses: the backend for the OpenAI Responses API (``POST /responses``).

What differs from `OpenAICommon`: the body is built by
`llmchat.dialects.responses_request` (``instructions`` and ``input`` items, flat
function tools, ``text.format``, ``reasoning.effort``, ``max_output_tokens``,
``store: false``), the answer is read by `ResponsesDialect`, the Settings the
API has no field for are not sent, and there are no text completions. A
llama-server answers ``/v1/responses`` too, and reports ``completed`` even when
it stopped at ``max_output_tokens``: `_reconcile_finish_reason` turns that into
``length`` when the usage shows the limit was reached.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ..counts import is_positive_int
from ..dialects.base import LLAMA_CPP_SETTINGS, OPENAI_ONLY_SAMPLERS, Dialect
from ..dialects.responses import ResponsesDialect
from ..dialects.responses_request import responses_body
from ..response import Response
from ._bodies import BodyHost, ChatBodyBuilder, ChatParts
from .openai_common import OpenAICommon

__all__ = ["DEFAULT_API_URL", "OpenAIResponses"]

DEFAULT_API_URL: Final = "https://api.openai.com/v1"

# Settings the Responses API has no member for; an extra_body key of the same name is still sent.
_NOT_IN_THE_API: Final = (
    "top_k",
    *OPENAI_ONLY_SAMPLERS,
    "stop",
    "reasoning_budget_tokens",
    *LLAMA_CPP_SETTINGS,
)


def _responses_body(backend: BodyHost, parts: ChatParts) -> dict[str, Any]:
    """The ``/responses`` body (`responses_body`)."""
    history, members, tools, tool_choice, stream = parts
    model = members.pop("model", None)
    return responses_body(history, members, tools, tool_choice, model=model, stream=stream)


class OpenAIResponses(OpenAICommon):
    """A backend for the OpenAI Responses API, or any server that speaks it.

        backend = OpenAIResponses(model="gpt-5-mini")            # key: env OPENAI_API_KEY
        local = OpenAIResponses("http://127.0.0.1:8080/v1")      # a llama-server
        r = backend.chat_completion([{"role": "user", "content": "Hi"}])
        print(r.msg if r.is_success else r.err)

    Stateless: the whole conversation goes every time, with ``store: false``
    (a ``store`` in ``extra_body`` wins) and never a ``previous_response_id``.
    Reasoning items come back on `Response.reasoning_parts` and go out again
    from `Response.to_message()`. Settings the API lacks (``stop``, ``seed``,
    ``top_k`` and the other samplers) are not sent; put them in ``extra_body``
    for a server that reads them (llama-server does).
    """

    dialect: ClassVar[type[Dialect]] = ResponsesDialect
    text_dialect: ClassVar[type[Dialect] | None] = None
    chat_path: ClassVar[str] = "/responses"
    send_include_usage: ClassVar[bool] = False  # usage comes on response.completed
    setting_field_names: ClassVar[Mapping[str, str | None]] = dict.fromkeys(_NOT_IN_THE_API)
    body_builder: ClassVar[ChatBodyBuilder] = staticmethod(_responses_body)
    default_api_url: ClassVar[str | None] = DEFAULT_API_URL
    api_key_env: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)

    def _reconcile_finish_reason(
        self, response: Response, reason: str, request: Mapping[str, Any]
    ) -> str:
        """Turn a ``completed`` that used every allowed output token into ``length``.

        llama-server's ``/v1/responses`` says ``completed`` when generation hit
        ``max_output_tokens``; ``output_tokens`` reaching the request's limit is
        the evidence (kept on `response.finish_reason_evidence`). llmchat calls
        this; user code does not; override it in a subclass.
        """
        if reason not in ("stop", "tool_calls") or response.provider_finish_reason != "completed":
            return reason
        limit = request.get("max_output_tokens")
        used = response.completion_tokens
        if not (isinstance(limit, int) and is_positive_int(limit)) or not isinstance(used, int):
            return reason
        if used < limit:
            return reason
        response.finish_reason_evidence = {
            "rule": "output_tokens_at_limit",
            "output_tokens": used,
            "max_output_tokens": limit,
        }
        return "length"
