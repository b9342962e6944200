"""Tool calls: one whole call a model made, in every dialect llmchat speaks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolCall"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One complete tool call.

    `arguments` is always a dict: the decoded JSON object the model wrote.
    When the model's arguments were not a JSON object, `arguments` is ``{}``,
    `arguments_undecodable` is True and `arguments_json` keeps the text as it
    came, so nothing is lost and nothing crashes.
    """

    name: str
    """The function name."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Decoded arguments; ``{}`` when none were given or they were undecodable."""
    id: str = ""
    """The provider's call id (``""`` when the provider sent none)."""
    type: str = "function"
    """The tool type; always ``"function"`` on the OpenAI wire today."""
    arguments_json: str | None = None
    """The arguments exactly as the provider sent them, when they came as text."""
    arguments_undecodable: bool = False
    """True when `arguments_json` is not a JSON object."""

    @classmethod
    def from_openai(cls, data: Mapping[str, Any]) -> ToolCall:
        """Build from an OpenAI ``tool_calls[*]`` entry (``{"id", "type", "function"}``).

        ``function.arguments`` may be a JSON string (OpenAI) or an object (some
        servers); anything else is kept in `arguments_json` and flagged.
        """
        function = data.get("function") if isinstance(data.get("function"), Mapping) else {}
        raw = function.get("arguments")
        arguments, text, undecodable = decode_arguments(raw)
        return cls(
            name=str(function.get("name") or ""),
            arguments=arguments,
            id=str(data.get("id") or ""),
            type=str(data.get("type") or "function"),
            arguments_json=text,
            arguments_undecodable=undecodable,
        )

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls[*]`` entry; arguments as the original text when known."""
        text = self.arguments_json
        if text is None:
            text = json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))
        return {
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name, "arguments": text},
        }

    def to_ollama(self) -> dict[str, Any]:
        """Ollama's ``message.tool_calls[*]`` entry: arguments as a JSON object."""
        return {"function": {"name": self.name, "arguments": dict(self.arguments)}}

    def to_anthropic_block(self) -> dict[str, Any]:
        """An Anthropic ``tool_use`` content block."""
        return {"type": "tool_use", "id": self.id, "name": self.name, "input": dict(self.arguments)}


def decode_arguments(raw: Any) -> tuple[dict[str, Any], str | None, bool]:
    """Return `(arguments, arguments_json, undecodable)` for a provider's arguments value."""
    if raw is None or raw == "":
        return {}, raw, False
    if isinstance(raw, Mapping):
        return dict(raw), None, False
    if not isinstance(raw, str):
        return {}, json.dumps(raw), True
    try:
        value = json.loads(raw)
    except ValueError:
        return {}, raw, True
    if not isinstance(value, dict):
        return {}, raw, True
    return value, raw, False
