"""Ollama's ``/api/embed`` and legacy ``/api/embeddings``, as OpenAI embeddings bodies and back.

Pure translation. Decisions:

- ``input`` is a string or a list of strings; absent, null, ``""`` or ``[]``
  is answered at once with no embeddings (Ollama's "load the model" call).
- ``dimensions`` (a positive integer) is sent upstream; when the upstream
  ignores it and answers longer vectors, they are cut to that length and
  L2-normalised again, as Ollama does.
- ``truncate`` is checked (a boolean) and not sent: OpenAI's embeddings API has
  no such switch, so input longer than the upstream's window gets whatever
  the upstream does with it (llama-server refuses it, hosted APIs truncate).
- ``options`` and ``keep_alive`` are ignored, as for chat.
- ``/api/embeddings`` takes ``prompt`` (one string) and answers ``embedding``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ....errors import InvalidArgumentError, InvalidTypeError
from ...field_checks import integer, json_type, require_bool, require_mapping, require_str

__all__ = ["embed_body", "embed_request", "embeddings_body", "embeddings_request"]


def embed_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """The OpenAI embeddings body for an ``/api/embed`` request (``input`` may be ``[]``)."""
    require_mapping(body, "body")
    out: dict[str, Any] = {"model": _model(body), "input": _inputs(body.get("input"))}
    truncate = body.get("truncate")
    if truncate is not None:
        require_bool(truncate, "truncate")
    dimensions = body.get("dimensions")
    if dimensions is not None:
        size = integer(dimensions, "dimensions")
        if size < 1:
            raise InvalidArgumentError(f"dimensions: must be a positive integer, not {size}")
        out["dimensions"] = size
    return out


def embeddings_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """The OpenAI embeddings body for a legacy ``/api/embeddings`` request."""
    require_mapping(body, "body")
    prompt = body.get("prompt")
    if prompt is None:
        prompt = ""
    require_str(prompt, "prompt")
    return {"model": _model(body), "input": [prompt] if prompt else []}


def embed_body(
    *,
    model: str,
    vectors: list[list[float]],
    dimensions: int | None,
    prompt_tokens: int | None,
    total_duration_ns: int,
) -> dict[str, Any]:
    """The ``/api/embed`` answer: vectors cut to `dimensions` when longer."""
    if dimensions is not None:
        vectors = [_shorten(vector, dimensions) for vector in vectors]
    return {
        "model": model,
        "embeddings": vectors,
        "total_duration": int(total_duration_ns),
        "load_duration": 0,
        "prompt_eval_count": int(prompt_tokens or 0),
    }


def embeddings_body(vectors: list[list[float]]) -> dict[str, Any]:
    """The legacy ``/api/embeddings`` answer: the one vector, or ``[]`` for no prompt."""
    return {"embedding": vectors[0] if vectors else []}


def _model(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    if model is None:
        raise InvalidArgumentError("model: is required")
    require_str(model, "model")
    if not model:
        raise InvalidArgumentError("model: must not be empty")
    return str(model)


def _inputs(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise InvalidTypeError(
            f"input: must be a string or a list of strings, not {json_type(value)}"
        )
    for index, item in enumerate(value):
        require_str(item, f"input[{index}]")
    return list(value)


def _shorten(vector: list[float], size: int) -> list[float]:
    if len(vector) <= size:
        return vector
    head = vector[:size]
    norm = math.sqrt(sum(x * x for x in head))
    return [x / norm for x in head] if norm > 0 else head
