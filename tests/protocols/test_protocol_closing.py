"""Every stream translator ends in its own error event when its closing bytes cannot be written."""

from __future__ import annotations

import json

from llmchat.protocols.anthropic import AnthropicStream
from llmchat.protocols.ollama import OllamaStream
from llmchat.protocols.translator import CLOSE_FAILED

# A model name UTF-8 cannot carry: the closing line or event that names it cannot be encoded.
UNWRITABLE = "m\ud800"


def test_ollama_closes_with_its_error_line() -> None:
    stream = OllamaStream(UNWRITABLE)
    assert json.loads(stream.finish()) == {"error": CLOSE_FAILED}
    assert stream.errored
    assert stream.finish() == b""  # ended: nothing more


def test_anthropic_closes_with_its_error_event() -> None:
    stream = AnthropicStream(UNWRITABLE)
    data = stream.finish()
    event, payload = data.decode().strip().split("\n")
    assert event == "event: error"
    assert json.loads(payload.removeprefix("data: "))["error"]["message"] == CLOSE_FAILED
    assert stream.errored and stream.finish() == b"" and stream.ping() == b""
