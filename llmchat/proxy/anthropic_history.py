"""Anthropic conversation history as OpenAI chat messages: the request's ``messages``.

Pure, like `anthropic_face` (which documents the decisions): user turns with
text, images and ``tool_result`` blocks, assistant turns with text and
``tool_use`` blocks; thinking blocks in history are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .. import wire_json
from ..errors import InvalidArgumentError, InvalidTypeError
from .fields import json_type, require_bool, require_mapping, require_str
from .images import data_url

__all__ = ["history_messages", "required", "text_of"]

_DROPPED_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})


def history_messages(value: Any) -> list[dict[str, Any]]:
    """The request's ``messages`` as OpenAI chat messages, in order (field paths in errors)."""
    if not isinstance(value, list):
        raise InvalidTypeError(f"messages: must be a list, not {json_type(value)}")
    if not value:
        raise InvalidArgumentError("messages: must hold at least one message")
    out: list[dict[str, Any]] = []
    for index, message in enumerate(value):
        where = f"messages[{index}]"
        require_mapping(message, where)
        role = required(message, "role", where)
        if role not in ("user", "assistant"):
            raise InvalidArgumentError(f"{where}.role: must be 'user' or 'assistant', not {role!r}")
        content = required(message, "content", where)
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise InvalidTypeError(
                f"{where}.content: must be a string or a list of blocks, not {json_type(content)}"
            )
        if not content:
            raise InvalidArgumentError(f"{where}.content: must not be empty")
        if role == "user":
            out.extend(_user_turn(content, where))
        else:
            out.extend(_assistant_turn(content, where))
    return out


def _block_type(block: Any, where: str) -> str:
    require_mapping(block, where)
    kind = required(block, "type", where)
    return require_str(kind, f"{where}.type")


def _user_turn(blocks: list[Any], where: str) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for position, block in enumerate(blocks):
        at = f"{where}.content[{position}]"
        kind = _block_type(block, at)
        if kind == "text":
            parts.append({"type": "text", "text": text_of(block, at)})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block, at)}})
        elif kind == "tool_result":
            results.append(_tool_result(block, at))
        elif kind in _DROPPED_BLOCKS:
            continue
        elif kind == "tool_use":
            raise InvalidArgumentError(f"{at}.type: 'tool_use' belongs in an assistant turn")
        else:
            raise InvalidArgumentError(f"{at}.type: unsupported content block type {kind!r}")
    if parts:
        only_text = len(parts) == 1 and parts[0]["type"] == "text"
        results.append({"role": "user", "content": parts[0]["text"] if only_text else parts})
    return results


def _assistant_turn(blocks: list[Any], where: str) -> list[dict[str, Any]]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for position, block in enumerate(blocks):
        at = f"{where}.content[{position}]"
        kind = _block_type(block, at)
        if kind == "text":
            texts.append(text_of(block, at))
        elif kind == "tool_use":
            calls.append(_tool_use(block, at))
        elif kind in _DROPPED_BLOCKS:
            continue
        elif kind in ("tool_result", "image"):
            raise InvalidArgumentError(f"{at}.type: {kind!r} belongs in a user turn")
        else:
            raise InvalidArgumentError(f"{at}.type: unsupported content block type {kind!r}")
    if not texts and not calls:
        return []
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    return [message]


def text_of(block: Mapping[str, Any], where: str) -> str:
    """A text block's ``text``, required to be a string."""
    text = required(block, "text", where)
    return require_str(text, f"{where}.text")


def _image_url(block: Mapping[str, Any], where: str) -> str:
    source = required(block, "source", where)
    require_mapping(source, f"{where}.source")
    kind = required(source, "type", f"{where}.source")
    if kind == "base64":
        media_type = required(source, "media_type", f"{where}.source")
        require_str(media_type, f"{where}.source.media_type")
        if not media_type:
            raise InvalidArgumentError(f"{where}.source.media_type: must not be empty")
        data = required(source, "data", f"{where}.source")
        return data_url(data, field=f"{where}.source.data", media_type=media_type)
    if kind == "url":
        url = required(source, "url", f"{where}.source")
        url = require_str(url, f"{where}.source.url")
        if not url:
            raise InvalidArgumentError(f"{where}.source.url: must not be empty")
        return url
    raise InvalidArgumentError(f"{where}.source.type: must be 'base64' or 'url', not {kind!r}")


def _tool_use(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    call_id = required(block, "id", where)
    require_str(call_id, f"{where}.id")
    name = required(block, "name", where)
    require_str(name, f"{where}.name")
    if not name:
        raise InvalidArgumentError(f"{where}.name: must not be empty")
    arguments = block.get("input")
    if arguments is None:
        arguments = {}
    require_mapping(arguments, f"{where}.input")
    try:
        text = wire_json.encode_data(arguments).decode("utf-8")
    except (InvalidArgumentError, InvalidTypeError) as exc:
        raise type(exc)(f"{where}.input: {exc}") from None
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def _tool_result(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    call_id = required(block, "tool_use_id", where)
    require_str(call_id, f"{where}.tool_use_id")
    content = block.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts = []
        for position, inner in enumerate(content):
            at = f"{where}.content[{position}]"
            kind = _block_type(inner, at)
            if kind != "text":
                raise InvalidArgumentError(
                    f"{at}.type: a tool result can only carry text here, not {kind!r}"
                )
            texts.append(text_of(inner, at))
        text = "\n".join(texts)
    else:
        raise InvalidTypeError(
            f"{where}.content: must be a string or a list of blocks, not {json_type(content)}"
        )
    is_error = block.get("is_error")
    if is_error is not None:
        require_bool(is_error, f"{where}.is_error")
        if is_error:
            text = f"Error: {text}" if text else "Error"
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def required(container: Mapping[str, Any], key: str, where: str = "") -> Any:
    """``container[key]``; a missing or null one is an error naming ``where.key``."""
    value = container.get(key)
    if value is None:
        path = f"{where}.{key}" if where else key
        raise InvalidArgumentError(f"{path}: is required")
    return value
