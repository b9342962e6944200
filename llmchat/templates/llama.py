"""Meta Llama 3.x and Llama 4 prompt formats."""

from __future__ import annotations

from typing import ClassVar

from ..messages import Message
from ._util import close_turns, text_of
from .base import Template

__all__ = ["Llama3", "Llama4"]


def _role(message: Message) -> str:
    # Llama's templates name tool results "ipython".
    return "ipython" if message.role in ("tool", "function") else message.role


class Llama3(Template):
    """Llama 3 / 3.1 / 3.3 Instruct: ``<|start_header_id|>role<|end_header_id|>\\n\\n…<|eot_id|>``.

    Contents are trimmed, as Meta's templates do. The prompt starts with
    `bos_token` (``<|begin_of_text|>``, as Hugging Face's ``apply_chat_template``
    renders it; pass ``bos_token=""`` when the server adds BOS itself).

    With ``date_string=None`` (default) this is the Llama 3 (3.0) template and
    llama.cpp's built-in ``llama3``: a system message only when one is given.
    With a `date_string` (the 3.1/3.3 templates use ``"26 Jul 2024"`` unless
    told otherwise) it is the Llama 3.1/3.3 template without tools: a system
    turn is always rendered, starting ``Cutting Knowledge Date: December 2023``
    and ``Today Date: <date_string>``, then the (trimmed) first system message.
    """

    name: ClassVar[str] = "llama3"

    def __init__(self, bos_token: str = "<|begin_of_text|>", date_string: str | None = None):
        self.bos_token = bos_token
        self.date_string = date_string

    def render_messages(self, messages: list[Message], continuation: bool) -> str:
        turns: list[tuple[str, str]] = []
        rest = messages
        if self.date_string is not None:
            system = ""
            if messages and messages[0].role == "system":
                system = text_of(messages[0], trim=True)
                rest = messages[1:]
            preamble = f"Cutting Knowledge Date: December 2023\nToday Date: {self.date_string}\n\n"
            turns.append(
                (f"<|start_header_id|>system<|end_header_id|>\n\n{preamble}{system}", "<|eot_id|>")
            )
        for m in rest:
            head = f"<|start_header_id|>{_role(m)}<|end_header_id|>\n\n"
            turns.append((head + text_of(m, trim=True), "<|eot_id|>"))
        gen = "<|start_header_id|>assistant<|end_header_id|>\n\n"
        return self.bos_token + close_turns(turns, gen, continuation)


class Llama4(Template):
    """Llama 4 Instruct: ``<|header_start|>role<|header_end|>\\n\\n…<|eot|>``.

    As Meta's Llama 4 template (without tools): the prompt starts with
    `bos_token` (``<|begin_of_text|>``), a leading system message is trimmed
    and rendered first, other contents are rendered as they are (not trimmed).
    """

    name: ClassVar[str] = "llama4"

    def __init__(self, bos_token: str = "<|begin_of_text|>"):
        self.bos_token = bos_token

    def render_messages(self, messages: list[Message], continuation: bool) -> str:
        turns: list[tuple[str, str]] = []
        for i, m in enumerate(messages):
            head = f"<|header_start|>{_role(m)}<|header_end|>\n\n"
            turns.append((head + text_of(m, trim=i == 0 and m.role == "system"), "<|eot|>"))
        gen = "<|header_start|>assistant<|header_end|>\n\n"
        return self.bos_token + close_turns(turns, gen, continuation)
