"""The one completion pipeline (pure, no I/O): accumulate deltas, judge the ending.

`accumulate.Accumulator` applies a dialect's deltas to a stream's state and
emits `Chunk`s; `judge.judge` turns a typed `Ending` and that state into the
one `Verdict`; `think_tags.ThinkTagFilter` splits reasoning written inline
between think tags from the answer. The runners that own the exchange live in
`llmchat.backends._runners` (they need the transport and the hooks of one
`backends.call.Call`, which this package does not import).
"""

from __future__ import annotations

from .accumulate import Accumulator
from .judge import Ending, Verdict, judge, judge_finish, judge_reason
from .think_tags import ThinkTagFilter

__all__ = [
    "Accumulator",
    "Ending",
    "ThinkTagFilter",
    "Verdict",
    "judge",
    "judge_finish",
    "judge_reason",
]
