"""The judge: how a completion ended, and what its state says, into one verdict.

Pure, no I/O. `judge(ending, state)` sees a typed `Ending` (what stopped the
reading) and the accumulator's state, and returns the `Verdict` the runner
settles from. When the provider's own end was reached with nothing wrong
before it, the verdict is `finished`: the runner then asks
`_reconcile_finish_reason` once, with the provider's reason, and
`judge_reason(decided, calls)` applies the decided reason's rules (spec:
STREAM TERMINATION CONTRACT; "Correcting a provider's finish reason"). The
blocking paths follow the same rules: a blocking body is a one-payload stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Protocol

from ..errors import ErrorClass

__all__ = [
    "ERR_FILTER",
    "ERR_LENGTH",
    "ERR_PROVIDER",
    "ERR_STREAM_CLOSED",
    "Ending",
    "State",
    "Verdict",
    "judge",
    "judge_finish",
    "judge_reason",
]

SUCCESS_REASONS: Final = frozenset({"stop", "tool_calls", "function_call"})
ERR_LENGTH: Final = "Hit max tokens"
ERR_FILTER: Final = "Blocked by content filter"
ERR_PROVIDER: Final = "The provider ended the completion with finish_reason 'error'"
ERR_STREAM_CLOSED: Final = "Stream closed without [DONE] or a finish reason"
ERR_UNFINISHED_CALL: Final = "Stream ended inside an unfinished tool call"

EndingKind = Literal[
    "done",  # data: [DONE]
    "eof",  # the body ended (a clean close)
    "body",  # a whole blocking body was read; `body` holds its text
    "grace",  # stream_finish_grace ran out after the finish chunk
    "cut",  # the body was cut off by the network after headers
    "cancelled",  # the caller cancelled (the Response settled already)
    "deadline",  # request_timeout ran out
    "transport",  # the exchange failed: `error_class`, `message`
    "limit",  # a size limit was passed: `message`
    "http",  # an error status: `status`, `message`
    "malformed",  # a body that is no completion (not UTF-8, empty, not an object)
]


@dataclass(frozen=True, slots=True)
class Ending:
    """What stopped the reading of one completion."""

    kind: EndingKind
    error_class: ErrorClass | None = None
    """For ``transport``: the class `classify_exception` gave."""
    message: str | None = None
    """For the failures: the err text to settle with."""
    status: int | None = None
    """For ``http``: the status."""
    body: str | None = None
    """For ``body``: the body's text (quoted, shortened, in a failure)."""


DONE_ENDING: Final = Ending("done")
EOF_ENDING: Final = Ending("eof")
GRACE_ENDING: Final = Ending("grace")
CUT_ENDING: Final = Ending("cut")
CANCELLED_ENDING: Final = Ending("cancelled")


@dataclass(frozen=True, slots=True)
class Verdict:
    """How the Response settles: the `_settle` arguments, or "ask the hook first"."""

    error_class: ErrorClass | None = None
    err: str | None = None
    error_status: int | None = None
    finished: bool = False
    """The provider's own end, nothing wrong before it: reconcile, then `judge_reason`."""
    cancelled: bool = False
    """A cancel: the Response settled already; nothing is reconciled, no hook runs."""

    @property
    def is_success(self) -> bool:
        return self.error_class is None and not self.finished and not self.cancelled


FINISHED: Final = Verdict(finished=True)
CANCELLED: Final = Verdict(cancelled=True)
SUCCESS: Final = Verdict()


class State(Protocol):
    """What the judge reads of an accumulator."""

    @property
    def finish_reason(self) -> str | None: ...
    @property
    def done(self) -> bool: ...
    @property
    def error(self) -> str | None: ...
    @property
    def dropped(self) -> int: ...
    @property
    def undecodable(self) -> int: ...
    @property
    def saw_tool_calls(self) -> bool: ...
    @property
    def saw_choice(self) -> bool: ...
    @property
    def pending(self) -> bool: ...


def judge(ending: Ending, state: State) -> Verdict:
    """The verdict for `ending` given `state`; never raises."""
    kind = ending.kind
    if kind == "cancelled":
        return CANCELLED
    if kind in ("done", "eof", "body", "grace"):
        return _provider_end(ending, state)
    if kind == "cut":
        # A connection lost after the finish chunk is a close; before it, the body stopped.
        if state.finish_reason is not None:
            return _provider_end(EOF_ENDING, state)
        return Verdict("response", ERR_STREAM_CLOSED)
    if kind == "http":
        return Verdict("http", ending.message, ending.status)
    if kind == "transport":
        return Verdict(ending.error_class or "unknown", ending.message)
    if kind == "deadline":
        return Verdict("timeout", ending.message)
    return Verdict("response", ending.message)  # limit, malformed


def _provider_end(ending: Ending, state: State) -> Verdict:
    """The body ended on its own (or after the finish chunk): the state decides."""
    if state.error is not None:
        return Verdict("response", state.error)
    if state.undecodable:
        return Verdict(
            "response",
            f"{state.undecodable} stream frame(s) were not valid UTF-8; their text was lost",
        )
    if state.saw_tool_calls and state.dropped:
        return Verdict(
            "response",
            f"{state.dropped} stream frame(s) dropped while tool calls were "
            "streaming; the calls may be corrupt",
        )
    if state.pending:
        return Verdict("response", ERR_UNFINISHED_CALL)
    if ending.kind == "body":
        if not state.saw_choice:
            return Verdict("response", f"Response has no choices: {_excerpt(ending.body or '')}")
        return FINISHED
    if state.finish_reason is not None or ending.kind == "done":
        return FINISHED
    return Verdict("response", ERR_STREAM_CLOSED)


def judge_reason(decided: str | None, has_calls: bool) -> tuple[str | None, Verdict]:
    """The decided reason's rules: `(finish_reason to record, verdict)`.

    A ``stop`` with tool calls becomes ``tool_calls`` (on every path, after
    the hook); then `judge_finish` decides.
    """
    if decided == "stop" and has_calls:
        decided = "tool_calls"
    error_class, err = judge_finish(decided)
    return decided, SUCCESS if error_class is None else Verdict(error_class, err)


def judge_finish(reason: str | None) -> tuple[ErrorClass | None, str | None]:
    """Return `(error_class, err)` for a decided finish reason; `(None, None)` is success.

    ``length`` is a failure (a truncated answer is never labelled complete),
    as are ``content_filter`` and any reason llmchat does not know.
    """
    if reason is None or reason in SUCCESS_REASONS:
        return None, None
    if reason == "length":
        return "response", ERR_LENGTH
    if reason == "content_filter":
        return "response", ERR_FILTER
    if reason == "error":  # an upstream failure with no error object to quote
        return "response", ERR_PROVIDER
    return "response", f"Unknown finish reason: {reason}"


def _excerpt(text: str, limit: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."
