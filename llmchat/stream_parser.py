"""The frame parser's old name: `StreamParser` is the pipeline's `Accumulator`.

Kept for code that reads a stream's state without settling anything (the
proxy's relay meter). The deciding is `llmchat.pipeline.judge`.
"""

from __future__ import annotations

from .chunk import Chunk
from .pipeline.accumulate import DONE, Accumulator
from .sse import SSEEvent

__all__ = ["DONE", "StreamParser"]


class StreamParser(Accumulator):
    """An `Accumulator` under its earlier name."""

    def feed(self, event: SSEEvent) -> list[Chunk]:
        """Return the chunks one SSE event produces (`feed_event`)."""
        return self.feed_event(event)

    @property
    def wire_finish_reason(self) -> str | None:
        """The finish reason exactly as it arrived (`finish_reason`); None until it does."""
        return self.finish_reason
