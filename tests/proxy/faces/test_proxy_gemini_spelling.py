"""The Gemini face reads either spelling of a field, and Gemini's type names in JSON Schemas."""

from __future__ import annotations

from llmchat.proxy.faces.gemini.schema import json_schema_types
from llmchat.proxy.faces.gemini.spelling import camel_case
from llmchat.proxy.faces.gemini.translate import generate_request


def test_snake_case_fields_read_as_camel_case_but_the_clients_data_kept() -> None:
    body = {
        "contents": [
            {
                "role": "model",
                "parts": [{"function_call": {"name": "f", "args": {"file_path": "a", "x_y": 1}}}],
            },
            {
                "role": "user",
                "parts": [{"function_response": {"name": "f", "response": {"out_put": "ok"}}}],
            },
        ],
        "generation_config": {
            "max_output_tokens": 7,
            "thinking_config": {"include_thoughts": True, "thinking_budget": 0},
        },
    }
    out = camel_case(body)
    assert out["generationConfig"] == {
        "maxOutputTokens": 7,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 0},
    }
    assert out["contents"][0]["parts"][0]["functionCall"]["args"] == {"file_path": "a", "x_y": 1}
    assert out["contents"][1]["parts"][0]["functionResponse"]["response"] == {"out_put": "ok"}


def test_the_camel_case_spelling_wins_when_both_are_given() -> None:
    assert camel_case({"maxOutputTokens": 5, "max_output_tokens": 9}) == {"maxOutputTokens": 5}
    assert camel_case({"_responseJsonSchema": {"a_b": 1}}) == {"_responseJsonSchema": {"a_b": 1}}


def test_google_genai_s_snake_case_declaration_reaches_the_upstream_with_its_parameters() -> None:
    schema = {"type": "object", "properties": {"file_path": {"type": "string"}}}
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tools": [{"function_declarations": [{"name": "w", "parameters_json_schema": schema}]}],
        "generationConfig": {
            "thinking_config": {"include_thoughts": True, "thinking_budget": 1024}
        },
    }
    request, thinking = generate_request(body, "m", stream=True)
    assert request["tools"][0]["function"]["parameters"] == schema
    assert request["reasoning_effort"] == "low"
    assert thinking is True


def test_gemini_type_names_in_a_json_schema_are_lowered_and_property_names_kept() -> None:
    given = {
        "type": "OBJECT",
        "properties": {
            "OBJECT": {"type": "STRING"},
            "list": {"type": "ARRAY", "items": {"type": ["INTEGER", "NULL"]}},
            "either": {"anyOf": [{"type": "BOOLEAN"}, {"type": "number"}]},
        },
        "$defs": {"d": {"type": "OBJECT", "additionalProperties": {"type": "STRING"}}},
        "required": ["OBJECT"],
    }
    assert json_schema_types(given) == {
        "type": "object",
        "properties": {
            "OBJECT": {"type": "string"},
            "list": {"type": "array", "items": {"type": ["integer", "null"]}},
            "either": {"anyOf": [{"type": "boolean"}, {"type": "number"}]},
        },
        "$defs": {"d": {"type": "object", "additionalProperties": {"type": "string"}}},
        "required": ["OBJECT"],
    }
    assert given["type"] == "OBJECT"  # the client's request is not changed in place


def test_the_routing_classifier_s_response_schema_is_lowered() -> None:
    schema = {
        "type": "OBJECT",
        "properties": {"complexity_score": {"type": "INTEGER"}},
        "required": ["complexity_score"],
    }
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema},
    }
    request, _ = generate_request(body, "m", stream=False)
    sent = request["response_format"]["json_schema"]["schema"]
    assert sent["type"] == "object"
    assert sent["properties"] == {"complexity_score": {"type": "integer"}}
