"""What the Settings tests share: API.md's field list, a JSON schema, the dataclass's fields."""

from __future__ import annotations

import dataclasses

from llmchat.settings import Settings

# The field list from API.md, in its order.
API_FIELDS = (
    "max_tokens temperature top_p top_k min_p typical_p repetition_penalty "
    "frequency_penalty presence_penalty seed stop logit_bias logprobs top_logprobs "
    "json_schema json_schema_name json_schema_strict reasoning_effort "
    "reasoning_budget_tokens id_slot cache_prompt parallel_tool_calls max_context "
    "xtc_probability xtc_threshold dry_multiplier dry_base dry_allowed_length "
    "dry_sequence_breakers extra_body"
).split()

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["answer"],
}


def field_names() -> list[str]:
    return [field.name for field in dataclasses.fields(Settings)]
