"""Token counting: how many tokens a conversation costs, as the server will see it.

`TokenCounter` pairs a tokenizer with an optional prompt `Template`. The
tokenizer is either any callable ``str -> list[int]`` or a backend, in which
case the server's own tokenizer is asked (``POST /tokenize`` on llama.cpp,
``POST /api/extra/tokencount`` on KoboldCpp). Per-message counts are cached by
the message's exact wire JSON, so re-counting a growing conversation costs one
tokenizer call per new message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeAlias

from . import wire_json
from .errors import InvalidArgumentError, InvalidTypeError, LLMChatError
from .messages import Message, MessageLike, coerce_messages, content_text
from .templates import Template
from .urls import join_url, server_root

__all__ = ["ROLE_OVERHEAD", "TokenCounter", "Tokenize", "TokenizerError"]

Tokenize: TypeAlias = Callable[[str], Sequence[int]]
"""A tokenizer: text in, token ids out."""

ROLE_OVERHEAD: Final = 4
"""Tokens added per message when no template is given.

A rough stand-in for the role marker and separators most chat formats wrap
around a message (ChatML spends 4 to 5: ``<|im_start|>``, the role, a newline,
``<|im_end|>``, a newline). Give a template for exact per-message counts.
"""

TOKENIZE_TIMEOUT: Final = 30.0
"""Default bound, in seconds, on one server tokenizer round trip."""


class TokenizerError(LLMChatError):
    """The server's tokenizer failed or answered something unusable.

    Raised instead of returning a count that would be wrong; the message says
    which request failed and why.
    """


class TokenCounter:
    """Counts the tokens of messages, conversations and whole requests.

        counter = TokenCounter(backend, template=ChatML())
        counter.count_prompt(messages)   # exact: the full rendered prompt
        counter.count_conversation(messages)  # overhead + cached per-message counts

    `tokenize` is a callable ``str -> list[int]`` or an `OpenAICommon` backend
    (its server's tokenizer is used; one round trip per uncached text, bounded
    by `timeout` seconds; a failure raises `TokenizerError`). With a
    `template`, a message costs what it adds to the rendered prompt; without
    one, its text content plus `ROLE_OVERHEAD` (plus its tool calls' JSON).
    A wrong `tokenize` or `template` raises `TypeError` naming it.
    """

    def __init__(
        self,
        tokenize: Tokenize | Any,
        template: Template | None = None,
        *,
        timeout: float | None = TOKENIZE_TIMEOUT,
    ) -> None:
        # A backend is recognised by its `tokenize_route` class attribute, so this
        # module does not import backends/ (ARCHITECTURE: only retry, proxy and cli do).
        if isinstance(getattr(type(tokenize), "tokenize_route", None), tuple):
            self._tokenize: Tokenize = _server_tokenizer(tokenize, timeout)
        elif callable(tokenize):
            self._tokenize = tokenize
        else:
            raise InvalidTypeError(
                "TokenCounter: tokenize must be a callable str -> list[int] or a backend, "
                f"got {type(tokenize).__name__}"
            )
        if template is not None and not isinstance(template, Template):
            raise InvalidTypeError(
                f"TokenCounter: template must be a llmchat.templates.Template or None, "
                f"got {type(template).__name__}"
            )
        self.template = template
        self._cache: dict[bytes, int] = {}
        self._overhead: int | None = None

    def count_text(self, text: str) -> int:
        """Tokens in `text`; not cached (each call reaches the tokenizer)."""
        tokens = self._tokenize(text)
        if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
            raise TokenizerError(
                f"tokenize must return a list of token ids, got {type(tokens).__name__}"
            )
        return len(tokens)

    def template_overhead(self) -> int:
        """Tokens the template adds with no messages (e.g. the generation prompt); 0 without one.

        Computed once, as the count of ``template.render([], continuation=False)``.
        """
        if self.template is None:
            return 0
        if self._overhead is None:
            self._overhead = self.count_text(self.template.render([], continuation=False))
        return self._overhead

    def count_message(self, message: MessageLike) -> int:
        """Tokens one message adds; cached by its wire JSON.

        With a template: ``count(render([m])) - template_overhead()``; without:
        its text content, its tool calls' JSON, plus `ROLE_OVERHEAD`.
        """
        (m,) = coerce_messages([message])
        key = wire_json.encode(m.to_dict())
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._count_uncached(m)
        return cached

    def _count_uncached(self, m: Message) -> int:
        if self.template is not None:
            rendered = self.template.render([m], continuation=False)
            return max(0, self.count_text(rendered) - self.template_overhead())
        text = content_text(m.content)
        if m.tool_calls:
            text += wire_json.encode_str(m.tool_calls)
        return self.count_text(text) + ROLE_OVERHEAD

    def count_conversation(self, messages: Iterable[MessageLike]) -> int:
        """`template_overhead()` plus the sum of the per-message counts.

        An estimate when the template adds tokens that depend on neighbouring
        messages, or when tokens merge across message boundaries; use
        `count_prompt` for the exact count of the rendered prompt.
        """
        listed = coerce_messages(messages)
        return self.template_overhead() + sum(self.count_message(m) for m in listed)

    def count_prompt(self, messages: Iterable[MessageLike], continuation: bool = False) -> int:
        """Exact tokens of the full prompt the template renders; needs a template. Not cached."""
        if self.template is None:
            raise InvalidArgumentError(
                "count_prompt needs a template; pass TokenCounter(tokenize, template=...)"
            )
        return self.count_text(self.template.render(messages, continuation=continuation))

    def count_request(
        self, messages: Iterable[MessageLike], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        """`count_conversation(messages)` plus the tokens of the tools' JSON text, if any.

        Servers inject tool definitions in template-specific wording, so the
        tools part is an estimate of the same order, not an exact count.
        """
        total = self.count_conversation(messages)
        if tools:
            total += self.count_text(wire_json.encode_str(list(tools)))
        return total


def _server_tokenizer(backend: Any, timeout: float | None) -> Tokenize:
    """A tokenizer that asks `backend`'s server; raises `TokenizerError` on any failure."""
    path, field = backend.tokenize_route
    kobold = field == "prompt"  # KoboldCpp's tokencount answers "ids" and "value"

    def tokenize(text: str) -> list[int]:
        data = wire_json.encode({field: text})
        url = join_url(server_root(backend.api_url), path)  # a route at the server root
        # The backend's bounded side request (a shared internal, `probe.SideRequests`).
        payload, note = backend._request_json(
            "POST", url, data, label=f"POST {path}", limit=timeout
        )
        if note is not None:
            raise TokenizerError(f"the server's tokenizer failed: {note}")
        return _token_ids(payload, path, kobold)

    return tokenize


def _token_ids(payload: Mapping[str, Any], path: str, kobold: bool) -> list[int]:
    ids = payload.get("ids" if kobold else "tokens")
    if isinstance(ids, list) and all(_is_token(t) for t in ids):
        return ids
    if kobold and _is_token(payload.get("value")):
        return [0] * payload["value"]  # only the count is known
    wanted = '"ids" or "value"' if kobold else '"tokens"'
    raise TokenizerError(f"POST {path} answered no {wanted} list of token ids")


def _is_token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
