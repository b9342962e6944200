"""Gemini ``contents`` and ``systemInstruction`` as OpenAI chat messages; pure but for DEBUG lines.

- ``role`` ``user`` (or none), ``model``, ``function``/``tool`` (older
  clients' turn of function results). ``text`` parts become text; an
  ``inlineData`` image becomes an ``image_url`` data URL, audio an
  ``input_audio`` part, text/* its decoded text; a ``fileData`` http(s)
  image its URL. Other media are a 400 naming the part: the upstream cannot
  take them.
- A model turn's ``functionCall`` parts become the assistant's ``tool_calls``
  (arguments as compact JSON). Gemini has no call ids (newer servers send an
  optional ``id``): a call without one gets ``call_<n>``, ``n`` counting the
  calls of the whole conversation in order, so the same history always gets
  the same ids (and the upstream's prompt cache keeps matching).
- ``functionResponse`` parts become ``tool`` messages right after that
  turn, each matched to a call of the model turn before it: by ``id`` when
  it has one, else the first unanswered call of the same ``name`` (an ``id``
  no call carries, as Gemini CLI sends for a call that came without one,
  pairs by name with a call the client gave no id). A result
  matching no call is folded into the user's text (an OpenAI upstream
  refuses a tool message no call asked for). The result is the
  ``response`` object as compact JSON, or its ``output``/``content`` member
  when that is the only one and a string (how Gemini CLI wraps a tool's text).
- ``thought: true`` parts are the model's own reasoning: their text is not
  sent back. A ``thoughtSignature`` (on a call, a text or a thought part)
  goes on the assistant message's ``reasoning_parts`` tagged ``gemini``,
  which a Gemini upstream's request builder puts back on the part it came
  on and every other dialect leaves out.
- ``executableCode``, ``codeExecutionResult`` and unknown parts are dropped
  (one DEBUG line each); adjacent user messages are joined, as a strict
  template wants roles to alternate.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Mapping
from typing import Any, Final

from .... import wire_json
from ....errors import InvalidArgumentError
from ...field_checks import json_type, require_list, require_mapping, require_str
from ...image_urls import data_url

__all__ = ["history_messages", "system_text"]

log = logging.getLogger("llmchat.proxy")

_USER_ROLES: Final = frozenset({"user", "function", "tool", ""})
_AUDIO: Final = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mp3": "mp3", "audio/mpeg": "mp3"}
_DROPPED_PARTS: Final = ("executableCode", "codeExecutionResult", "videoMetadata", "toolCall")


def system_text(value: Any, where: str = "systemInstruction") -> str:
    """``systemInstruction`` as one string: a string, a Content, one part or a list of parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = value
    else:
        require_mapping(value, where)
        if "parts" not in value:
            parts = [value]  # one part given where a Content goes
        else:
            parts = require_list(value["parts"], f"{where}.parts", "a list of parts")
            where = f"{where}.parts"
    texts: list[str] = []
    for index, part in enumerate(parts):
        path = f"{where}[{index}]"
        if isinstance(part, str):
            texts.append(part)
            continue
        require_mapping(part, path)
        text = part.get("text")
        if text is not None:
            texts.append(require_str(text, f"{path}.text"))
        else:
            log.debug("%s dropped (not text)", path)
    return "\n".join(text for text in texts if text)


class _Calls:
    """The calls of the last model turn, for matching its results; and the id counter."""

    def __init__(self) -> None:
        self.count = 0
        self.pending: list[tuple[str, str, bool]] = []
        """(id, name, whether the client gave the id) of the last model turn's calls not
        answered yet."""

    def add(self, given: Any, name: str) -> str:
        """Note a call of the model turn; its id: the client's, else ``call_<n>``."""
        self.count += 1
        named = isinstance(given, str) and bool(given)
        call_id = given if named else f"call_{self.count - 1}"
        self.pending.append((call_id, name, named))
        return call_id

    def match(self, given: Any, name: str | None) -> str | None:
        """The id of the call a result answers: by its `given` id, else by `name`.

        An id no call carries still pairs by name with a call that had no id: Gemini
        CLI names such a call itself (``<name>-<ms>-<hex>``) and sends that id back
        while the model turn it returns still has none.
        """
        has_id = isinstance(given, str) and bool(given)
        for index, (call_id, _, _) in enumerate(self.pending):
            if has_id and call_id == given:
                return self.pending.pop(index)[0]
        for index, (_, call_name, named) in enumerate(self.pending):
            if call_name == name and not (has_id and named):
                return self.pending.pop(index)[0]
        return None


def history_messages(value: Any) -> list[dict[str, Any]]:
    """The request's ``contents`` as OpenAI chat messages, in order (field paths in errors)."""
    contents = require_list(value, "contents", "a list of Content objects")
    if not contents:
        raise InvalidArgumentError("contents: must hold at least one Content")
    calls = _Calls()
    out: list[dict[str, Any]] = []
    for index, content in enumerate(contents):
        where = f"contents[{index}]"
        require_mapping(content, where)
        role = content.get("role") or ""
        require_str(role, f"{where}.role")
        parts = require_list(content.get("parts", []), f"{where}.parts", "a list of parts")
        if role == "model":
            calls.pending = []
            message = _model_turn(parts, where, calls)
            if message is not None:
                out.append(message)
        elif role in _USER_ROLES:
            out.extend(_user_turn(parts, where, calls))
        else:
            raise InvalidArgumentError(
                f"{where}.role: Please use a valid role: user, model (got {role!r})"
            )
    return _join_users(out)


# -- the model's turn -------------------------------------------------------------


def _model_turn(parts: list[Any], where: str, calls: _Calls) -> dict[str, Any] | None:
    texts: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    signatures: list[dict[str, Any]] = []
    for j, part in enumerate(parts):
        path = f"{where}.parts[{j}]"
        require_mapping(part, path)
        signature = part.get("thoughtSignature")
        signed = isinstance(signature, str) and bool(signature)
        function_call = part.get("functionCall")
        if function_call is not None:
            call = _tool_call(function_call, f"{path}.functionCall", calls)
            tool_calls.append(call)
            if signed:
                name = call["function"]["name"]
                signatures.append(_signature(signature, "functionCall", call["id"], name))
            continue
        text = part.get("text")
        if text is not None:
            require_str(text, f"{path}.text")
            thought = part.get("thought") is True
            if not thought:
                texts.append(text)
            if signed:
                signatures.append(_signature(signature, "thought" if thought else "text"))
            continue
        _drop(part, path)
    if not texts and not tool_calls:
        return None  # thoughts only: nothing the upstream should see as a prefill
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if signatures:
        message["reasoning_parts"] = signatures
    return message


def _tool_call(value: Any, where: str, calls: _Calls) -> dict[str, Any]:
    function_call = require_mapping(value, where)
    name = require_str(function_call.get("name"), f"{where}.name")
    if not name:
        raise InvalidArgumentError(f"{where}.name: must not be empty")
    args = function_call.get("args")
    args = {} if args is None else require_mapping(args, f"{where}.args")
    call_id = calls.add(function_call.get("id"), name)
    arguments = wire_json.encode_data(dict(args)).decode("utf-8")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _signature(signature: str, on: str, call_id: str = "", name: str = "") -> dict[str, Any]:
    """A thought signature as the Gemini dialect keeps one (`llmchat.dialects.gemini`)."""
    part: dict[str, Any] = {"dialect": "gemini", "thoughtSignature": signature, "on": on}
    if call_id:
        part["id"], part["name"] = call_id, name
    return part


# -- the user's turn ---------------------------------------------------------------


def _user_turn(parts: list[Any], where: str, calls: _Calls) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for j, part in enumerate(parts):
        path = f"{where}.parts[{j}]"
        require_mapping(part, path)
        if part.get("thought") is True:
            log.debug("%s dropped (a thought in a user turn)", path)
            continue
        response = part.get("functionResponse")
        if response is not None:
            result = _tool_result(response, f"{path}.functionResponse", calls)
            if result["role"] == "tool":
                results.append(result)
            else:
                content.append({"type": "text", "text": result["content"]})
            continue
        if part.get("functionCall") is not None:
            raise InvalidArgumentError(
                f"{path}.functionCall: only a model turn may call a function"
            )
        converted = _user_part(part, path)
        if converted is not None:
            content.append(converted)
    out = list(results)
    if content:
        only_text = all(item["type"] == "text" for item in content)
        body: Any = "".join(item["text"] for item in content) if only_text else content
        out.append({"role": "user", "content": body})
    return out


def _tool_result(value: Any, where: str, calls: _Calls) -> dict[str, Any]:
    response = require_mapping(value, where)
    name = response.get("name")
    if name is not None:
        require_str(name, f"{where}.name")
    result = response.get("response")
    if result is not None:
        require_mapping(result, f"{where}.response")
    text = _result_text(result)
    call_id = calls.match(response.get("id"), name)
    if call_id is None:
        log.debug("%s matches no call of the model turn before it: folded into text", where)
        return {"role": "user", "content": f"[{name or 'function'} result]\n{text}"}
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _result_text(result: Mapping[str, Any] | None) -> str:
    if not result:
        return ""
    if len(result) == 1:
        (only,) = result.values()
        if isinstance(only, str) and next(iter(result)) in ("output", "content", "result"):
            return only
    return wire_json.encode_data(dict(result)).decode("utf-8")


def _user_part(part: Mapping[str, Any], path: str) -> dict[str, Any] | None:
    text = part.get("text")
    if text is not None:
        return {"type": "text", "text": require_str(text, f"{path}.text")}
    inline = part.get("inlineData")
    if inline is not None:
        return _inline(require_mapping(inline, f"{path}.inlineData"), f"{path}.inlineData")
    file_data = part.get("fileData")
    if file_data is not None:
        return _file(require_mapping(file_data, f"{path}.fileData"), f"{path}.fileData")
    _drop(part, path)
    return None


def _inline(inline: Mapping[str, Any], where: str) -> dict[str, Any]:
    mime = require_str(inline.get("mimeType"), f"{where}.mimeType").lower()
    data = inline.get("data")
    if mime.startswith("image/"):
        return {
            "type": "image_url",
            "image_url": {"url": data_url(data, field=f"{where}.data", media_type=mime)},
        }
    data = require_str(data, f"{where}.data")
    if mime in _AUDIO:
        return {"type": "input_audio", "input_audio": {"data": data, "format": _AUDIO[mime]}}
    if mime.startswith("text/") or mime == "application/json":
        try:
            text = base64.b64decode(data, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise InvalidArgumentError(f"{where}.data: not base64 UTF-8 text") from None
        return {"type": "text", "text": text}
    raise InvalidArgumentError(f"{where}.mimeType: {mime} is not something the upstream can read")


def _file(file_data: Mapping[str, Any], where: str) -> dict[str, Any]:
    uri = require_str(file_data.get("fileUri"), f"{where}.fileUri")
    mime = file_data.get("mimeType")
    image = not isinstance(mime, str) or mime.lower().startswith("image/")
    if uri.startswith(("https://", "http://")) and image:
        return {"type": "image_url", "image_url": {"url": uri}}
    raise InvalidArgumentError(
        f"{where}.fileUri: only an http(s) image URL can reach the upstream (Files API "
        "and gs:// URIs are Google's own)"
    )


def _drop(part: Mapping[str, Any], path: str) -> None:
    kinds = [key for key in part if key not in ("thought", "thoughtSignature")]
    kind = next((key for key in kinds if key in _DROPPED_PARTS), kinds[0] if kinds else "empty")
    log.debug("%s (%s) dropped", path, kind if isinstance(kind, str) else json_type(kind))


def _join_users(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Adjacent user messages as one (text joined by a blank line, parts concatenated)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        last = out[-1] if out else None
        if last is None or last["role"] != "user" or message["role"] != "user":
            out.append(message)
            continue
        a, b = last["content"], message["content"]
        if isinstance(a, str) and isinstance(b, str):
            last["content"] = f"{a}\n\n{b}"
        else:
            last["content"] = _as_parts(a) + _as_parts(b)
    return out


def _as_parts(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
