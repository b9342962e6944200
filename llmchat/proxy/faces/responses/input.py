"""The Responses face's ``input``: a string or a list of items, as OpenAI chat messages.

Pure but for `memo` (the items this process sent). Errors name the
field as the client wrote it (``input[2].content[0].type: …``). The face's
liberal rule (`translate`) holds here too: an item or part type a chat
upstream cannot take is dropped with one DEBUG line, never a 400.

Decisions:

- a string ``input`` is one user message;
- ``developer`` messages are sent as ``system`` (chat servers and their
  templates know that role); ``instructions`` and the system/developer
  messages that open the input are joined (``"\\n\\n"``) into one system
  message, first, since many chat templates accept a system message only there;
  a later one stays in its place;
- ``function_call`` and ``custom_tool_call`` items join the assistant message
  before them (or start one), under the upstream name the tool got
  (`tools`); a custom call's raw input is its one ``input``
  argument. Each ``function_call_output``/``custom_tool_call_output`` is a
  ``tool`` message (text parts joined; other parts dropped);
- ``reasoning`` items become the ``reasoning_content`` of the assistant turn
  that follows them (their content text, else their summary, else the text
  the proxy itself carried in ``encrypted_content``): llama-server and models
  that think between tool calls need it back. OpenAI's own encrypted content
  means nothing to a chat upstream and is dropped;
- ``additional_tools`` items are tools (`tools`), not messages;
- an ``item_reference`` to an item the request also holds in full is dropped;
  one to an item this process sent is resolved (`memo`); one to a
  reasoning item otherwise unknown is dropped (reasoning is no content the
  answer needs); any other unknown reference is a 400, OpenAI's "not found".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ....dialects.responses_items import message_texts
from ....errors import InvalidArgumentError, InvalidTypeError
from ....protocols.responses_objects import uncarried_reasoning
from ...field_checks import json_type, require_mapping, require_str
from . import memo as responses_memo
from .tools import CUSTOM_ARGUMENT, ToolSet, dropped

__all__ = ["Unsupported", "additional_tools", "input_messages"]

_INPUT_ROLES: Final = {"user": "user", "system": "system", "developer": "system"}
_CALLS: Final = ("function_call", "custom_tool_call")
_OUTPUTS: Final = ("function_call_output", "custom_tool_call_output")


class Unsupported(InvalidArgumentError):
    """A request this stateless face cannot serve; `param` and `code` as OpenAI names them."""

    def __init__(
        self, message: str, *, param: str | None = None, code: str = "unsupported_parameter"
    ) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


def additional_tools(value: Any) -> list[tuple[str, Any]]:
    """`(path of its tools, tools)` for each ``additional_tools`` item of ``input``."""
    if not isinstance(value, list):
        return []
    return [
        (f"input[{index}].tools", item.get("tools"))
        for index, item in enumerate(value)
        if isinstance(item, Mapping) and item.get("type") == "additional_tools"
    ]


def input_messages(value: Any, instructions: str | None, tools: ToolSet) -> list[dict[str, Any]]:
    """The OpenAI chat ``messages`` for a Responses ``input`` and ``instructions``."""
    if isinstance(value, str):
        items: list[Any] = [{"role": "user", "content": value}]
    elif isinstance(value, list):
        items = value
    else:
        raise InvalidTypeError(f"input: must be a string or a list, not {json_type(value)}")
    if not items:
        raise InvalidArgumentError("input: must hold at least one item")
    given = {
        item.get("id")
        for item in items
        if isinstance(item, Mapping) and item.get("type") != "item_reference"
    }
    history = _History(tools, given)
    for index, item in enumerate(items):
        history.add(require_mapping(item, f"input[{index}]"), f"input[{index}]")
    messages = history.messages
    system = [instructions] if instructions else []
    while messages and messages[0]["role"] == "system" and isinstance(messages[0]["content"], str):
        system.append(messages.pop(0)["content"])
    if system:
        messages.insert(0, {"role": "system", "content": "\n\n".join(system)})
    if not any(m["role"] != "system" for m in messages):
        raise InvalidArgumentError("input: must hold a message, not only instructions")
    return messages


class _History:
    """The chat messages of one ``input``, built item by item."""

    def __init__(self, tools: ToolSet, given_ids: set[Any]) -> None:
        self.tools = tools
        self.given_ids = given_ids
        self.messages: list[dict[str, Any]] = []
        self.reasoning: list[str] = []  # read, waiting for the assistant turn that follows

    def add(self, item: Mapping[str, Any], where: str) -> None:
        kind = item.get("type")
        if kind is None and "role" in item:
            kind = "message"  # an EasyInputMessage: {"role", "content"}
        if kind == "message":
            message = _message(item, where)
            if message["role"] == "assistant":
                self._assistant(message)
            else:
                self.messages.append(message)
        elif kind in _CALLS:
            self._call(item, where, custom=kind == "custom_tool_call")
        elif kind in _OUTPUTS:
            self.messages.append(_call_output(item, where))
        elif kind == "reasoning":
            self._reasoning(item, where)
        elif kind == "item_reference":
            self._reference(item, where)
        elif kind == "additional_tools":
            pass  # tools, read by `additional_tools`
        elif isinstance(kind, str):
            dropped(f"{where} ({kind!r})", "an item type a chat upstream cannot take")
        else:
            raise InvalidArgumentError(f"{where}.type: is required")

    def _assistant(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self._think(message)

    def _think(self, message: dict[str, Any]) -> None:
        """Give `message` the reasoning read since the last assistant turn."""
        if not self.reasoning:
            return
        joined = "\n\n".join(self.reasoning)
        previous = message.get("reasoning_content")
        message["reasoning_content"] = f"{previous}\n\n{joined}" if previous else joined
        self.reasoning = []

    def _call(self, item: Mapping[str, Any], where: str, *, custom: bool) -> None:
        call_id = require_str(item.get("call_id"), f"{where}.call_id")
        name = require_str(item.get("name"), f"{where}.name")
        if not call_id or not name:
            field = "name" if call_id else "call_id"
            raise InvalidArgumentError(f"{where}.{field}: must not be empty")
        namespace = item.get("namespace")
        upstream = self.tools.upstream_name(name, namespace if isinstance(namespace, str) else None)
        if custom:
            raw = require_str(item.get("input"), f"{where}.input")
            arguments = json.dumps({CUSTOM_ARGUMENT: raw}, ensure_ascii=False)
        else:
            given = item.get("arguments")
            arguments = require_str(given, f"{where}.arguments") if given is not None else ""
        entry = {
            "id": call_id,
            "type": "function",
            "function": {"name": upstream, "arguments": arguments or "{}"},
        }
        last = self.messages[-1] if self.messages else None
        if last is None or last["role"] != "assistant":
            self._assistant({"role": "assistant", "content": None, "tool_calls": [entry]})
        else:  # one turn: its text, its calls (and reasoning between them) together
            last.setdefault("tool_calls", []).append(entry)
            self._think(last)

    def _reasoning(self, item: Mapping[str, Any], where: str) -> None:
        texts = _texts(item.get("content")) or _texts(item.get("summary"))
        if not texts:
            carried = uncarried_reasoning(item.get("encrypted_content"))
            if carried:
                texts = [carried]
            elif item.get("encrypted_content"):
                dropped(f"{where}.encrypted_content", "another server's encrypted reasoning")
        self.reasoning.extend(texts)

    def _reference(self, item: Mapping[str, Any], where: str) -> None:
        item_id = require_str(item.get("id"), f"{where}.id")
        if item_id in self.given_ids:
            dropped(where, "a reference to an item the input repeats in full")
            return
        found = responses_memo.recall(item_id)
        if found is not None:
            self.add(found, f"{where} ({item_id})")
        elif item_id.startswith("rs_"):
            dropped(where, "a reference to reasoning this process does not hold")
        else:
            raise Unsupported(
                f"Item with id '{item_id}' not found.",
                param=f"{where}.id",
                code="invalid_value",
            )


def _texts(parts: Any) -> list[str]:
    if not isinstance(parts, list):
        return []
    out = []
    for part in parts:
        if isinstance(part, Mapping) and isinstance(part.get("text"), str) and part["text"]:
            out.append(part["text"])
    return out


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
        elif kind in ("input_file", "input_audio") and images:
            # What the user attached and asked about: it cannot be served without it.
            raise Unsupported(f"{at}.type: {kind!r} parts are not supported")
        else:
            dropped(f"{at} ({kind!r})", "a part this message cannot carry upstream")
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
        if kind in ("output_text", "text", "input_text", "refusal"):
            key = "refusal" if kind == "refusal" else "text"
            require_str(part.get(key), f"{at}.{key}")
        else:
            dropped(f"{at} ({kind!r})", "a part an assistant message cannot carry upstream")
    text, refusal = message_texts({"content": content})
    return text + refusal


def _call_output(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    call_id = require_str(item.get("call_id"), f"{where}.call_id")
    if not call_id:
        raise InvalidArgumentError(f"{where}.call_id: must not be empty")
    output = item.get("output")
    if isinstance(output, list):
        text = _input_parts(output, f"{where}.output", images=False)
        assert isinstance(text, str)  # images=False keeps text parts alone
        output = text
    output = require_str(output, f"{where}.output")
    return {"role": "tool", "tool_call_id": call_id, "content": output}
