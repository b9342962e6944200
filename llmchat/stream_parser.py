"""The frame parser's old name (a public path): `StreamParser` is the pipeline's `Accumulator`.

Only names: `StreamParser` lives in `llmchat.pipeline.accumulate`, for code
that reads a stream's state without settling anything. The deciding is
`llmchat.pipeline.judge`.
"""

from __future__ import annotations

from .pipeline.accumulate import DONE, StreamParser

__all__ = ["DONE", "StreamParser"]
