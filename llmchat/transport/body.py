"""Bytes to text: how llmchat reads a body it did not get as JSON."""

from __future__ import annotations

from typing import Any

from .. import fastjson

__all__ = ["decode_body", "parse_json"]


def decode_body(data: bytes) -> str:
    """Decode a body for reading only: UTF-8 (BOM dropped), else latin-1.

    The completion paths decode strictly instead; this is for probes and the
    proxy's relay meter, which must never fail on odd bytes.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def parse_json(text: str) -> Any:
    """Parse JSON whatever the Content-Type said; None when it is not JSON."""
    try:
        return fastjson.loads(text)
    except ValueError:
        return None
