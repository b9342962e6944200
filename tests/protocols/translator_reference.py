"""The stream translators as they were before their pre-encoded templates, for differential tests.

Each reference class is the translator with its per-delta methods put back as
they were: every delta event built as a dict and encoded whole by `_emit`
(`wire_json.encode_data`), and the common text chunk taken by `_choice` like
any other. What the templates replaced is all here; the rest (opening and
closing blocks and items, finishing, errors) is the translator's own code, which
the templates did not touch. Also: random OpenAI chunk sequences to run them on.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from llmchat.protocols.anthropic import AnthropicStream
from llmchat.protocols.ollama import OllamaStream
from llmchat.protocols.responses import ResponsesStream
from llmchat.protocols.responses_items import OutputItem
from llmchat.protocols.translator import StreamTranslator


class ReferenceAnthropic(AnthropicStream):
    def _texts(self, content: str, reasoning: str) -> bytes:
        return StreamTranslator._texts(self, content, reasoning)

    def _write_thinking(self, thinking: str) -> None:
        if self._open_kind != "thinking":
            self._open_block({"type": "thinking", "thinking": "", "signature": ""}, "thinking")
            self._thinking_hash = hashlib.sha256()
        self._thinking_hash.update(thinking.encode("utf-8", "surrogatepass"))
        self._emit(
            "content_block_delta",
            {"index": self._open_index, "delta": {"type": "thinking_delta", "thinking": thinking}},
        )

    def _write_text(self, text: str) -> None:
        if self._open_kind != "text":
            self._open_block({"type": "text", "text": ""}, "text")
        self._emit(
            "content_block_delta",
            {"index": self._open_index, "delta": {"type": "text_delta", "text": text}},
        )
        self._content_bytes += len(text.encode("utf-8"))

    def _send_arguments(self, tool: Any, arguments: str) -> None:
        self._emit(
            "content_block_delta",
            {
                "index": tool.block_index,
                "delta": {"type": "input_json_delta", "partial_json": arguments},
            },
        )
        tool.sent.append(arguments)


class ReferenceOllama(OllamaStream):
    def _texts(self, content: str, reasoning: str) -> bytes:
        return StreamTranslator._texts(self, content, reasoning)


class ReferenceResponses(ResponsesStream):
    def _texts(self, content: str, reasoning: str) -> bytes:
        return StreamTranslator._texts(self, content, reasoning)

    def _write(self, kind: str, text: str) -> None:
        item = self._item_of(kind)
        summary = kind == "reasoning" and self._shape.summary
        item.parts.append(text)
        if kind == "reasoning":
            self._emit("response.reasoning_text.delta", {**self._at(item, 0), "delta": text})
            if summary:
                fields = {**self._summary_at(item), "delta": text}
                self._emit("response.reasoning_summary_text.delta", fields)
        else:
            fields = {**self._at(item, 0), "delta": text, "logprobs": []}
            self._emit("response.output_text.delta", fields)

    def _send_arguments(self, item: OutputItem, arguments: str) -> None:
        item.parts.append(arguments)
        if self._shape.is_custom(item.name):
            return
        self._emit(
            "response.function_call_arguments.delta",
            {"item_id": item.id, "output_index": item.index, "delta": arguments},
        )


# -- random chunk sequences ------------------------------------------------------

TEXTS = (
    "Hello",
    " world",
    "",
    " café",
    "日本語",
    "🙂🚀",
    'say "hi"',
    "back\\slash",
    "line\nbreak\ttab\r",
    "\x00\x01\x1f\x7f",
    "\u2028\u2029",
    "</script>",
    "é" * 40,
    "{",
    "%d %s %b",
)
FINISHES = ("stop", "length", "tool_calls", "content_filter", None)


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(TEXTS) for _ in range(rng.randint(1, 3)))


def _tool_fragments(rng: random.Random, call: int) -> list[dict[str, Any]]:
    """One call's fragments: id and name first (sometimes late), arguments in pieces."""
    arguments = rng.choice(
        ['{"a": 1}', '{"q": "caf\\u00e9 \\"x\\""}', "{}", '{"k": [1, 2]}', "[1]"]
    )
    cut = rng.randint(0, len(arguments))
    pieces = [arguments[:cut], arguments[cut:]]
    head: dict[str, Any] = {"index": call, "id": f"call_{call}", "type": "function"}
    named = {"name": rng.choice(["get_weather", "search", "t"])}
    if rng.random() < 0.3:  # arguments before the name: they wait
        first = {**head, "function": {"arguments": pieces[0]}}
        rest = [{"index": call, "function": {**named, "arguments": pieces[1]}}]
        return [first, *rest]
    return [
        {**head, "function": {**named, "arguments": pieces[0]}},
        {"index": call, "function": {"arguments": pieces[1]}},
    ]


def chunk_sequence(rng: random.Random, *, tools: bool = True) -> list[Any]:
    """A random OpenAI chunk sequence: text, reasoning, both, tool calls, usage, models,
    ids, odd shapes, and a finish chunk (or none) at the end."""
    out: list[Any] = []
    ids = rng.random() < 0.7
    for _ in range(rng.randint(1, 14)):
        extra: dict[str, Any] = {}
        if ids:
            extra["id"] = "chatcmpl-" + rng.choice(["a", "b"])
        if rng.random() < 0.3:
            extra["model"] = rng.choice(["up-model", "other/model:7b", "mödel"])
        kind = rng.random()
        delta: dict[str, Any]
        if kind < 0.35:
            delta = {"content": _text(rng)}
        elif kind < 0.55:
            key = "reasoning_content" if rng.random() < 0.8 else "reasoning"
            delta = {key: _text(rng)}
        elif kind < 0.65:
            delta = {"content": _text(rng), "reasoning_content": _text(rng)}
        elif kind < 0.75 and tools:
            call = rng.randint(0, 1)
            for fragment in _tool_fragments(rng, call):
                out.append(
                    {**extra, "choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]}
                )
            continue
        elif kind < 0.82:
            usage = {"prompt_tokens": rng.randint(0, 50), "completion_tokens": rng.randint(0, 9)}
            if rng.random() < 0.5:
                usage["prompt_tokens_details"] = {"cached_tokens": rng.randint(0, 5)}
            out.append({**extra, "choices": [], "usage": usage})
            continue
        elif kind < 0.88:
            delta = rng.choice([{}, {"content": None}, {"content": 7}, {"role": "assistant"}])
        else:
            delta = {"content": _text(rng), "refusal": None}
        out.append({**extra, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    finish = rng.choice(FINISHES)
    if finish is not None:
        out.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return out
