"""Chat messages and their normalization for strict chat templates.

`Message` is one OpenAI-shaped chat message. Every llmchat call that takes
messages accepts `Message` objects and plain dicts, mixed (`MessageLike`).

`normalize_messages` reshapes a conversation into the form strict chat
templates accept (an optional system message, then user and assistant turns
alternating), without reordering anything or dropping text. It is pure: the
caller's list and messages are never modified, and the same input always
gives the same output. See the spec's MESSAGE NORMALIZATION for the rules.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias, cast

from .errors import InvalidArgumentError, InvalidMessageError, InvalidTypeError, LLMChatError

__all__ = [
    "ROLES",
    "Message",
    "MessageLike",
    "coerce_messages",
    "content_text",
    "normalize_messages",
]

ROLES: Final = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
"""Roles a `Message` may carry (``function`` is OpenAI's legacy tool-result role)."""

_KNOWN_KEYS: Final = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_parts")
_PLAIN_ROLES: Final = frozenset({"system", "user", "assistant"})
_TOOL_RESULT_ROLES: Final = frozenset({"tool", "function"})

NormalizationMode: TypeAlias = Literal["none", "alternate-roles"]
SystemMessageMode: TypeAlias = Literal["as-is", "leading"]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message, as OpenAI's chat API shapes it.

    Build it directly, or from a dict with `Message.from_dict`. Keys llmchat
    does not know are kept in `extra` and go back on the wire unchanged.
    Construction validates: an unknown role, or a content that is neither a
    string, a list of parts nor None, raises `InvalidMessageError` (both a
    `ValueError` and a `TypeError`) naming the field.
    """

    role: str
    """``system``, ``developer``, ``user``, ``assistant``, ``tool`` or ``function``."""
    content: str | list[Any] | None = None
    """Text, a list of content parts (images, audio …), or None (no content)."""
    tool_calls: list[dict[str, Any]] | None = None
    """OpenAI-shaped tool calls of an assistant turn; None when it made none."""
    tool_call_id: str | None = None
    """For a tool result: the id of the call it answers; None otherwise."""
    name: str | None = None
    """Optional participant name; None when not given."""
    extra: dict[str, Any] | None = field(default=None)
    """Any other keys of the message, sent as they are; None when there are none."""
    reasoning_parts: list[dict[str, Any]] | None = None
    """An assistant turn's opaque reasoning parts, each tagged with its ``dialect``
    (an Anthropic thinking block with its signature, a Gemini thought signature).
    The dialect that made them sends them back; every other dialect leaves them
    out. None when there are none."""

    def __post_init__(self) -> None:
        _validate(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build a Message from an OpenAI-shaped dict; unknown keys go to `extra`.

        The dict is copied deeply, so later changes to it do not reach the Message.
        """
        if not isinstance(data, Mapping):
            raise InvalidMessageError(
                f"Message.from_dict expects a mapping, got {type(data).__name__}"
            )
        if "role" not in data:
            raise InvalidMessageError("Message.role is missing; every message needs a role")
        extra = {key: value for key, value in data.items() if key not in _KNOWN_KEYS}
        return cls(
            role=data["role"],
            content=_copied(data.get("content")),
            tool_calls=_copied(data.get("tool_calls")),
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            extra=copy.deepcopy(extra) if extra else None,
            reasoning_parts=_copied(data.get("reasoning_parts")),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the message as a new OpenAI-shaped dict.

        ``role`` and ``content`` (``None`` as ``null``) are always present;
        `tool_calls`, `tool_call_id` and `name` only when set; `extra` keys,
        then `reasoning_parts` (when set, so a saved conversation keeps them)
        last. The OpenAI chat body leaves `reasoning_parts` out. Containers are
        copied, so the dict can be changed freely.
        """
        out: dict[str, Any] = {"role": self.role, "content": _copied(self.content)}
        if self.tool_calls is not None:
            out["tool_calls"] = copy.deepcopy(self.tool_calls)
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        if self.extra:
            out.update(copy.deepcopy(self.extra))
        if self.reasoning_parts:
            out["reasoning_parts"] = copy.deepcopy(self.reasoning_parts)
        return out

    @property
    def is_plain(self) -> bool:
        """True for a user, assistant or system message made of role and text only.

        Only plain messages take part in normalization; every other message
        passes through it untouched.
        """
        return (
            self.role in _PLAIN_ROLES
            and type(self.content) is str
            and self.tool_calls is None
            and self.tool_call_id is None
            and self.name is None
            and not self.extra
            and not self.reasoning_parts
        )


MessageLike: TypeAlias = Message | Mapping[str, Any]
"""What every llmchat call accepts as a message: a `Message` or an OpenAI-shaped dict."""


def _copied(value: Any) -> Any:
    return copy.deepcopy(value) if isinstance(value, (list, dict)) else value


def _validate(message: Message) -> None:
    role = message.role
    if not isinstance(role, str):
        raise InvalidMessageError(f"Message.role must be a str, got {type(role).__name__}")
    if role not in ROLES:
        raise InvalidMessageError(
            f"Message.role {role!r} is not a chat role; use one of {', '.join(sorted(ROLES))}"
        )
    content = message.content
    if content is not None and not isinstance(content, (str, list)):
        raise InvalidMessageError(
            f"Message.content must be a str, a list of content parts or None, "
            f"got {type(content).__name__}"
        )
    if message.tool_calls is not None and not isinstance(message.tool_calls, list):
        raise InvalidMessageError(
            f"Message.tool_calls must be a list or None, got {type(message.tool_calls).__name__}"
        )
    for name in ("tool_call_id", "name"):
        value = getattr(message, name)
        if value is not None and not isinstance(value, str):
            raise InvalidMessageError(
                f"Message.{name} must be a str or None, got {type(value).__name__}"
            )
    extra = message.extra
    if extra is not None:
        if not isinstance(extra, dict):
            raise InvalidMessageError(
                f"Message.extra must be a dict or None, got {type(extra).__name__}"
            )
        clash = [key for key in _KNOWN_KEYS if key in extra]
        if clash:
            raise InvalidMessageError(
                f"Message.extra must not hold {clash[0]!r}; pass it as the field of that name"
            )
    parts = message.reasoning_parts
    if parts is not None and (
        not isinstance(parts, list) or not all(isinstance(part, dict) for part in parts)
    ):
        raise InvalidMessageError(
            f"Message.reasoning_parts must be a list of dicts or None, got {type(parts).__name__}"
        )


def coerce_messages(messages: Iterable[MessageLike]) -> list[Message]:
    """Return `messages` as a new list of `Message`, validating each one.

    Dicts are converted with `Message.from_dict`; Message objects are taken as
    they are. A bad message raises `ValueError`/`TypeError` naming its index
    and field, e.g. ``messages[3]: Message.content must be …``.
    """
    if isinstance(messages, (str, bytes, Mapping, Message)):
        raise InvalidTypeError(
            f"messages must be a list of messages, got a single {type(messages).__name__}"
        )
    out: list[Message] = []
    for index, item in enumerate(messages):
        if isinstance(item, Message):
            out.append(item)
            continue
        try:
            out.append(Message.from_dict(item))
        except LLMChatError as exc:
            raise type(exc)(f"messages[{index}]: {exc}") from None
    return out


def normalize_messages(
    messages: Iterable[MessageLike],
    *,
    mode: NormalizationMode = "alternate-roles",
    folded_system_marker: str = "[System message]\n",
    tool_result_acknowledgement: str = "Understood.",
    system_message_mode: SystemMessageMode = "as-is",
) -> list[Message]:
    """Return the conversation reshaped for strict chat templates, as new Messages.

    With ``mode="alternate-roles"``: adjacent plain messages of one role merge
    (joined by a blank line; empty ones add nothing); the leading system block
    merges into one message; a later system message becomes user text behind
    `folded_system_marker` and merges with the user text next to it; empty
    system messages are dropped; a user turn right after tool results gets an
    assistant `tool_result_acknowledgement` in front (``""`` inserts none).
    Non-plain messages (tool calls, tool results, extra keys, list content)
    pass through unchanged and are never merged into or across.

    With ``mode="none"`` the messages come back as given. In either mode
    ``system_message_mode="leading"`` first moves every system message, in
    order, to the front.

    Pure and deterministic; in ``"as-is"`` mode also prefix-stable: appending
    messages never changes an earlier output message except the last, whose
    content only grows.

        >>> [m.content for m in normalize_messages(
        ...     [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])]
        ['a\\n\\nb']
    """
    _check_options(mode, folded_system_marker, tool_result_acknowledgement, system_message_mode)
    items = coerce_messages(messages)
    if system_message_mode == "leading":
        items = [m for m in items if m.role == "system"] + [m for m in items if m.role != "system"]
    if mode == "none":
        return [_clone(m) for m in items]
    merged = _merge_turns(items, folded_system_marker)
    if tool_result_acknowledgement:
        return _acknowledge_tool_results(merged, tool_result_acknowledgement)
    return merged


def _check_options(mode: Any, marker: Any, acknowledgement: Any, system_mode: Any) -> None:
    if mode not in ("none", "alternate-roles"):
        raise InvalidArgumentError(f"mode must be 'none' or 'alternate-roles', got {mode!r}")
    if system_mode not in ("as-is", "leading"):
        raise InvalidArgumentError(
            f"system_message_mode must be 'as-is' or 'leading', got {system_mode!r}"
        )
    if not isinstance(marker, str):
        raise InvalidTypeError(
            f"folded_system_marker must be a str ('' for none), got {type(marker).__name__}"
        )
    if acknowledgement is None:
        raise InvalidArgumentError(
            "tool_result_acknowledgement must be a str; use '' to insert no acknowledgement"
        )
    if not isinstance(acknowledgement, str):
        raise InvalidTypeError(
            f"tool_result_acknowledgement must be a str, got {type(acknowledgement).__name__}"
        )


def _clone(message: Message) -> Message:
    """A copy that shares no container with `message`, so callers may change it freely."""
    if message.is_plain:
        return message  # frozen and made of strings: sharing it is safe
    return Message.from_dict(message.to_dict())


def _merge_turns(items: list[Message], marker: str) -> list[Message]:
    """Fold mid-conversation system messages into user text and merge same-role runs."""
    out: list[Message] = []
    run_role: str | None = None
    run_texts: list[str] = []

    def close_run() -> None:
        if run_role is not None:
            out.append(Message(run_role, "\n\n".join(text for text in run_texts if text)))

    in_leading_block = True
    for message in items:
        if message.role != "system":
            in_leading_block = False
        if not message.is_plain:
            close_run()
            run_role, run_texts = None, []
            out.append(_clone(message))
            continue
        role, text = message.role, cast(str, message.content)  # is_plain: a str
        if role == "system":
            if not text:
                continue  # an empty system message carries nothing; it would fold to a bare marker
            if not in_leading_block:
                role, text = "user", marker + text
        if role == run_role:
            run_texts.append(text)
        else:
            close_run()
            run_role, run_texts = role, [text]
    close_run()
    return out


def _acknowledge_tool_results(items: list[Message], acknowledgement: str) -> list[Message]:
    """Put one assistant `acknowledgement` between tool results and a user turn after them."""
    out: list[Message] = []
    for message in items:
        if message.role == "user" and out and out[-1].role in _TOOL_RESULT_ROLES:
            out.append(Message("assistant", acknowledgement))
        out.append(message)
    return out


def content_text(content: Any) -> str:
    """Content as text: a string as it is, or the text parts of a list joined; else ``""``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, Mapping)
            and part.get("type") in (None, "text", "output_text")
            and isinstance(part.get("text"), str)
        )
    return ""
