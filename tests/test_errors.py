"""errors: the tree and the error-class mapping."""

from __future__ import annotations

import pytest

from llmchat import errors


@pytest.mark.parametrize(
    ("cls", "bases"),
    [
        (errors.InvalidArgumentError, (ValueError,)),
        (errors.InvalidTypeError, (TypeError,)),
        (errors.InvalidMessageError, (ValueError, TypeError)),
        (errors.RemoteError, ()),
    ],
)
def test_caller_mistakes_are_builtin_errors_too(cls: type, bases: tuple[type, ...]) -> None:
    assert issubclass(cls, errors.LLMChatError)
    assert all(issubclass(cls, base) for base in bases)


@pytest.mark.parametrize("error_class", errors.ERROR_CLASSES)
def test_every_error_class_has_an_exception(error_class: str) -> None:
    assert errors.remote_error_for(error_class).error_class == error_class


def test_unknown_or_missing_class_maps_to_unknown() -> None:
    assert errors.remote_error_for(None) is errors.UnknownRemoteError
    assert errors.remote_error_for("weird") is errors.UnknownRemoteError


def test_remote_error_keeps_the_response() -> None:
    marker = object()
    exc = errors.HTTPStatusError("boom", response=marker, status=503)
    assert (exc.response, exc.status, str(exc)) == (marker, 503, "boom")
    assert not issubclass(errors.RequestTimeoutError, TimeoutError)
