"""Inline think tags: a push stage that splits a model's reasoning from its answer.

Models that reason inline write ``<think>…</think>`` into the text they
stream (Qwen3, DeepSeek-R1, QwQ when the server does not parse it out).
`ThinkTagFilter.feed(text)` takes each piece of streamed text and returns
``(content, thinking)`` for it; `flush()` at the end returns what was held
back. The result is the same for any split of the text into pieces, a split
inside a tag included: only a tail that could be the start of the tag being
looked for is held back, and it is released as soon as it cannot be.

No I/O, no imports from the transport: the runner wires it after the
dialect's decoder, on content deltas only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = ["ThinkTagFilter", "ThinkTags"]


class ThinkTagFilter:
    """Splits streamed text into `(content, thinking)` at inline think tags.

    Rules, each the same for any split of the text into pieces:

    - Text between `open_tag` and `close_tag` is thinking; the tags
      themselves appear on neither side. Several think blocks all go to
      thinking. Inside a block an `open_tag` is plain thinking text (blocks do
      not nest); in the answer a `close_tag` with no block open is plain
      content (nothing is lost).
    - Newlines (CR and LF) right after a `close_tag` are dropped from content
      (models write ``</think>\\n\\n`` before the answer); only there:
      newlines anywhere else, and every character of the thinking, are kept.
    - Where the output starts is `starts_inside`. None (the default): the
      first tag decides. An `open_tag` first means the text before it was
      content; a `close_tag` first means all text so far was thinking
      (DeepSeek-R1 templates put ``<think>`` in the prompt, so the output
      begins inside the block and only its end is written). Until the first
      tag nothing is released, since either tag may still come: a model that
      never writes a tag has its whole answer released by `flush()`. Pass
      False when the output is known to start in the answer (content
      streams at once; a leading `close_tag` is then content), True when the
      prompt already opened the block (thinking streams at once).
    - At `flush()` held-back text goes to the side it is on; a block still
      open at the end was thinking to the end.

    `open_tag` and `close_tag` must be non-empty, different, and neither may
    contain the other (`InvalidArgumentError`, a `ValueError`, naming
    `think_tags` otherwise).
    """

    def __init__(
        self,
        open_tag: str = "<think>",
        close_tag: str = "</think>",
        *,
        starts_inside: bool | None = None,
    ) -> None:
        _check_tags(open_tag, close_tag)
        self._open_tag = open_tag
        self._close_tag = close_tag
        self._undecided = starts_inside is None  # no tag seen yet, and the start is unknown
        self._pending: list[str] = []  # undecided: every piece so far
        self._overlap = ""  # undecided: the last characters, where a tag may have begun
        self._thinking = bool(starts_inside)
        self._tag = close_tag if self._thinking else open_tag  # the tag looked for next
        self._held = ""  # decided: a tail that may be the start of `_tag`
        self._eat_newlines = False  # a close tag just passed: newlines leading content go

    def feed(self, text: str) -> tuple[str, str]:
        """Return `(content, thinking)` released by this piece of text.

        Either may be empty; a tail that may start a tag is kept for the next
        piece or `flush()`.
        """
        if self._held or self._undecided or self._eat_newlines or self._tag[0] in text:
            return self._scan(text)
        # The per-frame common case: no tag can start here, nothing pending.
        return ("", text) if self._thinking else (text, "")

    def flush(self) -> tuple[str, str]:
        """At the end of the text: `(content, thinking)` for whatever was held back.

        A tag cut off at the end is text of the side it was on. Flushing
        again returns ``("", "")``.
        """
        content: list[str] = []
        thinking: list[str] = []
        if self._undecided:  # no tag ever came: it was all answer
            self._undecided = False
            content += self._pending
            self._pending = []
        held, self._held = self._held, ""
        self._put(held, content, thinking)
        return "".join(content), "".join(thinking)

    def _scan(self, text: str) -> tuple[str, str]:
        content: list[str] = []
        thinking: list[str] = []
        if self._undecided:
            text = self._decide(text, content, thinking)
            if self._undecided:
                return "", ""
        text = self._held + text
        pos = 0
        while (found := text.find(self._tag, pos)) >= 0:
            self._put(text[pos:found], content, thinking)
            pos = found + len(self._tag)
            self._switch()
        keep = _prefix_overlap(text, pos, self._tag)
        self._put(text[pos : len(text) - keep], content, thinking)
        self._held = text[len(text) - keep :]
        return "".join(content), "".join(thinking)

    def _decide(self, text: str, content: list[str], thinking: list[str]) -> str:
        """Undecided: look for either tag; on the first, release what came before it.

        Returns the text after that tag (for the decided scan), or ``""``
        while no tag has come (the piece is kept).
        """
        window = self._overlap + text
        opened = window.find(self._open_tag)
        closed = window.find(self._close_tag)
        if opened < 0 and closed < 0:
            self._pending.append(text)
            keep = max(len(self._open_tag), len(self._close_tag)) - 1
            self._overlap = window[max(len(window) - keep, 0) :]
            return ""
        self._pending.append(text)
        whole = "".join(self._pending)
        self._pending = []
        self._overlap = ""
        self._undecided = False
        offset = len(whole) - len(window)
        if closed < 0 or 0 <= opened < closed:  # the output began in the answer
            content.append(whole[: offset + opened])
            self._thinking = True
            self._tag = self._close_tag
            return whole[offset + opened + len(self._open_tag) :]
        thinking.append(whole[: offset + closed])  # it began inside a think block
        self._thinking = False
        self._tag = self._open_tag
        self._eat_newlines = True
        return whole[offset + closed + len(self._close_tag) :]

    def _switch(self) -> None:
        """A tag was passed: the other side now, looking for the other tag."""
        self._thinking = not self._thinking
        self._tag = self._close_tag if self._thinking else self._open_tag
        self._eat_newlines = not self._thinking

    def _put(self, text: str, content: list[str], thinking: list[str]) -> None:
        if self._thinking:
            thinking.append(text)
            return
        if self._eat_newlines and text:
            text = text.lstrip("\r\n")
            self._eat_newlines = not text
        content.append(text)


def _prefix_overlap(text: str, start: int, tag: str) -> int:
    """Length of the longest tail of `text[start:]` that is a proper prefix of `tag`."""
    first = len(text) - len(tag) + 1
    at = text.find(tag[0], max(start, first))
    while at >= 0:
        if tag.startswith(text[at:]):
            return len(text) - at
        at = text.find(tag[0], at + 1)
    return 0


def _check_tags(open_tag: str, close_tag: str) -> None:
    """Raise `InvalidArgumentError` unless the two tags can be told apart in any text."""
    for name, tag in (("open_tag", open_tag), ("close_tag", close_tag)):
        if not isinstance(tag, str) or not tag:
            raise InvalidArgumentError(f"think_tags: {name} must be a non-empty str, got {tag!r}")
    if open_tag == close_tag:
        raise InvalidArgumentError(
            f"think_tags: open_tag and close_tag are both {open_tag!r}; give two different tags"
        )
    if open_tag in close_tag or close_tag in open_tag:
        raise InvalidArgumentError(
            f"think_tags: one of {open_tag!r} and {close_tag!r} contains the other;"
            " a tag must not be part of the other tag"
        )


@dataclass(frozen=True, slots=True)
class ThinkTags:
    """A backend's `think_tags` setting: which tags, and where the output starts.

    `starts_inside=False` (the default) streams content at once, for models
    that write ``<think>`` themselves (Qwen3, QwQ); True when the prompt
    already opened the block (DeepSeek-R1 templates); None lets the first
    tag decide (nothing streams until a tag or the end).
    """

    open_tag: str = "<think>"
    close_tag: str = "</think>"
    starts_inside: bool | None = False

    def __post_init__(self) -> None:
        _check_tags(self.open_tag, self.close_tag)
        if self.starts_inside is not None and not isinstance(self.starts_inside, bool):
            raise InvalidTypeError(
                f"think_tags: starts_inside must be a bool or None, got {self.starts_inside!r}"
            )

    def new_filter(self) -> ThinkTagFilter:
        """A fresh filter for one completion."""
        return ThinkTagFilter(self.open_tag, self.close_tag, starts_inside=self.starts_inside)

    @classmethod
    def of(cls, value: Any) -> ThinkTags | None:
        """A backend's `think_tags` argument as a ThinkTags, or None when off.

        Takes False/None (off), True (``<think>``/``</think>``), a
        ``(open, close)`` pair, or a ThinkTags; anything else raises a
        `TypeError` naming `think_tags`.
        """
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, ThinkTags):
            return value
        if isinstance(value, tuple) and len(value) == 2:
            return cls(value[0], value[1])
        raise InvalidTypeError(
            "think_tags must be a bool, an (open, close) pair of strings or a ThinkTags, "
            f"got {type(value).__name__}"
        )
