"""The API key the secrets tests hide, every form of it, and the one check for a leak."""

from __future__ import annotations

from llmchat.redact import Redactor

KEY = "sk-proj/Zx9Qw+SECRETSECRET_7"
"""Has "/" and "+", so its repr, JSON-escaped (`\\/`) and percent-encoded forms differ."""
MARKER = "SECRETSECRET"
"""Part of every form of the key: finding it anywhere means some form got through."""
FORMS = Redactor.of([KEY]).forms
WAIT = 10.0
MESSAGES = [{"role": "user", "content": "hi"}]


def leaks(text: str) -> list[str]:
    found = [form for form in FORMS if form in text]
    return found or ([MARKER] if MARKER in text else [])
