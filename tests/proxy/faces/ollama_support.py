"""What the Ollama face's tests share: image bytes and request-body builders."""

from __future__ import annotations

import base64
from typing import Any

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 8
GIF = b"GIF89a" + b"\x00" * 8
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 "
PNG_B64 = base64.b64encode(PNG).decode()
JPEG_B64 = base64.b64encode(JPEG).decode()


def user(content: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": content, **extra}


def chat(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": [user()]}
    body.update(fields)
    return body


def assert_no_none(value: Any) -> None:
    if isinstance(value, dict):
        for item in value.values():
            assert item is not None
            assert_no_none(item)
    elif isinstance(value, list):
        for item in value:
            assert_no_none(item)
