"""Anthropic conversation history as OpenAI chat messages: the request's ``messages``.

Pure but for DEBUG lines, like `translate` (which states the liberal
rule and the decisions): user turns with text, images and ``tool_result``
blocks; assistant turns with text, ``tool_use`` and ``thinking`` blocks (the
thinking goes back as the turn's ``reasoning_content``); ``system`` turns
kept in place as user-side text; every other block folded or dropped by
`blocks`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from .... import wire_json
from ....errors import InvalidArgumentError, InvalidTypeError
from ....messages import normalize_messages
from ...field_checks import json_type, require_bool, require_list, require_mapping, require_str
from ...image_urls import data_url
from .blocks import dropped, folded_text

__all__ = ["chat_turns", "history_messages", "required", "system_text", "text_of"]

_THINKING: Final = "thinking"


def history_messages(value: Any) -> list[dict[str, Any]]:
    """The request's ``messages`` as OpenAI chat messages, in order (field paths in errors).

    A ``system`` message stays where it was, a system message still; the
    face puts the whole list through `chat_turns`.
    """
    value = require_list(value, "messages")
    if not value:
        raise InvalidArgumentError("messages: must hold at least one message")
    out: list[dict[str, Any]] = []
    for index, message in enumerate(value):
        where = f"messages[{index}]"
        require_mapping(message, where)
        role = required(message, "role", where)
        if role not in ("user", "assistant", "system"):
            raise InvalidArgumentError(
                f"{where}.role: Unexpected role {role!r}: an input message role must be "
                "'user', 'assistant' or 'system'"
            )
        content = required(message, "content", where)
        if role == "system":
            text = system_text(content, f"{where}.content")
            if text:
                out.append({"role": "system", "content": text})
            continue
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


def chat_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` (the system prompt, then `history_messages`) as a strict template takes them.

    The leading system turns become one; a later one becomes user text
    behind `normalize_messages`' ``[System message]`` marker (its fold, not
    another one), so a template that allows one leading system turn never
    sees a second. Then, as Anthropic's API itself does, consecutive user
    turns become one, since a strict template alternates roles.
    """
    normal = normalize_messages(messages, mode="alternate-roles", tool_result_acknowledgement="")
    return _join_user_runs([message.to_dict() for message in normal])


def system_text(value: Any, where: str) -> str:
    """A system prompt's text: a string, or its blocks' text joined with ``"\\n"``."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise InvalidTypeError(
            f"{where}: must be a string or a list of text blocks, not {json_type(value)}"
        )
    texts = []
    for block, at, kind in _typed_blocks(value, where):
        text = text_of(block, at) if kind == "text" else folded_text(block, kind, at)
        if text is not None:
            texts.append(text)
    return "\n".join(texts)


def _join_user_runs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive plain user turns as one (text joined by a blank line, else as parts)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        last = out[-1] if out else None
        if last is None or not (_plain_user(last) and _plain_user(message)):
            out.append(message)
            continue
        before, after = last["content"], message["content"]
        if isinstance(before, str) and isinstance(after, str):
            last["content"] = "\n\n".join(text for text in (before, after) if text)
        else:
            last["content"] = _parts(before) + _parts(after)
    return out


def _plain_user(message: Mapping[str, Any]) -> bool:
    return message["role"] == "user" and set(message) == {"role", "content"}


def _parts(content: Any) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": content}] if content else []


def _typed_blocks(blocks: list[Any], where: str) -> Iterator[tuple[Mapping[str, Any], str, str]]:
    """Each of `blocks` (the list at path `where`) with its own path and its checked ``type``."""
    for position, block in enumerate(blocks):
        at = f"{where}[{position}]"
        require_mapping(block, at)
        kind = required(block, "type", at)
        yield block, at, require_str(kind, f"{at}.type")


def _user_turn(blocks: list[Any], where: str) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block, at, kind in _typed_blocks(blocks, f"{where}.content"):
        if kind == "text":
            parts.append({"type": "text", "text": text_of(block, at)})
        elif kind == "image":
            parts.append(_image_part(block, at))
        elif kind == "tool_result":
            result, images = _tool_result(block, at)
            results.append(result)
            parts.extend(images)
        elif kind == "tool_use":
            raise InvalidArgumentError(f"{at}.type: 'tool_use' belongs in an assistant turn")
        else:
            text = folded_text(block, kind, at)
            if text is not None:
                parts.append({"type": "text", "text": text})
    if parts:
        only_text = len(parts) == 1 and parts[0]["type"] == "text"
        results.append({"role": "user", "content": parts[0]["text"] if only_text else parts})
    return results


def _assistant_turn(blocks: list[Any], where: str) -> list[dict[str, Any]]:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block, at, kind in _typed_blocks(blocks, f"{where}.content"):
        if kind == "text":
            texts.append(text_of(block, at))
        elif kind == "tool_use":
            calls.append(_tool_use(block, at))
        elif kind == _THINKING:
            thought = block.get(_THINKING)
            if isinstance(thought, str) and thought:
                thoughts.append(thought)
            else:
                dropped(at, "thinking without text")
        elif kind == "tool_result":
            raise InvalidArgumentError(f"{at}.type: {kind!r} belongs in a user turn")
        else:
            text = folded_text(block, kind, at)
            if text is not None:
                texts.append(text)
    if not texts and not calls:
        if thoughts:
            # An empty prefill with reasoning alone would end the prompt mid-turn.
            dropped(where, "assistant turn with thinking only")
        return []
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    if thoughts:
        # llama-server renders it back into the template (models that think
        # between tool calls need their earlier reasoning); others ignore it.
        message["reasoning_content"] = "\n\n".join(thoughts)
    return [message]


def text_of(block: Mapping[str, Any], where: str) -> str:
    """A text block's ``text``, required to be a string."""
    text = required(block, "text", where)
    return require_str(text, f"{where}.text")


def _image_part(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": _image_url(block, where)}}


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
    # Anthropic's dotted path: Claude Code reads it as "this image cannot be sent" and
    # goes on without it (a file id means nothing to a chat upstream).
    dotted = where.replace("[", ".").replace("]", "")
    raise InvalidArgumentError(
        f"{dotted}.image.source.type: must be 'base64' or 'url' here, not {kind!r}"
    )


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


def _tool_result(
    block: Mapping[str, Any], where: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``tool`` message of a result, and the images it carried as user parts.

    An OpenAI tool message carries text only, so a result's images (Claude
    Code's Read of a picture) go into the user message after the results;
    its other blocks are folded to text or dropped.
    """
    call_id = required(block, "tool_use_id", where)
    require_str(call_id, f"{where}.tool_use_id")
    content = block.get("content")
    images: list[dict[str, Any]] = []
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts = []
        for inner, at, kind in _typed_blocks(content, f"{where}.content"):
            if kind == "text":
                texts.append(text_of(inner, at))
            elif kind == "image":
                images.append(_image_part(inner, at))
            else:
                folded = folded_text(inner, kind, at)
                if folded is not None:
                    texts.append(folded)
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
    return {"role": "tool", "tool_call_id": call_id, "content": text}, images


def required(container: Mapping[str, Any], key: str, where: str = "") -> Any:
    """``container[key]``; a missing or null one is an error naming ``where.key``."""
    value = container.get(key)
    if value is None:
        path = f"{where}.{key}" if where else key
        raise InvalidArgumentError(f"{path}: is required")
    return value
