"""An upstream answer a face must not pass on, and what its client is told instead."""

from __future__ import annotations

__all__ = ["AnswerRejected", "UndecodableArguments"]


class AnswerRejected(Exception):
    """The upstream's answer cannot be given to the client in the face's shape.

    The client gets the generic `translator.MALFORMED` error (a 502 before the
    first byte, the format's error line or event after it); the exception's
    own text is for the log and never reflects upstream detail to the client.
    """


class UndecodableArguments(AnswerRejected):
    """A tool call's arguments were not a JSON object: passing it on as ``{}``
    would have the client run the tool with arguments the model did not give."""
