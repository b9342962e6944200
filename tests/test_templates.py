"""Prompt templates: ChatML."""

from __future__ import annotations

import copy

from llmchat.templates import ChatML

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hel"},
]


def test_chatml_adds_the_generation_prompt() -> None:
    assert ChatML().render(MESSAGES[:2]) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_chatml_continuation_leaves_the_last_message_open() -> None:
    prompt = ChatML().render(MESSAGES, continuation=True)
    assert prompt.endswith("<|im_start|>assistant\nHel")


def test_render_does_not_touch_its_input() -> None:
    given = copy.deepcopy(MESSAGES)
    ChatML().render(given, continuation=True)
    assert given == MESSAGES
