"""What a proxied upstream Response becomes for each face's client.

An `Answer` knows one face's two shapes: the stream translator that rewrites
the upstream's chunks as they arrive, and the whole body a non-streaming
client gets once the Response has settled. This is the base every face's
answer shares (each face's own is its ``answer`` module: the pure body
builders live beside it); here a live `Response` meets them.
"""

from __future__ import annotations

import logging
from typing import Any

from ..chunk import Chunk
from ..protocols.translator import MALFORMED
from ..redact import Redactor
from ..response import Response
from .outbound import CleanStream
from .upstream import Failure, failure_of, is_truncation, openai_chunk

log = logging.getLogger("llmchat.proxy")

__all__ = ["Answer", "unreadable"]


class Answer:
    """How a proxied Response reaches one face's client: a stream translator, or one body."""

    redactor: Redactor = Redactor.of(())
    """The upstream's key forms; the app sets it before any answer is written."""

    thinking: bool = True
    """Whether the client sees the upstream's reasoning (`chunk` leaves it out otherwise)."""

    def stream(self) -> CleanStream:
        """The face's translator, behind the one door every streamed event goes through:
        its input cleaned of the key and of lone surrogates, its failures in band."""
        return CleanStream(self.translator(), self.redactor)

    def translator(self) -> Any:
        """The face's own stream translator (`stream` is what writes with it)."""
        raise NotImplementedError

    def chunk(self, chunk: Any, response_id: str | None = None) -> dict[str, Any]:
        """The OpenAI chunk the stream translator takes for one upstream `Chunk`."""
        return openai_chunk(chunk, thinking=self.thinking, response_id=response_id)

    def write(self, stream: Any, chunk: Chunk, response_id: str | None = None) -> bytes:
        """The bytes one upstream `chunk` becomes on `stream` (this answer's `stream()`):
        ``stream.delta(self.chunk(chunk, response_id))``.

        The common chunk, text or reasoning only (no tool call, usage or finish),
        goes to `stream.text_delta` as its parts, the same bytes without the
        decoded OpenAI chunk being built, copied and read back per token.
        """
        if chunk.tool_calls or chunk.usage is not None or chunk.is_final:
            return bytes(stream.delta(self.chunk(chunk, response_id)))
        if response_id is None:
            raw = chunk.raw
            found = raw.get("id") if raw is not None else None
            response_id = found if type(found) is str else None
        reasoning = (chunk.thinking or "") if self.thinking else ""
        data = stream.text_delta(chunk.content or "", reasoning, chunk.model or None, response_id)
        return bytes(data)

    def write_batch(
        self, stream: Any, chunks: list[Chunk], response_id: str | None = None
    ) -> bytes:
        """The bytes `chunks` become on `stream`, one `write` each, as one piece: a
        burst of tokens is one send. None after a chunk the stream failed on
        (``stream.errored``: the caller ends the stream)."""
        write = self.write
        if len(chunks) == 1:
            return write(stream, chunks[0], response_id)
        pieces = []
        for chunk in chunks:
            pieces.append(write(stream, chunk, response_id))
            if stream.errored:
                break
        return b"".join(pieces)

    def body(self, response: Response) -> dict[str, Any]:
        raise NotImplementedError

    def complete(self, response: Response) -> bool:
        """True when the settled `response` is an answer for this face's client, not an error.

        A stop at the token limit is one: the client asked for that limit.
        """
        return response.is_success or is_truncation(response)

    def failure(self, response: Response) -> Failure:
        """What the failed `response` tells this face's client (`failure_of`'s fixed words)."""
        return failure_of(response)

    def refused(self, response: Response) -> Failure | None:
        """A failure this face makes of a Response the upstream finished; None to answer it.

        Every face refuses a tool call without a name or with arguments that are
        not a JSON object (the spec's parser-rejection rule): the client gets a
        502 with the generic words, never a call to run with made-up arguments.
        """
        if unreadable(response.tool_calls):
            return Failure(502, MALFORMED, "response")
        return None


def unreadable(calls: Any) -> bool:
    """A complete tool call without a name, or whose arguments are not a JSON object."""
    if any(call.arguments_undecodable or not call.name for call in calls or ()):
        log.warning("upstream sent a tool call without a name or with undecodable arguments")
        return True
    return False
