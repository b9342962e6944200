"""The one settle point: a typed `Ending` and the accumulated state into terminal state.

`settle` asks the judge, runs `_reconcile_finish_reason` once (with the
provider's reason, only when the provider's own end was reached), applies the
decided reason's rules, runs the completion hook only on success, and settles
the Response exactly once. `ending_of_failure` and `ending_of_abort` turn an
exception or an aborted exchange into the `Ending` (spec: STREAM TERMINATION
CONTRACT, CANCELLATION): an abort is never read as the provider's own end.
"""

from __future__ import annotations

import logging

from ..pipeline.accumulate import Accumulator
from ..pipeline.judge import (
    CANCELLED_ENDING,
    CUT_ENDING,
    GRACE_ENDING,
    Ending,
    judge,
    judge_reason,
)
from ..response import Response
from ..response_writer import ResponseWriter
from ..sse import EventTooLarge
from ..transport import BodyTooLarge, Exchange, Timeouts, classify_exception
from .call import Call

log = logging.getLogger("llmchat")

__all__ = [
    "decide_finish",
    "ending_of_abort",
    "ending_of_failure",
    "run_hook",
    "settle",
]


def ending_of_abort(timeouts: Timeouts, exchange: Exchange) -> Ending | None:
    """The ending an abort makes, whatever the body's framing did; None if not aborted."""
    reason = exchange.aborted
    if reason is None:
        return None
    if reason == "cancel":
        return CANCELLED_ENDING
    if reason == "grace":
        return GRACE_ENDING
    error_class, message = classify_exception(
        ConnectionError("exchange aborted"),
        exchange=exchange,
        after_headers=True,
        timeouts=timeouts,
    )
    return Ending("deadline" if reason == "deadline" else "transport", error_class, message)


def ending_of_failure(
    call: Call,
    exc: Exception,
    exchange: Exchange,
    *,
    after_headers: bool,
    stream: bool,
) -> Ending:
    """The ending of a read or send that raised."""
    if exchange.aborted == "cancel":
        return CANCELLED_ENDING  # cancel() settled it already
    if isinstance(exc, (BodyTooLarge, EventTooLarge)):
        # Read no further, even after the finish chunk: what arrived stays on the Response.
        return Ending("limit", message=str(exc))
    if exchange.aborted is not None and (stream or exchange.aborted == "deadline"):
        ending = ending_of_abort(call.timeouts, exchange)
        if ending is not None:
            return ending
    error_class, message = classify_exception(
        exc, exchange=exchange, after_headers=after_headers, timeouts=call.timeouts
    )
    if stream and after_headers and error_class == "response" and message.startswith("Body cut"):
        log.debug("stream cut off: %s", call.redactor().text(message))
        return CUT_ENDING
    return Ending("transport", error_class, message)


def settle(call: Call, writer: ResponseWriter[Response], ending: Ending, acc: Accumulator) -> None:
    """The one place an ending becomes the Response's terminal state."""
    response = writer.response
    if response.is_done:  # cancelled: nothing is reconciled, no hook runs
        return
    verdict = judge(ending, acc)
    if verdict.cancelled:
        return
    if verdict.finished:
        decided = decide_finish(call, response, acc.finish_reason, acc.provider_reason)
        reason, verdict = judge_reason(decided, bool(acc.tool_calls))
        writer.record(finish_reason=reason, provider_finish_reason=acc.provider_reason)
        if acc.parts:
            response.reasoning_parts = list(acc.parts)
        if verdict.error_class is None:
            run_hook(call, writer)
            return
    writer.settle(verdict.error_class, verdict.err, verdict.error_status)


def run_hook(call: Call, writer: ResponseWriter[Response]) -> None:
    """Run the completion hook on a success, then settle; a hook that raises fails it."""
    try:
        call.on_complete(writer.response)
    except Exception as exc:
        log.warning("completion hook raised: %s", call.redactor().exception(exc))
        writer.settle("unknown", f"{type(exc).__name__}: {exc}")
        return
    writer.settle()


def decide_finish(
    call: Call, response: Response, reason: str | None, provider: str | None = None
) -> str | None:
    """Run `_reconcile_finish_reason` once; a hook that raises keeps `reason`.

    `reason` is in OpenAI's names (the dialect mapped it); `provider` is the
    wire value when it differs.
    """
    response.provider_finish_reason = provider or reason
    if reason is None:
        return None
    try:
        decided = call.reconcile_finish_reason(response, reason, response.request or {})
    except Exception as exc:
        log.warning(
            "_reconcile_finish_reason raised; keeping %r: %s",
            reason,
            call.redactor().exception(exc),
        )
        return reason
    if not isinstance(decided, str):
        log.warning("_reconcile_finish_reason returned %r; keeping %r", decided, reason)
        return reason
    return decided
