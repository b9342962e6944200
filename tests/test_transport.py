"""transport: timeouts and header redaction."""

from __future__ import annotations

import pytest

from llmchat.transport import Timeouts, redact_headers


def test_redaction_is_case_insensitive_and_copies() -> None:
    headers = {"authorization": "Bearer k", "X-Api-Key": "k", "Accept": "x"}
    assert redact_headers(headers) == {
        "authorization": "[redacted]",
        "X-Api-Key": "[redacted]",
        "Accept": "x",
    }
    assert headers["authorization"] == "Bearer k"


def test_timeouts_defaults_and_repr() -> None:
    timeouts = Timeouts()
    assert (timeouts.connect, timeouts.headers, timeouts.request) == (30.0, 60.0, 1800.0)
    assert "finish_grace=10.0" in repr(timeouts)


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf")])
def test_timeouts_refuse_non_positive(value: float) -> None:
    with pytest.raises(ValueError, match="headers_timeout"):
        Timeouts(headers=value)


def test_timeouts_refuse_bool() -> None:
    with pytest.raises(TypeError, match="probe_timeout"):
        Timeouts(probe=True)
