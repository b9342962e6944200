"""join_url and server_root: routes land before an api_url's query string."""

from __future__ import annotations

import pytest

from llmchat.urls import join_url, server_root


@pytest.mark.parametrize(
    ("base", "route", "expected"),
    [
        ("http://h:8080/v1", "/chat/completions", "http://h:8080/v1/chat/completions"),
        ("http://h:8080/v1/", "/models", "http://h:8080/v1/models"),
        (
            "https://r.openai.azure.com/openai/deployments/d?api-version=2024-06-01",
            "/chat/completions",
            "https://r.openai.azure.com/openai/deployments/d/chat/completions"
            "?api-version=2024-06-01",
        ),
        ("http://h/v1?k=1", "/generation?id=a%2Fb", "http://h/v1/generation?k=1&id=a%2Fb"),
        ("http://h/v1", "/generation?id=x", "http://h/v1/generation?id=x"),
        ("http://h/v1#frag", "/models", "http://h/v1/models"),
    ],
)
def test_join_url(base: str, route: str, expected: str) -> None:
    assert join_url(base, route) == expected


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("http://h:8080/v1", "http://h:8080"),
        ("http://h:8080/v1/", "http://h:8080"),
        ("http://h:8080", "http://h:8080"),
        ("http://h/api/v1?k=1", "http://h/api?k=1"),
        ("http://h/v10", "http://h/v10"),
    ],
)
def test_server_root(base: str, expected: str) -> None:
    assert server_root(base) == expected
