"""Timing: how long a completion took, as the caller saw it and as the server says."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Timing"]


@dataclass(slots=True)
class Timing:
    """How long the caller waited (seconds, from the moment the request was made).

    The fields after `total_seconds` are what the server says it spent, where
    it reports that (Ollama's durations), also in seconds.
    """

    ttft_seconds: float | None = None
    """Until the first content, reasoning or tool-call chunk; None if none came."""
    total_seconds: float | None = None
    """Until the Response settled; None while it is live."""
    server_total_seconds: float | None = None
    """The whole request as the server measured it (Ollama's ``total_duration``);
    None when the server reports no such figure."""
    load_seconds: float | None = None
    """Loading the model, as the server measured it (Ollama's ``load_duration``);
    None when not reported."""
    prompt_eval_seconds: float | None = None
    """Reading the prompt, as the server measured it (Ollama's ``prompt_eval_duration``);
    None when not reported."""
    eval_seconds: float | None = None
    """Generating the answer, as the server measured it (Ollama's ``eval_duration``);
    None when not reported."""
