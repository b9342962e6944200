"""Ollama: the backend for Ollama's native API (``/api/chat``, ``/api/generate``).

What differs from `OpenAICommon`: the request is Ollama's own (samplers under
``options``, ``format``, ``think``, object tool-call arguments, ``tool_name``
on tool results, base64 ``images``; `llmchat.dialects.ollama_request`), the
answer is NDJSON decoded by `llmchat.dialects.ollama`, a blocking call says
``"stream": false`` (Ollama streams by default), the server's durations land on
`Response.timing`, and the context size comes from ``POST /api/show``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

from ..counts import is_positive_int
from ..dialects.base import LLAMA_CPP_SETTINGS, Dialect
from ..dialects.ollama import OllamaChat, OllamaGenerate
from ..dialects.ollama_request import chat_body, generate_body, prompt_parts
from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import MessageLike
from ..response import Response
from ..settings import Settings
from ._bodies import BodyHost, ChatBodyBuilder, ChatParts
from .openai_common import OpenAICommon, WireRequest
from .options import CommonOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["DEFAULT_API_URL", "Ollama"]

DEFAULT_API_URL: Final = "http://127.0.0.1:11434"
API_KEY_ENV: Final = "OLLAMA_API_KEY"
SHOW_PATH: Final = "/api/show"

# Settings Ollama has no place for: not sent (Ollama ignores unknown options anyway).
_UNSUPPORTED: Final = (
    "logit_bias",
    "parallel_tool_calls",
    *LLAMA_CPP_SETTINGS,
)
_TIMING: Final = (
    ("total_duration", "server_total_seconds"),
    ("load_duration", "load_seconds"),
    ("prompt_eval_duration", "prompt_eval_seconds"),
    ("eval_duration", "eval_seconds"),
)
_NUM_CTX: Final = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def _chat_body(backend: BodyHost, parts: ChatParts) -> dict[str, Any]:
    """The ``/api/chat`` body (`chat_body`)."""
    history, members, tools, tool_choice, stream = parts
    model = members.pop("model", None)
    return chat_body(history, members, tools, tool_choice, model, stream)


class Ollama(OpenAICommon):
    """A backend for Ollama's native API (default ``http://127.0.0.1:11434``, no ``/v1``).

        backend = Ollama(model="llama3.2", settings=Settings(max_tokens=200, max_context=8192))
        r = backend.chat_completion([{"role": "user", "content": "Hi"}])
        print(r.msg if r.is_success else r.err, r.timing.eval_seconds)

    `api_key` (default: env ``OLLAMA_API_KEY``) is sent as a bearer token, for
    an Ollama behind a gateway or ollama.com; a local server needs none.
    Text completions post ``/api/generate``: with a `template` the rendered
    prompt goes ``raw: true``; without one the system messages become
    ``system`` and the one user message the ``prompt``.
    """

    dialect: ClassVar[type[Dialect]] = OllamaChat
    text_dialect: ClassVar[type[Dialect] | None] = OllamaGenerate
    send_include_usage: ClassVar[bool] = False
    setting_field_names: ClassVar[Mapping[str, str | None]] = {
        "max_context": "max_context",  # → options.num_ctx
        **{name: None for name in _UNSUPPORTED},
    }
    chat_path: ClassVar[str] = "/api/chat"
    text_path: ClassVar[str] = "/api/generate"
    probe_source: ClassVar[str] = "ollama"
    body_builder: ClassVar[ChatBodyBuilder] = staticmethod(_chat_body)
    default_api_url: ClassVar[str | None] = DEFAULT_API_URL
    api_key_env: ClassVar[tuple[str, ...]] = (API_KEY_ENV,)

    def __init__(
        self,
        api_url: str | None = None,
        model: str | None = None,
        settings: Settings | None = None,
        *,
        api_key: str | None = None,
        **common: Unpack[CommonOptions],
    ) -> None:
        # Only the positional order differs from the base (`api_key` is keyword-only).
        super().__init__(api_url, api_key, model, settings, **common)

    # -- requests -----------------------------------------------------------

    def prepare_text_request(
        self,
        messages: Iterable[MessageLike],
        continuation: bool = False,
        settings: Settings | None = None,
        *,
        stream: bool = False,
    ) -> WireRequest:
        """Return the ``/api/generate`` request exactly as it would be posted.

        With a `template`: its rendering of the normalized messages as a
        ``raw: true`` prompt (`continuation=True` leaves the last message
        open). Without one: the system messages as ``system`` and the last
        (only) user message as ``prompt``, Ollama's template applied by the
        server; a conversation or `continuation` then raises `ValueError`.
        """
        generation = self._get_api_settings(settings)
        model = generation.pop("model", None)
        messages = self.normalized_messages(_checked(messages))
        if self.template is not None:
            prompt = self.template.render(messages, continuation=continuation)
            body = generate_body(prompt, generation, model, stream, raw=True)
        else:
            if continuation:
                raise InvalidArgumentError(
                    "continuation: a continued text completion needs a template; pass "
                    "template=… to the backend (Ollama's own template closes every turn)"
                )
            system, prompt, images = prompt_parts(messages)
            body = generate_body(prompt, generation, model, stream, system=system, images=images)
        return self._wire_request(self.text_path, body, stream=stream)

    # -- the response -------------------------------------------------------

    def _lift_usage(self, response: Response, payload: Mapping[str, Any]) -> None:
        """Copy the counts and model, and Ollama's durations (ns) onto `response.timing` (s).

        llmchat calls this; user code does not; override it in a subclass.
        """
        super()._lift_usage(response, payload)
        if payload.get("done") is not True:
            return
        for wire, name in _TIMING:
            value = payload.get(wire)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                setattr(response.timing, name, value / 1e9)

    # -- the probe ----------------------------------------------------------

    def probe_server_limits(self) -> dict[str, Any]:
        """Ask ``POST /api/show`` for the model's context size; never raises.

        The ``num_ctx`` in its ``parameters`` (the window the server runs the
        model with) wins, else ``model_info["<arch>.context_length"]`` (the
        model's own limit). Returns ``{"source": "ollama", "context_length": N}``
        or ``{"source": "ollama", "note": ...}``.
        """
        if not self.model:
            return {"source": self.probe_source, "note": "no model to ask /api/show about"}
        data = json.dumps({"model": self.model}).encode("utf-8")
        payload, note = self._request_json(
            "POST", self._url(SHOW_PATH), data, label=f"POST {SHOW_PATH}"
        )
        if note is not None:
            return {"source": self.probe_source, "note": note}
        length = _context_length(payload)
        if length is None:
            return {
                "source": self.probe_source,
                "note": f"POST {SHOW_PATH} has no num_ctx and no <arch>.context_length",
            }
        return {"source": self.probe_source, "context_length": length}


def _checked(messages: Iterable[MessageLike]) -> Iterable[MessageLike]:
    if messages is None:
        raise InvalidTypeError("messages must be a list of messages, got None")
    return messages


def _context_length(payload: Mapping[str, Any]) -> int | None:
    """``num_ctx`` from the ``parameters`` text, else ``<arch>.context_length``."""
    parameters = payload.get("parameters")
    if isinstance(parameters, str):
        found = _NUM_CTX.search(parameters)
        if found and int(found.group(1)) > 0:
            return int(found.group(1))
    info = payload.get("model_info")
    if not isinstance(info, Mapping):
        return None
    arch = info.get("general.architecture")
    value = info.get(f"{arch}.context_length") if isinstance(arch, str) else None
    return value if is_positive_int(value) else None
