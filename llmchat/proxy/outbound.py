"""What leaves the proxy for a client: never the upstream's key, always writable as UTF-8.

An upstream may echo its own API key (in ``model``, an id, the text, the
reasoning or a tool call) and may send text UTF-8 cannot carry (a lone
surrogate from a ``\\ud800`` escape). Neither may reach a client, whatever the
face. Everything a face writes passes one of two doors, and both clean:

- a whole JSON body (`client_json`, what `ClientExchange.json` writes: answers,
  errors, metadata) is encoded, and only when the bytes show a form of a key or
  the text a lone surrogate is every string in it cleaned and the body encoded
  again, so its Content-Length is the cleaned body's;
- a streamed answer is written by its face's translator wrapped in
  `CleanStream`, which cleans each decoded chunk *before* translation: the text
  and reasoning deltas through a `TextScrubber` each (a key split across two
  deltas is still caught; only a tail that could begin a form is held back,
  until the next delta shows it is none, and at most one form's length), every
  other string whole. Any failure of the translator becomes the face's own error
  event (``response.failed``, Anthropic's ``error``, Ollama's error line),
  never a cut.

Cleaning replaces each form of a key with ``[redacted]`` and each lone
surrogate with U+FFFD. Without a key and without surrogates it costs one scan
per string.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from .. import fastjson, wire_json
from ..protocols.translator import MALFORMED
from ..redact import Redactor

__all__ = ["CleanStream", "Cleaner", "client_json", "utf8_safe", "utf8_size"]

log = logging.getLogger("llmchat.proxy")

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE: Final = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SCALARS: Final = frozenset({int, float, bool, type(None)})
_MEMO_LENGTH: Final = 200
_MEMO_SIZE: Final = 64


def utf8_safe(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (a surrogate pair is joined)."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def utf8_size(text: str) -> int:
    """The UTF-8 length of `text`, for counting; a lone surrogate counts as its 3 bytes."""
    return len(text.encode("utf-8", "surrogatepass"))


class Cleaner:
    """Cleans strings bound for a client: `redactor`'s forms out, lone surrogates replaced."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._seen: dict[str, str] = {}
        """Short strings already cleaned: a stream repeats its keys, model and id."""

    def text(self, text: str) -> str:
        """`text` cleaned."""
        out = self._seen.get(text)
        if out is not None:
            return out
        out = utf8_safe(self.redactor.text(text)) if self.redactor else utf8_safe(text)
        if len(text) <= _MEMO_LENGTH:
            if len(self._seen) >= _MEMO_SIZE:
                self._seen.clear()
            self._seen[text] = out
        return out

    def tree(self, value: Any) -> Any:
        """`value` (decoded JSON) with every string, keys included, cleaned; a new tree."""
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind in _SCALARS:
            return value
        if kind is dict or isinstance(value, Mapping):
            return {self.tree(k): self.tree(v) for k, v in value.items()}
        if kind is list or isinstance(value, tuple):
            return [self.tree(v) for v in value]
        return self.text(value) if isinstance(value, str) else value


def client_json(obj: Any, redactor: Redactor) -> bytes:
    """`obj` as the JSON bytes a client gets: `wire_json.encode_data`'s, cleaned.

    Raises only for what is no string's fault (NaN, a type JSON cannot carry).
    """
    try:
        data = wire_json.encode_data(obj)
    except ValueError:  # a lone surrogate (or NaN, which cleaning leaves, and it raises again)
        return wire_json.encode_data(Cleaner(redactor).tree(obj))
    if redactor.found_in(data):
        return wire_json.encode_data(Cleaner(redactor).tree(obj))
    return data


class CleanStream:
    """A face's stream translator whose every input is cleaned and whose failures stay in band.

    Takes and gives what the translator does (`start`, `delta`, `finish`,
    `error_event`, and the rest passed through).
    """

    def __init__(self, translator: Any, redactor: Redactor) -> None:
        self._inner = translator
        self._cleaner = Cleaner(redactor)
        self._reasoning = redactor.text_stream()
        self._content = redactor.text_stream()
        self._windows = {"reasoning_content": self._reasoning, "content": self._content}
        self._scrubbing = bool(redactor)
        self._broken = False
        self.content_type: str = translator.content_type
        # Models and ids cleaned, and what they became: a stream repeats the same few.
        self._memo: dict[str, str] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def errored(self) -> bool:
        return self._broken or bool(self._inner.errored)

    def start(self) -> bytes:
        return self._guard(self._inner.start)

    def delta(self, chunk: Any) -> bytes:
        return self._guard(lambda: self._delta(chunk))

    def text_delta(
        self,
        content: str,
        reasoning: str = "",
        model: str | None = None,
        chunk_id: str | None = None,
    ) -> bytes:
        """`delta` of the common chunk given as its parts (see `StreamTranslator.text_delta`):
        the same bytes, cleaned the same way, without building and copying the chunk."""
        try:
            memo = self._memo
            if model is not None:
                model = memo.get(model) or self._remember(model)
            if chunk_id is not None:
                chunk_id = memo.get(chunk_id) or self._remember(chunk_id)
            if not content and not reasoning:
                return bytes(self._inner.text_delta("", "", model, chunk_id))
            if content and not content.isascii():
                content = utf8_safe(content)
            if reasoning and not reasoning.isascii():
                reasoning = utf8_safe(reasoning)
            if not self._scrubbing:  # no key: the windows would pass everything, hold nothing
                return bytes(self._inner.text_delta(content, reasoning, model, chunk_id))
            return self._scrubbed_text_delta(content, reasoning, model, chunk_id)
        except Exception as exc:
            return self._failed(exc)

    def finish(self, *args: Any, **kwargs: Any) -> bytes:
        def finish() -> bytes:
            return self._flush(None, None) + bytes(self._inner.finish(*args, **kwargs))

        return self._guard(finish)

    def error_event(self, status: int, message: str) -> bytes:
        # A held tail is dropped: the answer failed, and it was no whole key.
        return self._guard(lambda: self._inner.error_event(status, utf8_safe(message)))

    # -- inside ---------------------------------------------------------------

    def _guard(self, build: Callable[[], bytes]) -> bytes:
        """`build()`; if the translator raises, the face's error event instead of a cut."""
        try:
            return build()
        except Exception as exc:
            return self._failed(exc)

    def _failed(self, exc: Exception) -> bytes:
        """The face's error event for an event that raised `exc`; ``b""`` if that fails too."""
        log.warning("a stream's event could not be written (%s)", type(exc).__name__)
        try:
            return bytes(self._inner.error_event(502, MALFORMED))
        except Exception as again:
            log.error("a stream's error event could not be written (%s)", type(again).__name__)
            self._broken = True
            return b""

    def _delta(self, chunk: Any) -> bytes:
        """Clean one decoded chunk (`openai_chunk`'s shape) on copies, then translate it.

        The members that shape has are cleaned one by one (the per-token path);
        anything else is cleaned as a whole tree.
        """
        if type(chunk) is not dict:
            return bytes(self._inner.delta(self._cleaner.tree(chunk)))
        text, tree = self._cleaner.text, self._cleaner.tree
        chunk = dict(chunk)
        for key, value in chunk.items():
            if type(value) is str:
                chunk[key] = text(value)
            elif key != "choices" and key != "usage":
                chunk[key] = tree(value)  # usage is numbers: the translators read only those
        choices = chunk.get("choices")
        choice = choices[0] if type(choices) is list and choices else None
        delta = choice.get("delta") if type(choice) is dict else None
        if choice is None or type(delta) is not dict:
            chunk["choices"] = tree(choices)
            return bytes(self._inner.delta(chunk))
        choice, delta = dict(choice), dict(delta)
        reason = choice.get("finish_reason")
        if type(reason) is str:
            choice["finish_reason"] = text(reason)
        final = reason is not None
        says = False
        for key, value in delta.items():
            says = says or bool(value)
            window = self._windows.get(key)
            if key == "tool_calls":
                delta[key] = self._calls(value)
            elif window is None:
                delta[key] = tree(value)
            elif type(value) is str and value:
                piece = window.feed(utf8_safe(value))
                delta[key] = piece + window.flush() if final else piece
        out = b""
        for name, window in self._windows.items():
            # A tail held for one field goes out, before this chunk, once another
            # field speaks or the answer ends: it was no key's start after all.
            if window.holding and (final or says) and not delta.get(name):
                out += self._flush(chunk, name)
        choice["delta"] = delta
        chunk["choices"] = [choice, *tree(choices[1:])] if len(choices) > 1 else [choice]
        return out + bytes(self._inner.delta(chunk))

    def _remember(self, text: str) -> str:
        """`text` cleaned, kept in `_memo` (at most `_MEMO_SIZE` of them)."""
        if len(self._memo) >= _MEMO_SIZE:
            self._memo.clear()
        cleaned = self._memo[text] = self._cleaner.text(text)
        return cleaned

    def _scrubbed_text_delta(
        self, content: str, reasoning: str, model: str | None, chunk_id: str | None
    ) -> bytes:
        """`text_delta`'s parts through the key windows, as `_delta` feeds them."""
        if content:
            content = self._content.feed(content)
        if reasoning:
            reasoning = self._reasoning.feed(reasoning)
        out = b""
        # As `_delta`: a tail held for one field goes out, before this chunk, once
        # another field speaks: it was no key's start after all.
        if not reasoning and self._reasoning.holding:
            out += self._flush(self._head(model, chunk_id), "reasoning_content")
        if not content and self._content.holding:
            out += self._flush(self._head(model, chunk_id), "content")
        return out + bytes(self._inner.text_delta(content, reasoning, model, chunk_id))

    @staticmethod
    def _head(model: str | None, chunk_id: str | None) -> dict[str, Any]:
        head = {} if chunk_id is None else {"id": chunk_id}
        if model is not None:
            head["model"] = model
        return head

    def _calls(self, calls: Any) -> Any:
        """Tool-call fragments cleaned; arguments are JSON text, and a lone surrogate escaped
        in them is replaced too (a face that sends them as an object parses them)."""
        cleaned = self._cleaner.tree(calls)
        for call in cleaned if type(cleaned) is list else ():
            function = call.get("function") if type(call) is dict else None
            arguments = function.get("arguments") if type(function) is dict else None
            if function is None or type(arguments) is not str:
                continue
            if _ESCAPED_SURROGATE.search(arguments):
                try:
                    decoded = fastjson.loads(arguments)
                except ValueError:
                    continue  # not JSON: the face's own rule refuses it
                function["arguments"] = client_json(decoded, self._cleaner.redactor).decode()
        return cleaned

    def _flush(self, chunk: Mapping[str, Any] | None, only: str | None) -> bytes:
        """What a field's held tail becomes, as a delta of its own (every field's for None)."""
        out = b""
        for name, window in self._windows.items():
            if (only is None or name == only) and window.holding:
                delta = {name: window.flush()}
                head = {k: chunk[k] for k in ("id", "model") if chunk is not None and k in chunk}
                flushed = {
                    **self._cleaner.tree(head),
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                }
                out += bytes(self._inner.delta(flushed))
        return out
