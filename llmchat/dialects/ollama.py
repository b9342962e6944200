"""The Ollama dialects: one native ``/api/chat`` or ``/api/generate`` line into one `Delta`.

Pure, no I/O (ARCHITECTURE: dialects). Ollama streams NDJSON: every line is a
whole JSON object with a ``done`` flag; a blocking body is the same object with
everything in it. The line with ``done: true`` is both the finish and the end
of the stream, and carries the counts and durations. An ``{"error": ...}``
line (also in the middle of a 200 stream) fails the completion with its
message; a body that ends before ``done: true`` is the stream-closed failure.

Decisions (docs: /work/notes/ollama.md):

- ``done_reason``: ``stop`` and ``length`` are OpenAI's names already; no
  ``done_reason`` at all (older servers) is ``stop``; ``load``/``unload`` after
  no answer at all is a failure saying only the model was (un)loaded (Ollama's
  answer to an empty request), after an answer a ``stop``; any other value is
  passed on, so the judge fails it as an unknown reason.
- Tool calls come whole with object arguments and no id: each call keeps an
  ``id`` the line gives, else gets ``call_<n>`` (n counts the completion's
  calls from 0), so a tool result can name the call it answers.
- Reasoning (``message.thinking``, ``thinking``) is also handed back at the end
  as one reasoning part ``{"dialect": "ollama", "thinking": ...}``, which the
  request builder sends back as the assistant message's ``thinking``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ..tools import ToolCall, decoded_call
from .base import Delta, Dialect, Framing, inband_error, is_count, lone_content

__all__ = [
    "DURATIONS",
    "ERR_LOAD_ONLY",
    "ERR_NOT_DONE",
    "OllamaChat",
    "OllamaGenerate",
    "ollama_usage_fields",
]

ERR_LOAD_ONLY: Final = (
    "Ollama only {reason}ed the model (done_reason {reason!r}) and gave no answer: "
    "the request had nothing to answer (no messages, or an empty prompt)"
)
ERR_NOT_DONE: Final = "Ollama's answer has no done: true (it is a stream line, not a whole answer)"

DURATIONS: Final = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")
"""Ollama's server-side durations (nanoseconds) on the ``done: true`` line."""
_COUNTS: Final = ("prompt_eval_count", "eval_count", "prompt_eval_cached_count")
_COUNT_NAMES: Final = ("prompt_tokens", "completion_tokens", "cached_tokens")
_PLAIN_MESSAGE: Final = frozenset({"role", "content"})
_LOADS: Final = frozenset({"load", "unload"})


def ollama_usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The Response usage fields an Ollama line reports, in OpenAI's names.

    ``prompt_eval_count`` → prompt_tokens, ``eval_count`` → completion_tokens,
    ``prompt_eval_cached_count`` → cached_tokens; ``usage`` is the counts and
    durations as sent (only on a line that has any). No total: prompt +
    completion is derived (`Dialect.derives_total`).
    """
    fields: dict[str, Any] = {}
    model = payload.get("model")
    if type(model) is str and model:
        fields["model"] = model
    usage = {key: payload[key] for key in (*_COUNTS, *DURATIONS) if is_count(payload.get(key))}
    if not usage:
        return fields
    fields["usage"] = usage
    for key, name in zip(_COUNTS, _COUNT_NAMES, strict=True):
        if key in usage:
            fields[name] = usage[key]
    return fields


class OllamaChat(Dialect):
    """The ``/api/chat`` dialect: ``message.content``, ``.thinking`` and ``.tool_calls``."""

    name: ClassVar[str] = "ollama"
    framing: ClassVar[Framing] = "ndjson"
    derives_total: ClassVar[bool] = True
    plain_usage_is_model: ClassVar[bool] = True  # a plain line is one with "done": false

    def __init__(self) -> None:
        self._calls = 0
        self._answered = False
        self._thinking: list[str] = []

    def decode(self, payload: Mapping[str, Any], *, whole: bool = False) -> str | Delta:
        if not whole and payload.get("done") is False and "error" not in payload:
            plain = lone_content(payload.get("message"), _PLAIN_MESSAGE)
            if plain is not None:
                if plain:
                    self._answered = True
                return plain
        out = Delta(choice=True, whole=whole)
        self._body(payload, out)
        error = inband_error(payload.get("error"))
        if error is not None:  # the end, whatever else the line says; its text is kept
            out.error, out.end = error, True
            return out
        self._done(payload, out, whole)
        return out

    def _body(self, payload: Mapping[str, Any], out: Delta) -> None:
        """The answer members of one line (``message`` here; ``response`` for generate)."""
        message = payload.get("message")
        if not isinstance(message, Mapping):
            return
        out.text = _text(message.get("content"))
        out.thinking = _text(message.get("thinking"))
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            out.calls = [self._call(c) for c in calls if isinstance(c, Mapping)] or None

    def _call(self, data: Mapping[str, Any]) -> ToolCall:
        function = data.get("function")
        function = function if isinstance(function, Mapping) else {}
        given = data.get("id")
        call_id = given if isinstance(given, str) and given else f"call_{self._calls}"
        self._calls += 1
        return decoded_call(function.get("name"), function.get("arguments"), call_id)

    def _done(self, payload: Mapping[str, Any], out: Delta, whole: bool) -> None:
        """Record what this line adds; on ``done: true`` the finish, the end and the parts."""
        if out.text or out.thinking or out.calls:
            self._answered = True
        if out.thinking:
            self._thinking.append(out.thinking)
        if payload.get("done") is not True:
            if whole:
                out.error = ERR_NOT_DONE
            return
        out.end = True
        wire = payload.get("done_reason")
        reason = wire if isinstance(wire, str) and wire else None
        if reason in _LOADS and not self._answered:
            out.error = ERR_LOAD_ONLY.format(reason=reason)
            out.finish_reason = reason
            return
        out.finish_reason = "stop" if reason is None or reason in _LOADS else reason
        if reason is not None and reason != out.finish_reason:
            out.provider_reason = reason
        if self._thinking:
            out.parts = [{"dialect": self.name, "thinking": "".join(self._thinking)}]

    @staticmethod
    def usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
        if "done" in payload and payload["done"] is False:  # most lines: only the model
            model = payload.get("model")
            return {"model": model} if type(model) is str and model else {}
        return ollama_usage_fields(payload)


class OllamaGenerate(OllamaChat):
    """The ``/api/generate`` dialect: the answer in ``response``, reasoning in ``thinking``.

    The legacy ``context`` token array is ignored.
    """

    def decode(self, payload: Mapping[str, Any], *, whole: bool = False) -> str | Delta:
        if not whole and payload.get("done") is False and "error" not in payload:
            if "thinking" not in payload and type(payload.get("response")) is str:
                text: str = payload["response"]
                if text:
                    self._answered = True
                return text
        return super().decode(payload, whole=whole)

    def _body(self, payload: Mapping[str, Any], out: Delta) -> None:
        out.text = _text(payload.get("response"))
        out.thinking = _text(payload.get("thinking"))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
