"""Jinja2Template: run a Hugging Face ``chat_template`` in a sandbox.

jinja2 is imported when a Jinja2Template is built, not when llmchat is
imported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, NoReturn

from .. import fastjson
from ..errors import InvalidArgumentError
from ..messages import Message, MessageLike, coerce_messages, content_text
from .base import Template

__all__ = ["Jinja2Template"]


def _raise_exception(message: Any) -> NoReturn:
    raise InvalidArgumentError(f"chat template raised an error: {message}")


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: Any = None,
    sort_keys: bool = False,
) -> str:
    # As Hugging Face transformers overrides it: no HTML escaping, unicode kept.
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _compile(source: str) -> Any:
    try:
        import jinja2
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as exc:  # pragma: no cover - jinja2 is a dependency in practice
        raise ImportError("Jinja2Template needs jinja2: pip install jinja2") from exc
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise InvalidArgumentError(f"chat template does not compile: {exc}") from exc


def _template_dict(message: Message) -> dict[str, Any]:
    """The message as a new dict, tool-call arguments decoded to dicts as templates expect."""
    out = message.to_dict()
    for call in out.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            try:
                function["arguments"] = fastjson.loads(function["arguments"])
            except ValueError:
                pass  # not JSON: the template gets the string
    return out


def _token(value: Any) -> str:
    if isinstance(value, Mapping):
        value = value.get("content")
    return value if isinstance(value, str) else ""


class Jinja2Template(Template):
    """A Hugging Face chat template (a ``chat_template`` Jinja string).

    The source is compiled once, in jinja2's ``ImmutableSandboxedEnvironment``
    with the settings transformers uses (``trim_blocks``, ``lstrip_blocks``,
    the ``loopcontrols`` extension, transformers' ``tojson``), plus the
    globals ``raise_exception`` (raises `InvalidArgumentError`, a
    ``ValueError``) and ``strftime_now``. A source that does not compile
    raises `InvalidArgumentError`. The ``{% generation %}`` tag is not supported.

    Rendering passes ``messages`` (as new dicts; tool-call ``arguments`` JSON
    strings decoded to dicts), ``add_generation_prompt = not continuation``,
    ``bos_token``, ``eos_token`` and, only when non-empty, ``tools``.

    ``continuation=True``: the conversation is rendered without a generation
    prompt, then the text is cut right after the last message's content: after
    the last occurrence of that content (or of it stripped of outer
    whitespace, as many templates trim) — what the template puts after the
    message (end-of-turn tokens …) is dropped. `InvalidArgumentError` when the
    content is empty or cannot be found in the rendered text.
    """

    name: ClassVar[str] = "jinja2"

    def __init__(
        self,
        source: str,
        bos_token: str = "",
        eos_token: str = "",
        tools: Sequence[Mapping[str, Any]] | None = None,
    ):
        if not isinstance(source, str):
            raise InvalidArgumentError(
                f"Jinja2Template: source must be a str, got {type(source).__name__}"
            )
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.tools = [dict(t) for t in tools] if tools else None
        self._compiled = _compile(source)

    @classmethod
    def from_tokenizer_config(
        cls, path_or_dict: str | os.PathLike[str] | Mapping[str, Any]
    ) -> Jinja2Template:
        """Build from a ``tokenizer_config.json`` (a path, its directory, or the parsed dict).

        ``chat_template`` is a string, or a list of ``{"name", "template"}``
        (the ``default`` one is used, else the first); ``bos_token`` and
        ``eos_token`` are strings or ``{"content": …}`` dicts.
        """
        if isinstance(path_or_dict, Mapping):
            config: Any = path_or_dict
        else:
            path = Path(path_or_dict)
            if path.is_dir():
                path = path / "tokenizer_config.json"
            config = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(config, Mapping):
                raise InvalidArgumentError(f"{path}: not a JSON object")
        source = config.get("chat_template")
        if isinstance(source, list):
            named = {t.get("name"): t.get("template") for t in source if isinstance(t, Mapping)}
            source = named.get("default", next(iter(named.values()), None))
        if not isinstance(source, str):
            raise InvalidArgumentError("tokenizer config has no chat_template string")
        return cls(
            source,
            bos_token=_token(config.get("bos_token")),
            eos_token=_token(config.get("eos_token")),
        )

    def render(
        self,
        messages: Iterable[MessageLike],
        continuation: bool = False,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> str:
        """Render `messages`; `tools` (if given) replaces the instance's tools for this call."""
        return self._render(coerce_messages(messages), continuation, tools)

    def render_messages(self, messages: list[Message], continuation: bool) -> str:
        return self._render(messages, continuation, None)

    def _render(
        self,
        messages: list[Message],
        continuation: bool,
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> str:
        context: dict[str, Any] = {
            "messages": [_template_dict(m) for m in messages],
            "add_generation_prompt": not continuation,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
        }
        chosen = [dict(t) for t in tools] if tools else self.tools
        if chosen:
            context["tools"] = chosen
        text: str = self._compiled.render(**context)
        if not continuation or not messages:
            return text
        return _cut_after(text, content_text(messages[-1].content))


def _cut_after(text: str, content: str) -> str:
    for needle in (content, content.strip()):
        if needle:
            at = text.rfind(needle)
            if at >= 0:
                return text[: at + len(needle)]
    raise InvalidArgumentError(
        "continuation: the last message's content is empty or not in the rendered prompt, "
        "so there is nothing to continue"
    )
