"""ResponseWriter: the runners' one handle on a Response; every write stops at the settle."""

from __future__ import annotations

import ast
from pathlib import Path

import llmchat.response_writer as response_writer
from llmchat import Chunk, Response
from llmchat.response import writer_of


def test_each_response_has_one_writer_bound_to_it() -> None:
    response = Response({"model": "m"})
    writer = writer_of(response)
    assert writer is writer_of(response)
    assert writer.response is response
    assert writer_of(Response()) is not writer


def test_publish_and_record_show_on_the_public_fields() -> None:
    response = Response()
    writer = writer_of(response)
    writer.publish([Chunk(content="Hel"), Chunk("", thinking="hmm"), Chunk(content="lo")])
    writer.record(finish_reason="stop", provider_finish_reason="end_turn")
    assert response.msg == "Hello"
    assert response.reasoning_text == "hmm"
    assert response.timing.ttft_seconds is not None
    assert (response.finish_reason, response.is_done) == ("stop", False)


def test_nothing_changes_after_the_settle() -> None:
    response = Response()
    writer = writer_of(response)
    writer.publish([Chunk(content="kept")])
    assert writer.settle("response", "bad frame", None) is True
    assert writer.settle() is False  # once
    writer.publish([Chunk(content=" lost")])
    writer.record(finish_reason="stop")
    hooks: list[str] = []
    writer.add_cancel_hook(lambda: hooks.append("ran"))
    response.cancel()
    assert response.msg == "kept"
    assert response.finish_reason is None
    assert (response.error_class, response.err, response.is_cancelled) == (
        "response",
        "bad frame",
        False,
    )
    assert hooks == []


def test_an_aborter_attached_after_a_cancel_runs_at_once() -> None:
    response = Response()
    response.cancel()
    ran: list[bool] = []
    writer_of(response).attach_aborter(lambda: ran.append(True))
    assert ran == [True]


def test_the_error_body_message_is_scrubbed_of_the_key() -> None:
    response = Response(secrets=("sk-very-secret-key",))
    writer = writer_of(response)
    writer.note_headers({"Content-Type": "application/json", "Retry-After": "3"})
    writer.note_error_body(42, "bad key sk-very-secret-key")
    body = response._error_body
    assert body is not None
    assert response.retry_after == "3"
    assert "sk-very-secret-key" not in repr(body)
    assert (body.size, body.content_type) == (42, "application/json")


def test_a_paced_writer_has_room_only_within_the_lead() -> None:
    response = Response()
    writer = writer_of(response)
    response._pace(1)
    assert writer.has_room()
    writer.publish([Chunk(content="a")])
    assert not writer.has_room()
    assert next(iter(response)).content == "a"
    assert writer.has_room()


def test_the_writer_module_does_not_import_the_response_module() -> None:
    tree = ast.parse(Path(response_writer.__file__).read_text(encoding="utf-8"))
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(name.endswith("response") for name in imported)
