"""Mistral v7 ("tekken", Mistral Small 3.x, Devstral) prompt format."""

from __future__ import annotations

from typing import ClassVar

from ..messages import Message
from ._util import close_turns, text_of
from .base import Template

__all__ = ["MistralV7"]


class MistralV7(Template):
    """Mistral v7: ``[SYSTEM_PROMPT]…[/SYSTEM_PROMPT][INST]…[/INST]answer</s>``.

    As Mistral Small 3.1/3.2's and Devstral's templates render it (no spaces
    around the tags, contents not trimmed). The prompt starts with `bos_token`
    (``<s>``); assistant turns end with `eos_token` (``</s>``). There is no
    generation prompt: the model answers right after ``[/INST]``.

    The real templates put their own long default system prompt (with today's
    date) when the conversation has none; pass it as `default_system` to get
    the same, else no ``[SYSTEM_PROMPT]`` is rendered without a system message.
    Tool results render as ``[TOOL_RESULTS]…[/TOOL_RESULTS]``.
    """

    name: ClassVar[str] = "mistral-v7"

    def __init__(
        self, bos_token: str = "<s>", eos_token: str = "</s>", default_system: str | None = None
    ):
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.default_system = default_system

    def render_messages(self, messages: list[Message], continuation: bool) -> str:
        turns: list[tuple[str, str]] = []
        if self.default_system is not None and not (messages and messages[0].role == "system"):
            turns.append(("[SYSTEM_PROMPT]" + self.default_system, "[/SYSTEM_PROMPT]"))
        for m in messages:
            text = text_of(m, trim=False)
            if m.role in ("system", "developer"):
                turns.append(("[SYSTEM_PROMPT]" + text, "[/SYSTEM_PROMPT]"))
            elif m.role == "assistant":
                turns.append((text, self.eos_token))
            elif m.role in ("tool", "function"):
                turns.append(("[TOOL_RESULTS]" + text, "[/TOOL_RESULTS]"))
            else:
                turns.append(("[INST]" + text, "[/INST]"))
        return self.bos_token + close_turns(turns, "", continuation)
