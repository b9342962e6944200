"""What an `Inference` run reports: each `Attempt`, and the exceptions that end a run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import LLMChatError

__all__ = ["Attempt", "Cancelled", "Exhausted", "TimedOut", "Truncated"]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of an `Inference` run. Never holds a credential: `message` is `Response.err`."""

    number: int
    """1-based, counted over the whole run."""
    backend_index: int
    """Position of the backend in `Inference.backends`."""
    model: str | None
    error_class: str | None
    """None on success; ``"timeout"`` for an Inference per-attempt timeout;
    ``"parser"`` when the parser raised."""
    error_status: int | None
    message: str | None
    latency_seconds: float
    success: bool
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    decision: str | None = None
    """What the failure led to (`classify`'s bucket); None on success or cancel."""

    def describe(self) -> str:
        """One readable line for this attempt."""
        where = f"backend {self.backend_index}"
        if self.model:
            where += f" ({self.model})"
        if self.success:
            outcome = "ok"
        else:
            outcome = self.error_class or "failed"
            if self.error_status is not None:
                outcome += f" {self.error_status}"
            if self.message:
                outcome += f": {self.message}"
        line = f"#{self.number} {where}: {outcome} [{self.latency_seconds:.2f} s]"
        if self.decision:
            line += f" -> {self.decision}"
        return line


class Exhausted(LLMChatError):
    """No backend produced a usable answer; `attempts` lists every attempt made."""

    def __init__(self, attempts: Sequence[Attempt], message: str | None = None) -> None:
        self.attempts: list[Attempt] = list(attempts)
        head = message or f"all {len(self.attempts)} attempt(s) failed"
        lines = [head, *("  " + a.describe() for a in self.attempts)]
        super().__init__("\n".join(lines))


class Truncated(Exhausted):
    """Exhausted, and the last failure was a ``length`` finish; the partial answer is kept."""

    def __init__(
        self,
        attempts: Sequence[Attempt],
        message: str | None = None,
        *,
        partial_text: str = "",
        usage: Mapping[str, Any] | None = None,
        completion_tokens: int | None = None,
    ) -> None:
        super().__init__(attempts, message or "the answer was cut off (finish_reason 'length')")
        self.partial_text = partial_text
        """The text of the last (truncated) answer."""
        self.usage = usage
        """The raw usage block of the last answer; None when none came."""
        self.completion_tokens = completion_tokens


class TimedOut(Exhausted):
    """Exhausted, and the last failure was a timeout (per attempt or the transport's)."""


class Cancelled(LLMChatError):
    """`Inference.cancel()` stopped the run; `attempts` lists the attempts made so far."""

    def __init__(self, attempts: Sequence[Attempt] = ()) -> None:
        self.attempts: list[Attempt] = list(attempts)
        super().__init__(f"cancelled after {len(self.attempts)} attempt(s)")
