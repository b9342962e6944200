"""Ollama chat history as OpenAI messages: roles, images, tool calls and their answers.

Part of the proxy's Ollama face (`translate` holds the decisions): pure
translation, no I/O. Errors name the field as the client wrote it
(``messages[2].tool_calls[0].function.arguments``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from .... import fastjson, wire_json
from ....errors import InvalidArgumentError, InvalidTypeError
from ...field_checks import json_type, optional_list, require_mapping, require_str
from ...image_urls import data_url

__all__ = ["ignored", "messages", "with_images"]

log = logging.getLogger("llmchat.proxy")

_ROLES: Final = frozenset({"system", "user", "assistant", "tool"})
_FOLDED_ROLES: Final = {"developer": "system"}
"""Roles Ollama does not have but clients of other APIs send: folded to the nearest one."""
_MESSAGE_FIELDS: Final = frozenset(
    {"role", "content", "images", "tool_calls", "tool_name", "tool_call_id", "thinking"}
)


def ignored(body: Mapping[str, Any], known: frozenset[str], where: str = "") -> None:
    """One DEBUG line per member of `body` not in `known`: the liberal rule's drop.

    Fields a face does not know are never a 400 (clients add fields every few
    weeks); the log names the path, never the value.
    """
    for name in body:
        if name not in known:
            log.debug("%s%s dropped", where, name)


def messages(value: Any) -> list[dict[str, Any]]:
    """The OpenAI messages for an Ollama ``messages`` list (None: none)."""
    value = optional_list(value, "messages")
    out: list[dict[str, Any]] = []
    # (id, name) of every assistant tool call not yet answered, oldest first.
    unanswered: list[tuple[str, str]] = []
    # Image parts of tool results, waiting for the end of the run of tool messages.
    tool_images: list[dict[str, Any]] = []
    for index, message in enumerate(value):
        where = f"messages[{index}]"
        require_mapping(message, where)
        ignored(message, _MESSAGE_FIELDS, f"{where}.")
        role = _role(message.get("role"), where)
        content = message.get("content")
        if content is None:
            content = ""
        require_str(content, f"{where}.content")
        images = message.get("images")
        if role != "tool" and tool_images:
            out.append({"role": "user", "content": tool_images})
            tool_images = []
        item: dict[str, Any] = {"role": role, "content": content}
        if role == "user":
            item["content"] = with_images(content, images, f"{where}.images")
        elif role == "assistant":
            calls = _tool_calls(message.get("tool_calls"), index)
            if calls:
                item["tool_calls"] = calls
                unanswered.extend((call["id"], call["function"]["name"]) for call in calls)
            thinking = message.get("thinking")
            if thinking:
                # Back upstream as the turn's reasoning, as the Anthropic and Responses
                # faces do: llama-server keeps it across tool calls, and models that
                # think between calls need it.
                item["reasoning_content"] = require_str(thinking, f"{where}.thinking")
        elif role == "tool":
            item["tool_call_id"] = _answered_id(message, index, unanswered)
        if images and role == "tool":
            # OpenAI tool messages carry text only; the images follow as a user turn
            # after this run of tool results, so the model still sees them.
            parts = with_images("", images, f"{where}.images")
            tool_images.extend(parts if isinstance(parts, list) else [])
        elif images and role != "user":
            log.debug("%s.images dropped (a %s message cannot carry images)", where, role)
        out.append(item)
    if tool_images:
        out.append({"role": "user", "content": tool_images})
    return out


def _role(value: Any, where: str) -> str:
    if value is None:
        raise InvalidArgumentError(f"{where}.role: is required")
    role = require_str(value, f"{where}.role")
    if role in _ROLES:
        return role
    folded = _FOLDED_ROLES.get(role, "user")
    log.debug("%s.role folded to %r (not an Ollama role)", where, folded)
    return folded


def with_images(content: str, images: Any, where: str) -> str | list[dict[str, Any]]:
    """`content` alone, or text and image parts when there are base64 `images`."""
    if images is None:
        return content
    if not isinstance(images, list):
        raise InvalidTypeError(f"{where}: must be a list of base64 strings")
    if not images:
        return content
    parts: list[dict[str, Any]] = []
    if content:
        parts.append({"type": "text", "text": content})
    for position, image in enumerate(images):
        url = data_url(image, field=f"{where}[{position}]")
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _tool_calls(value: Any, message_index: int) -> list[dict[str, Any]]:
    where = f"messages[{message_index}].tool_calls"
    calls: list[dict[str, Any]] = []
    for position, call in enumerate(optional_list(value, where)):
        at = f"{where}[{position}]"
        require_mapping(call, at)
        function = call.get("function")
        if function is None:
            raise InvalidArgumentError(f"{at}.function: is required")
        require_mapping(function, f"{at}.function")
        name = function.get("name")
        if name is None:
            raise InvalidArgumentError(f"{at}.function.name: is required")
        require_str(name, f"{at}.function.name")
        if not name:
            raise InvalidArgumentError(f"{at}.function.name: must not be empty")
        call_id = call.get("id")
        if call_id is not None:
            require_str(call_id, f"{at}.id")
        calls.append(
            {
                "id": call_id or f"call_{message_index}_{position}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": _arguments(function.get("arguments"), f"{at}.function.arguments"),
                },
            }
        )
    return calls


def _arguments(value: Any, where: str) -> str:
    """Compact, key-sorted JSON text of a call's arguments object."""
    if value is None:
        value = {}
    elif isinstance(value, str):
        # Some clients echo the OpenAI spelling back; accept it if it holds an object.
        value = _decode_object(value, where)
    if not isinstance(value, Mapping):
        raise InvalidTypeError(f"{where}: must be a JSON object, not {json_type(value)}")
    try:
        return wire_json.encode_data(value).decode("utf-8")
    except (InvalidArgumentError, InvalidTypeError) as exc:
        raise type(exc)(f"{where}: {exc}") from None


def _decode_object(text: str, where: str) -> Any:
    try:
        decoded = fastjson.loads(text) if text.strip() else {}
    except ValueError:
        raise InvalidArgumentError(f"{where}: is not valid JSON") from None
    if not isinstance(decoded, dict):
        raise InvalidArgumentError(f"{where}: must be a JSON object")
    return decoded


def _answered_id(message: Mapping[str, Any], index: int, unanswered: list[tuple[str, str]]) -> str:
    """The id of the call a ``tool`` message answers; removes it from `unanswered`."""
    where = f"messages[{index}]"
    explicit = message.get("tool_call_id")
    if explicit is not None:
        explicit = require_str(explicit, f"{where}.tool_call_id")
    tool_name = message.get("tool_name")
    if tool_name is not None:
        require_str(tool_name, f"{where}.tool_name")
    if explicit:
        unanswered[:] = [entry for entry in unanswered if entry[0] != explicit]
        return explicit
    for position, (call_id, name) in enumerate(unanswered):
        if tool_name and name == tool_name:
            del unanswered[position]
            return call_id
    if unanswered:
        return unanswered.pop(0)[0]
    return f"call_{index}"
