"""Every openai-chat wire capture through the real library, over real sockets.

`/work/shared/captures/openai-chat/` holds recorded bodies of real servers
(PROVENANCE.md says where each came from and what it shows). Each one is
served by the loopback `ScriptedServer` and read by `OpenAICommon`:

- ``.json``: a blocking body, served byte for byte to `chat_completion` with
  the HTTP status PROVENANCE.md records for it (``-> 400``, ``-> 429``, ...).
- ``.sse.txt``: a raw SSE body, served byte for byte to `chat_completion_stream`
  as ``text/event-stream``, one write per event; chunked (one HTTP chunk per
  event) for the expectations, and close-delimited too, which must agree.
- ``.sse-data.ndjson``: one ``data:`` payload per line, the framing stripped by
  the recorder (vercel/ai's fixture writer keeps the ``data:`` lines and drops
  ``[DONE]``). The frames are rebuilt as ``data: <line>\\n\\n`` and
  ``data: [DONE]\\n\\n`` is appended, on that assumption; every such file here
  carries a finish reason, and the framing test checks the outcome is the same
  without the ``[DONE]``.

`EXPECTED` (``fixtures/captures_expected/openai-chat.json``) holds, per file,
what reading the file says the Response must be by the spec
(``/work/shared/specs/llm-chat-openaicommon.txt``, STREAM TERMINATION
CONTRACT). Where the library is wrong today, `BUGS` names the fields that are
wrong: that case is a strict xfail whose only accepted failure is a mismatch in
those fields and no others (`KnownBug`), so a regression in the same file still
fails loudly, and the fix turns it into an XPASS (red)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.response import Response
from llmchat.testing import Reply, ScriptedServer, Write
from llmchat.testing.script import Framing

from ..support.paths import CAPTURES_DIR
from . import support as shared

CAPTURES = CAPTURES_DIR / "openai-chat"
PROVENANCE = CAPTURES / "PROVENANCE.md"
HI = [{"role": "user", "content": "Hi"}]
SETTLE_GUARD = 120.0  # a hang guard only: every stream here ends on [DONE] or a close


# -- what a file must come to ---------------------------------------------------


@dataclass(frozen=True)
class Bug:
    """A library bug a capture shows: the Response fields it gets wrong, and why."""

    fields: frozenset[str]
    reason: str


EXPECTED = shared.load_expected("openai-chat")

BUGS: dict[str, Bug] = {}


def _params(names: list[str], *, known_bugs: bool) -> list[Any]:
    params: list[Any] = []
    for name in names:
        bug = BUGS.get(name) if known_bugs else None
        marks = (
            [pytest.mark.xfail(strict=True, raises=shared.KnownBug, reason=bug.reason)]
            if bug is not None
            else []
        )
        params.append(pytest.param(name, id=name, marks=marks))
    if not CAPTURES.is_dir():
        params.append(
            pytest.param(
                None,
                id="openai-chat-captures",
                marks=pytest.mark.skip(reason=f"{CAPTURES} absent: no openai-chat capture checked"),
            )
        )
    return params


def capture_params() -> list[Any]:
    """A param per capture (strict xfail where `BUGS` names it), or one visible skip."""
    return _params(shared.capture_names(CAPTURES), known_bugs=True)


def stream_params() -> list[Any]:
    """A param per stream capture, none xfailed: framing must not matter, bug or not."""
    return _params(
        [n for n in shared.capture_names(CAPTURES) if not n.endswith(".json")], known_bugs=False
    )


@cache
def recorded_status(name: str) -> int:
    """The HTTP status PROVENANCE.md records for `name`; 200 where it records none (G-data)."""
    for line in PROVENANCE.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| `{name}` |"):
            found = re.search(r"-> (\d{3})\]", line)
            return int(found.group(1)) if found else 200
    raise LookupError(f"{name} has no row in {PROVENANCE}")


def sse_events(name: str, *, done: bool = True) -> list[bytes]:
    """The stream body of a capture as events, bytes exact; their concatenation is the body.

    An ``.sse.txt`` file is cut after each blank line; an ``.sse-data.ndjson``
    file's lines become ``data:`` frames, then ``data: [DONE]`` when `done`.
    """
    data = (CAPTURES / name).read_bytes()
    if name.endswith(".sse-data.ndjson"):
        frames = [b"data: " + line + b"\n\n" for line in data.split(b"\n") if line.strip()]
        return [*frames, b"data: [DONE]\n\n"] if done else frames
    return [event for event in re.split(rb"(?<=\n\n)", data) if event]


def stream_reply(name: str, framing: Framing, *, done: bool = True) -> Reply:
    steps = [Write(event) for event in sse_events(name, done=done)]
    return Reply(200, {"Content-Type": "text/event-stream"}, framing=framing, steps=steps)


def run(
    server: ScriptedServer, name: str, framing: Framing = "chunked", done: bool = True
) -> Response:
    """Serve capture `name` once and return the settled Response."""
    backend = OpenAICommon(server.url)
    if name.endswith(".json"):
        server.push(Reply(recorded_status(name), None, (CAPTURES / name).read_bytes()))
        response = backend.chat_completion(HI)
    else:
        server.push(stream_reply(name, framing, done=done))
        response = backend.chat_completion_stream(HI).wait(SETTLE_GUARD)
    assert response.is_done, f"{name}: the Response never settled"
    return response


# -- an independent reading of the texts --------------------------------------------


def _payloads(name: str) -> list[dict[str, Any]]:
    """The JSON objects of a stream capture's data frames, in order, [DONE] left out."""
    text = (CAPTURES / name).read_text(encoding="utf-8")
    if name.endswith(".sse-data.ndjson"):
        return [json.loads(line) for line in text.split("\n") if line.strip()]
    out = []
    for event in text.split("\n\n"):
        data = "\n".join(
            line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")
        )
        if data and data != "[DONE]":
            out.append(json.loads(data))
    return out


def _part_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_part_text(part.get("text")) for part in value if isinstance(part, dict))
    return ""


@cache
def wire_texts(name: str) -> tuple[str, str]:
    """`(answer, reasoning)` as the file says them, read without the library.

    Streams: choice 0's deltas up to and including the first finish chunk;
    string content, or a list of parts (``thinking`` parts are reasoning);
    ``reasoning_content``, else ``reasoning``.
    """
    if name.endswith(".json"):
        body = json.loads((CAPTURES / name).read_text(encoding="utf-8"))
        message = (body.get("choices") or [{}])[0].get("message") or {}
        reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
        return _part_text(message.get("content")), reasoning
    answer: list[str] = []
    reasoning_parts: list[str] = []
    for payload in _payloads(name):
        choices = payload.get("choices") or []
        if not choices:
            continue
        delta = choices[0].get("delta") or {}
        content = delta.get("content")
        if isinstance(content, list):
            for part in content:
                if part.get("type") == "thinking":
                    reasoning_parts.append(_part_text(part.get("thinking")))
                else:
                    answer.append(_part_text(part.get("text")))
        else:
            answer.append(_part_text(content))
        reasoning_parts.append(_part_text(delta.get("reasoning_content") or delta.get("reasoning")))
        if choices[0].get("finish_reason") not in (None, "", "null"):
            break
    return "".join(answer), "".join(reasoning_parts)


# -- comparing ---------------------------------------------------------------------


FIELDS = shared.snapshot_fields("openai-chat")
"""The Response fields a capture decides."""


def wrong_fields(name: str, expect: Any, got: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """`{field: (expected, actual)}` for every field where the Response is not `expect`."""
    wire_msg, wire_reasoning = wire_texts(name)
    want: dict[str, Any] = {
        "is_success": expect.is_success,
        "error_class": expect.error_class,
        "error_status": expect.error_status,
        "err": expect.err,
        "tool_calls": list(expect.tool_calls),
        "finish_reason": expect.finish_reason,
        # No capture here has a reason the library rewrites (stop + calls, a hook).
        "provider_finish_reason": expect.finish_reason,
        "prompt_tokens": expect.prompt_tokens,
        "completion_tokens": expect.completion_tokens,
        "total_tokens": expect.total_tokens,
        "cached_tokens": expect.cached_tokens,
        "reasoning_tokens": expect.reasoning_tokens,
        "citations": None if expect.citations is None else list(expect.citations),
        "model": expect.model,
        "id": expect.id,
        "dropped_frames": expect.dropped_frames,
    }
    out = shared.mismatches(want, got)
    if not shared.text_ok(expect.msg, got["msg"], wire_msg):
        out["msg"] = (expect.msg, got["msg"])
    if not shared.text_ok(expect.reasoning_text, got["reasoning_text"], wire_reasoning):
        out["reasoning_text"] = (expect.reasoning_text, got["reasoning_text"])
    return out


# -- the tests ---------------------------------------------------------------------


def test_every_capture_has_an_expectation() -> None:
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} absent: no openai-chat capture checked")
    assert set(EXPECTED) == set(shared.capture_names(CAPTURES))
    assert set(BUGS) <= set(EXPECTED)


def test_long_expectations_match_the_wire() -> None:
    """Every `Long` in the table is the file's own text, checked without the library.

    So a wrong table entry fails here, not as a library bug in `test_capture`.
    """
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} absent: no openai-chat capture checked")
    for name, expect in EXPECTED.items():
        for want, wire in zip((expect.msg, expect.reasoning_text), wire_texts(name), strict=True):
            if isinstance(want, shared.Long):
                assert want.cut(wire) == want.astuple(), name


@pytest.mark.parametrize("name", capture_params())
def test_capture(server: ScriptedServer, name: str | None) -> None:
    assert name is not None
    if name not in EXPECTED:
        pytest.fail(f"{name}: a capture with no EXPECTED entry")
    response = run(server, name)
    got = shared.snapshot(response, FIELDS)
    shared.assert_chunks_replay(response)
    bug = BUGS.get(name)
    wrong = wrong_fields(name, EXPECTED[name], got)
    shared.fail_or_known_bug(name, wrong, None if bug is None else bug.fields)


@pytest.mark.parametrize("name", stream_params())
def test_chunked_and_close_delimited_agree(server: ScriptedServer, name: str | None) -> None:
    """The same events, chunked or close-delimited, give the same Response."""
    assert name is not None
    chunked = shared.snapshot(run(server, name, "chunked"), FIELDS)
    assert shared.snapshot(run(server, name, "close"), FIELDS) == chunked
    if name.endswith(".sse-data.ndjson"):
        # The [DONE] this test appends decides nothing: each file has a finish reason.
        assert shared.snapshot(run(server, name, "close", done=False), FIELDS) == chunked
        assert shared.snapshot(run(server, name, "chunked", done=False), FIELDS) == chunked
