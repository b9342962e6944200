"""OpenAI-shaped history as Gemini ``contents`` and ``systemInstruction``; pure.

- ``system``/``developer`` messages, wherever they are, become the parts of
  ``systemInstruction`` (Gemini has one; their order is kept).
- ``user`` → ``role: user``; ``assistant`` → ``role: model``; text parts →
  ``{"text"}``; an ``image_url`` data URL → ``inlineData {mimeType, data}``,
  an http(s) URL → ``fileData {mimeType, fileUri}`` (the type guessed from the
  name, else left out); ``input_audio`` → ``inlineData audio/<format>``.
- An assistant's ``tool_calls`` → ``functionCall {name, args}`` parts (no
  ``id``: Gemini pairs results with calls by name and order, and an id from
  another provider's history is not Gemini's to check); its
  ``reasoning_parts`` tagged ``gemini`` put each ``thoughtSignature`` back on
  the part it came on (a call's on that call, matched by id); others dropped.
  A turn whose calls carry no signature at all signs its first call with
  Google's sentinel `UNSIGNED_CALL` (Gemini 3 refuses an unsigned call).
- ``tool`` results → ``functionResponse {name, response}`` parts in a user
  turn; the name is the matching call's in the assistant turn before (by
  ``tool_call_id``), else the message's ``name``. A result that is a JSON
  object is the ``response``; anything else is ``{"result": <the text>}``.
- Adjacent turns of one role are merged (tool results and a user message
  after them become one user turn).
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .. import fastjson
from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import Message, content_text

__all__ = ["UNSIGNED_CALL", "contents_of"]

_SYSTEM: Final = ("system", "developer")
UNSIGNED_CALL: Final = "skip_thought_signature_validator"
"""The ``thoughtSignature`` of a function call that came without one (Google's sentinel)."""


def contents_of(
    messages: Sequence[Message],
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """`(contents, systemInstruction or None)` for a normalized conversation."""
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool_call_id -> name, from the last assistant turn
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if message.role in _SYSTEM:
            system += _parts(message.content, where)
            continue
        if message.role == "assistant":
            names = _call_names(message, where)
            _append(contents, "model", _model_parts(message, where))
        elif message.role in ("tool", "function"):
            _append(contents, "user", [_function_response(message, names, where)])
        elif message.role == "user":
            _append(contents, "user", _parts(message.content, where))
        else:
            raise InvalidArgumentError(f"{where}.role {message.role!r} has no Gemini form")
    return contents, ({"parts": system} if system else None)


def _append(contents: list[dict[str, Any]], role: str, parts: list[dict[str, Any]]) -> None:
    if not parts:
        return
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": parts})


# -- content parts ----------------------------------------------------------------


def _parts(content: Any, where: str) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"text": content}]
    return [_part(part, f"{where}.content[{i}]") for i, part in enumerate(content)]


def _part(part: Any, where: str) -> dict[str, Any]:
    if isinstance(part, str):
        return {"text": part}
    if not isinstance(part, Mapping):
        raise InvalidTypeError(f"{where} must be a content part mapping")
    kind = part.get("type")
    if kind in ("text", "input_text") and isinstance(part.get("text"), str):
        return {"text": part["text"]}
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        if not isinstance(url, str) or not url:
            raise InvalidArgumentError(f"{where}.image_url.url must be a data: or http(s) URL")
        return _media(url, f"{where}.image_url.url")
    if kind == "input_audio":
        audio = part.get("input_audio")
        if isinstance(audio, Mapping) and isinstance(audio.get("data"), str):
            fmt = str(audio.get("format") or "wav")
            return {"inlineData": {"mimeType": f"audio/{fmt}", "data": audio["data"]}}
        raise InvalidArgumentError(f"{where}.input_audio must have data and format")
    raise InvalidArgumentError(f"{where}.type {kind!r} has no Gemini form")


def _media(url: str, where: str) -> dict[str, Any]:
    if url.startswith("data:"):
        head, comma, data = url[5:].partition(",")
        mime, _, encoding = head.partition(";")
        if not comma or encoding != "base64" or not mime:
            raise InvalidArgumentError(f"{where} must be data:<type>;base64,<data>")
        return {"inlineData": {"mimeType": mime, "data": data}}
    if url.startswith(("https://", "http://", "gs://")):
        guessed, _ = mimetypes.guess_type(url.partition("?")[0])
        file_data = {"mimeType": guessed, "fileUri": url} if guessed else {"fileUri": url}
        return {"fileData": file_data}
    raise InvalidArgumentError(f"{where} must be a data: or http(s) URL, got {url[:40]!r}")


# -- the model's turn ----------------------------------------------------------------


def _call_names(message: Message, where: str) -> dict[str, str]:
    names: dict[str, str] = {}
    for j, call in enumerate(message.tool_calls or ()):
        function = call.get("function") if isinstance(call, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"{where}.tool_calls[{j}].function.name is missing")
        if isinstance(call.get("id"), str) and call["id"]:
            names[call["id"]] = name
    return names


def _model_parts(message: Message, where: str) -> list[dict[str, Any]]:
    signatures = [
        part
        for part in message.reasoning_parts or ()
        if part.get("dialect") == "gemini" and isinstance(part.get("thoughtSignature"), str)
    ]
    text = content_text(message.content) if message.content is not None else ""
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    loose = [p["thoughtSignature"] for p in signatures if p.get("on") != "functionCall"]
    if loose and parts:
        parts[0]["thoughtSignature"] = loose.pop(0)
    parts += [{"text": "", "thoughtSignature": signature} for signature in loose]
    by_id = {
        p.get("id"): p["thoughtSignature"] for p in signatures if p.get("on") == "functionCall"
    }
    calls = [
        _function_call(call, f"{where}.tool_calls[{j}]", by_id)
        for j, call in enumerate(message.tool_calls or ())
    ]
    if calls and not any("thoughtSignature" in call for call in calls):
        # A call Gemini did not sign (history from another model or client, or a
        # face that cannot carry the signature): Gemini 3 refuses the whole request
        # with a 400 unless the turn's first call is signed, and Google documents
        # this value for exactly that case (Gemini 2.5 accepts it too).
        calls[0]["thoughtSignature"] = UNSIGNED_CALL
    return parts + calls


def _function_call(call: Mapping[str, Any], where: str, by_id: dict[Any, str]) -> dict[str, Any]:
    function = call["function"]
    raw = function.get("arguments")
    if raw is None or raw == "":
        args: Any = {}
    elif isinstance(raw, Mapping):
        args = dict(raw)
    else:
        try:
            args = fastjson.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            args = None
    if not isinstance(args, dict):
        raise InvalidArgumentError(f"{where}.function.arguments must be a JSON object")
    part: dict[str, Any] = {"functionCall": {"name": function["name"], "args": args}}
    call_id = call.get("id")
    if call_id in by_id:
        part["thoughtSignature"] = by_id[call_id]
    return part


# -- tool results ---------------------------------------------------------------------


def _function_response(message: Message, names: dict[str, str], where: str) -> dict[str, Any]:
    call_id = message.tool_call_id
    name = names.get(call_id) if call_id else None
    name = name or message.name
    if not name:
        raise InvalidArgumentError(
            f"{where}.tool_call_id {call_id!r} matches no tool call of the assistant turn "
            "before it (Gemini needs the function name; or give the message a name)"
        )
    text = message.content if isinstance(message.content, str) else content_text(message.content)
    try:
        value = fastjson.loads(text)
    except ValueError:
        value = None
    response = value if isinstance(value, dict) else {"result": text}
    return {"functionResponse": {"name": name, "response": response}}
