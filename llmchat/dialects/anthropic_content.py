"""One message's content as Anthropic content blocks (for `anthropic_request`).

Pure, no I/O. OpenAI content parts become Anthropic blocks: a ``text`` part
is already one; an ``image_url`` part becomes an ``image`` block whose source
is base64 (from a ``data:`` URL) or a url (``http``/``https``). Parts with no
Anthropic counterpart (``input_audio``, ``file`` …) raise, naming the part;
any other part is taken as an Anthropic block given as it is (``image`` with
a source, ``document``, ``search_result`` …).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..errors import InvalidArgumentError, InvalidTypeError
from ..messages import Message
from ..tools import decode_arguments
from .request_checks import mapping_at, name_at

__all__ = [
    "assistant_content",
    "content_blocks",
    "copy_dict",
    "copy_json",
    "image_block",
    "system_blocks",
    "tool_result",
]

_DATA_URL: Final = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
_NO_COUNTERPART: Final = frozenset({"input_audio", "audio_url", "file", "video_url", "input_file"})
_REASONING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars)."""
    if isinstance(value, Mapping):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [copy_json(item) for item in value]
    return value


def copy_dict(value: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON object, as a dict."""
    return {key: copy_json(item) for key, item in value.items()}


def content_blocks(content: Any, where: str, *, keep_str: bool) -> str | list[dict[str, Any]]:
    """`content` as Anthropic content: a str kept as it is (when `keep_str`), else blocks."""
    if isinstance(content, str):
        if keep_str:
            return content
        return [{"type": "text", "text": content}] if content else []
    if content is None:
        raise InvalidArgumentError(f"{where} is missing: Anthropic needs content in this message")
    if not isinstance(content, list):
        raise InvalidTypeError(f"{where} must be a str or a list of parts")
    return [_block(part, f"{where}[{index}]") for index, part in enumerate(content)]


def _block(part: Any, where: str) -> dict[str, Any]:
    if not isinstance(part, Mapping):
        raise InvalidTypeError(f"{where} must be a content part (a mapping)")
    kind = part.get("type")
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise InvalidTypeError(f"{where}.text must be a str")
        return copy_dict(part)
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        return image_block(url, f"{where}.image_url.url")
    if kind in _NO_COUNTERPART or not isinstance(kind, str):
        raise InvalidArgumentError(f"{where}: a {kind!r} part has no Anthropic content block")
    return copy_dict(part)


def image_block(url: Any, where: str) -> dict[str, Any]:
    """An ``image`` block for an image URL: base64 from a data URL, else a url source."""
    if not isinstance(url, str):
        raise InvalidTypeError(f"{where} must be a str")
    found = _DATA_URL.fullmatch(url)
    if found is not None:
        source = {"type": "base64", "media_type": found.group(1), "data": found.group(2)}
        return {"type": "image", "source": source}
    if url.startswith(("https://", "http://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise InvalidArgumentError(
        f"{where} must be a base64 data: URL or an http(s) URL, got {url[:40]!r}"
    )


def system_blocks(system: Sequence[Message]) -> str | list[Any] | None:
    """The top-level ``system``: the texts joined by a blank line, or text blocks.

    Blocks when any system message had a parts list (so ``cache_control`` on a
    part is kept); None when there is no system text.
    """
    if all(isinstance(m.content, str) or m.content is None for m in system):
        texts = [m.content for m in system if isinstance(m.content, str) and m.content]
        return "\n\n".join(texts) if texts else None
    blocks: list[Any] = []
    for message in system:
        where = f"system message ({message.role}) content"
        for block in content_blocks(message.content or "", where, keep_str=False):
            if not isinstance(block, Mapping) or block.get("type") != "text":
                raise InvalidArgumentError(f"{where}: Anthropic's system takes text blocks only")
            blocks.append(block)
    return blocks


def assistant_content(message: Message, where: str, *, dialect: str) -> str | list[Any]:
    """An assistant turn: its `dialect` reasoning parts, then text, then ``tool_use`` blocks.

    Plain text with nothing else stays a string; reasoning parts of another
    dialect are left out.
    """
    blocks: list[Any] = [
        {key: copy_json(value) for key, value in part.items() if key != "dialect"}
        for part in message.reasoning_parts or ()
        if part.get("dialect") == dialect and part.get("type") in _REASONING_BLOCKS
    ]
    calls = [
        _tool_use(call, f"{where}.tool_calls[{i}]")
        for i, call in enumerate(message.tool_calls or ())
    ]
    content = message.content
    if not blocks and not calls and content is not None:
        return content_blocks(content, f"{where}.content", keep_str=True)
    if content is not None:
        blocks += content_blocks(content, f"{where}.content", keep_str=False)
    return blocks + calls


def _tool_use(call: Any, where: str) -> dict[str, Any]:
    call = mapping_at(call, where)
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidArgumentError(f"{where}.id must be a non-empty str (the tool_use id)")
    function = call.get("function")
    if not isinstance(function, Mapping):
        raise InvalidArgumentError(f"{where}.function must be a mapping with name and arguments")
    name = name_at(function, f"{where}.function")
    arguments, _, undecodable = decode_arguments(function.get("arguments"))
    if undecodable:
        raise InvalidArgumentError(
            f"{where}.function.arguments must be a JSON object (tool_use input)"
        )
    return {"type": "tool_use", "id": call_id, "name": name, "input": copy_json(arguments)}


def tool_result(message: Message, where: str) -> dict[str, Any]:
    """A tool (or legacy function) result as a ``tool_result`` block.

    The message's extra keys (``is_error``, ``cache_control``) go on the block.
    """
    call_id = message.tool_call_id
    if not call_id:
        raise InvalidArgumentError(
            f"{where}.tool_call_id is missing: Anthropic matches a result to its tool_use by id"
        )
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    if message.content is not None:
        block["content"] = content_blocks(message.content, f"{where}.content", keep_str=True)
    if message.extra:
        block.update(copy_json(message.extra))
    return block
