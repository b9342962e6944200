"""The Responses face's ``input``: a string or a list of items, as OpenAI chat messages.

Pure, no I/O. Errors name the field as the client wrote it
(``input[2].content[0].type: …``); features that need server-side state
(``item_reference``) or a hosted tool's items raise `Unsupported`.

Decisions:

- a string ``input`` is one user message;
- ``developer`` messages are sent as ``system`` (chat servers and their
  templates know that role); ``instructions`` and the system/developer
  messages that open the input are joined (``"\\n\\n"``) into one system
  message, first, since many chat templates accept a system message only there;
  a later one stays in its place;
- ``function_call`` items join the assistant message before them (or start
  one); each ``function_call_output`` is a ``tool`` message;
- ``reasoning`` items in history are dropped: the upstream cannot take them
  back (chat messages carry no reasoning), and models are not shown their old
  reasoning. A turn left empty by that sends nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..dialects.responses_items import function_call, message_texts
from ..errors import InvalidArgumentError, InvalidTypeError
from .fields import json_type, require_mapping, require_str

__all__ = ["Unsupported", "input_messages"]

_INPUT_ROLES: Final = {"user": "user", "system": "system", "developer": "system"}
_STATEFUL_ITEMS: Final = frozenset({"item_reference"})


class Unsupported(InvalidArgumentError):
    """A valid Responses feature this stateless, function-tools-only face does not serve."""


def input_messages(value: Any, instructions: str | None) -> list[dict[str, Any]]:
    """The OpenAI chat ``messages`` for a Responses ``input`` and ``instructions``."""
    if isinstance(value, str):
        items: list[Any] = [{"role": "user", "content": value}]
    elif isinstance(value, list):
        items = value
    else:
        raise InvalidTypeError(f"input: must be a string or a list, not {json_type(value)}")
    if not items:
        raise InvalidArgumentError("input: must hold at least one item")
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        _add_item(messages, require_mapping(item, f"input[{index}]"), f"input[{index}]")
    system = [instructions] if instructions else []
    while messages and messages[0]["role"] == "system" and isinstance(messages[0]["content"], str):
        system.append(messages.pop(0)["content"])
    if system:
        messages.insert(0, {"role": "system", "content": "\n\n".join(system)})
    if not any(m["role"] != "system" for m in messages):
        raise InvalidArgumentError("input: must hold a message, not only instructions")
    return messages


def _add_item(messages: list[dict[str, Any]], item: Mapping[str, Any], where: str) -> None:
    kind = item.get("type")
    if kind is None and "role" in item:
        kind = "message"  # an EasyInputMessage: {"role", "content"}
    if kind == "message":
        messages.append(_message(item, where))
    elif kind == "function_call":
        _add_call(messages, item, where)
    elif kind == "function_call_output":
        messages.append(_call_output(item, where))
    elif kind == "reasoning":
        pass  # see the module's decisions
    elif kind in _STATEFUL_ITEMS:
        raise Unsupported(f"{where}.type: {kind!r} needs stored responses; this proxy keeps none")
    elif isinstance(kind, str):
        raise Unsupported(f"{where}.type: input items of type {kind!r} are not supported")
    else:
        raise InvalidArgumentError(f"{where}.type: is required")


def _message(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    role = item.get("role")
    content = item.get("content")
    if role == "assistant":
        return {"role": "assistant", "content": _assistant_text(content, f"{where}.content")}
    mapped = _INPUT_ROLES.get(role) if isinstance(role, str) else None
    if mapped is None:
        raise InvalidArgumentError(
            f"{where}.role: must be 'user', 'assistant', 'system' or 'developer', not {role!r}"
        )
    parts = _input_parts(content, f"{where}.content", images=mapped == "user")
    return {"role": mapped, "content": parts}


def _input_parts(content: Any, where: str, *, images: bool) -> str | list[dict[str, Any]]:
    """User/system content: a string when it is text only, else chat content parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidTypeError(f"{where}: must be a string or a list, not {json_type(content)}")
    parts: list[dict[str, Any]] = []
    for index, given in enumerate(content):
        at = f"{where}[{index}]"
        part = require_mapping(given, at)
        kind = part.get("type")
        if kind in ("input_text", "text", "output_text"):
            parts.append({"type": "text", "text": require_str(part.get("text"), f"{at}.text")})
        elif kind == "input_image" and images:
            parts.append(_image(part, at))
        elif kind == "input_image":
            raise InvalidArgumentError(f"{at}.type: only a user message can carry images")
        elif kind in ("input_file", "input_audio"):
            raise Unsupported(f"{at}.type: {kind!r} parts are not supported")
        else:
            raise InvalidArgumentError(f"{at}.type: unsupported content part type {kind!r}")
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _image(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    if part.get("file_id") is not None:
        raise Unsupported(f"{where}.file_id: uploaded files are not supported; send image_url")
    url = part.get("image_url")
    if isinstance(url, Mapping):  # the chat shape, {"url": …}, sent by some clients
        url = url.get("url")
    url = require_str(url, f"{where}.image_url")
    if not url:
        raise InvalidArgumentError(f"{where}.image_url: must not be empty")
    image: dict[str, Any] = {"url": url}
    detail = part.get("detail")
    if isinstance(detail, str) and detail != "auto":
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def _assistant_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidTypeError(f"{where}: must be a string or a list, not {json_type(content)}")
    for index, given in enumerate(content):
        at = f"{where}[{index}]"
        part = require_mapping(given, at)
        kind = part.get("type")
        if kind not in ("output_text", "text", "input_text", "refusal"):
            raise InvalidArgumentError(f"{at}.type: {kind!r} cannot be in an assistant message")
        key = "refusal" if kind == "refusal" else "text"
        require_str(part.get(key), f"{at}.{key}")
    text, refusal = message_texts({"content": content})
    return text + refusal


def _add_call(messages: list[dict[str, Any]], item: Mapping[str, Any], where: str) -> None:
    call_id = require_str(item.get("call_id"), f"{where}.call_id")
    name = require_str(item.get("name"), f"{where}.name")
    if not call_id or not name:
        raise InvalidArgumentError(f"{where}.{'name' if call_id else 'call_id'}: must not be empty")
    arguments = item.get("arguments")
    if arguments is not None:
        require_str(arguments, f"{where}.arguments")
    entry = function_call(item).to_openai()
    if not entry["function"]["arguments"]:
        entry["function"]["arguments"] = "{}"
    last = messages[-1] if messages else None
    if last is None or last["role"] != "assistant":
        last = {"role": "assistant", "content": None}
        messages.append(last)
    last.setdefault("tool_calls", []).append(entry)


def _call_output(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    call_id = require_str(item.get("call_id"), f"{where}.call_id")
    if not call_id:
        raise InvalidArgumentError(f"{where}.call_id: must not be empty")
    output = item.get("output")
    if isinstance(output, list):
        text = _input_parts(output, f"{where}.output", images=False)
        assert isinstance(text, str)  # images=False refuses every part but text
        output = text
    output = require_str(output, f"{where}.output")
    return {"role": "tool", "tool_call_id": call_id, "content": output}
