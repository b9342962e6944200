"""Reading OpenAI-compatible completion bodies and the finish-reason rules (a public path).

Only names: `parse_completion` and `Completion` live in
`llmchat.dialects.openai_chat`, the error-body readers in
`llmchat.dialects.error_body`, and the finish-reason rules in
`llmchat.pipeline.judge`.
"""

from __future__ import annotations

from .dialects.error_body import ErrorBody, error_message, json_error_message
from .dialects.openai_chat import (
    Completion,
    inband_error,
    no_finish,
    parse_completion,
    usage_fields,
)
from .pipeline.judge import ERR_FILTER, ERR_LENGTH, ERR_PROVIDER, SUCCESS_REASONS, judge_finish

__all__ = [
    "ERR_FILTER",
    "ERR_LENGTH",
    "ERR_PROVIDER",
    "SUCCESS_REASONS",
    "Completion",
    "ErrorBody",
    "error_message",
    "inband_error",
    "json_error_message",
    "judge_finish",
    "no_finish",
    "parse_completion",
    "usage_fields",
]
