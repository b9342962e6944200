"""Every OpenAI Responses wire capture through `OpenAIResponses`, over real sockets.

`/work/shared/captures/responses/` holds recorded bodies of real servers
(PROVENANCE.md says where each came from). Each is served by the loopback
`ScriptedServer`:

- ``.json``: a blocking body, byte for byte, with the HTTP status PROVENANCE.md
  records (``-> 400``, ``-> 429``), to `chat_completion` and to
  `chat_completion_stream` (a JSON answer to a stream request is read whole);
- ``.sse.txt``: the raw SSE body, one write per event, chunked and
  close-delimited; ``.sse-data.ndjson``: one ``data:`` payload per line, re-framed
  as ``data: <line>\\n\\n`` (the Responses protocol has no ``[DONE]``);
- every stream's final response object (``response.completed``/``failed``) is
  also served as the blocking body it would have been, and must agree.

`EXPECTED` says, per file, what its content shows; texts are also rebuilt from
the file without the library (`wire_texts`). A hypothesis test splits every
stream's bytes at arbitrary offsets through the pure stages (SSE decoder,
accumulator) and requires the very same chunks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat.backends.responses import OpenAIResponses
from llmchat.chunk import Chunk
from llmchat.dialects.responses import ResponsesDialect
from llmchat.pipeline.accumulate import Accumulator
from llmchat.response import Response
from llmchat.sse import SSEDecoder
from llmchat.testing import Reply, ScriptedServer, Write
from llmchat.testing.script import Framing

from .capture_support import Long
from .conftest import CAPTURES_DIR

CAPTURES = CAPTURES_DIR / "responses"
PROVENANCE = CAPTURES / "PROVENANCE.md"
HI = [{"role": "user", "content": "Hi"}]
SETTLE_GUARD = 60.0  # a hang guard only


@dataclass(frozen=True)
class Expect:
    is_success: bool
    finish_reason: str | None = "stop"
    provider_finish_reason: str | None = "completed"
    msg: str | Long = ""
    reasoning_text: str | Long | None = None
    error_class: str | None = None
    error_status: int | None = None
    err: str | None = None
    tool_calls: tuple[tuple[str, dict[str, Any], str], ...] = ()
    usage: tuple[int | None, ...] = (None, None, None, None, None)
    """prompt, completion, total, cached, reasoning tokens."""
    citations: tuple[str, ...] | None = None
    """The cited URLs, in order (`Response.citations` is a list of URL strings)."""
    model: str | None = None
    id: str | None = None
    parts: int = 0
    """How many reasoning parts come back for the next request."""


QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, read the docs: "
    "https://platform.openai.com/docs/guides/error-codes/api-errors."
)
FAILED = dict(is_success=False, error_class="response")

EXPECTED: dict[str, Expect] = {
    "codex_response_failed_context_length.sse.txt": Expect(
        **FAILED,  # type: ignore[arg-type]
        finish_reason="error",
        provider_finish_reason="failed",
        err="Your input exceeds the context window of this model. Please adjust your input "
        "and try again.",
        id="resp_5c66275b97b9baef1ed95550adb3b7ec13b17aafd1d2f11b",
    ),
    # background=true, streamed: queued, then in_progress, then an ordinary answer.
    "pyai_background_mode_stream.sse.txt": Expect(
        True,
        msg="2 + 2 equals 4.",
        usage=(15, 9, 24, 0, 0),
        model="gpt-4o-2024-08-06",
        id="resp_0da443d9ee8333600069950a0635d88196b2d9243b08e8cc01",
    ),
    # background=true, blocking: answered before it ran; llmchat does not poll.
    "pyai_background_queued.json": Expect(
        **FAILED,  # type: ignore[arg-type]
        finish_reason=None,
        provider_finish_reason=None,
        err="The response is queued: background mode is not supported (llmchat does not poll "
        "for a result; send the request without background=true)",
        model="gpt-4o-2024-08-06",
        id="resp_06a562f31ab7703300698b9df109c481979ebf760b2ff5fc75",
    ),
    "pyai_deepseek_responses_function_tool_stream.sse.txt": Expect(
        True,
        finish_reason="tool_calls",
        reasoning_text="The user asks about temperature in Tokyo. I'll call the tool.",
        tool_calls=(("get_temperature", {"city": "Tokyo"}, "call_00_xjY8Z2BvSlzgEmmw0DtH0464"),),
        usage=(366, 59, 425, 256, 14),
        model="deepseek-v4-flash",
        id="1235b7ba-fdc9-4a1c-bfe4-6137c207baf3",
        parts=1,
    ),
    "pyai_deepseek_responses_text.json": Expect(
        True,
        msg="The capital of France is Paris.",
        reasoning_text="We need answer capital of France.",
        usage=(90, 15, 105, 0, 7),
        model="deepseek-v4-flash",
        id="2e532992-cac2-41fd-80b5-c98ad79215f3",
        parts=1,
    ),
    "pyai_error_400_nonstream.json": Expect(
        False,
        None,
        None,
        error_class="http",
        error_status=400,
        err="Item 'rs_68c42de022c881948db7ed1cc2529f2e0202c9ad459e0d23' of type 'reasoning' "
        "was provided without its required following item.",
    ),
    # file_search (outside the issue): the text, its file_citation is no URL citation.
    "pyai_file_search_stream.sse.txt": Expect(
        True,
        msg="The capital of France is Paris.",
        usage=(1177, 37, 1214, 0, 0),
        model="gpt-4o-2024-08-06",
        id="resp_006dcb10dc68b990006931d756c6fc819ba28a90e19a504ee0",
    ),
    "pyai_function_call_stream.sse.txt": Expect(
        True,
        finish_reason="tool_calls",
        tool_calls=(("get_capital", {"country": "France"}, "call_kL0PCQV7M2WMoVX8V8OtYSAL"),),
        usage=(255, 16, 271, 0, 0),
        model="gpt-4o-2024-08-06",
        id="resp_67e554a155508191900ee113293c4c830794405d35281ae2",
    ),
    # A failed mcp_call item (outside the issue) is ignored; the answer is the message.
    "pyai_mcp_connector_failed_call.json": Expect(
        True,
        msg="I\u2019m sorry, I\u2019m having trouble accessing your calendar right now. "
        "Would you like me to try again?",
        usage=(1065, 760, 1825, 0, 576),
        model="o4-mini-2025-04-16",
        id="resp_0558010cf1416a490068faa0f945bc81a0b6a6dfb7391030d5",
        parts=3,
    ),
    # Data-only SSE, ": OPENROUTER PROCESSING" comments, [DONE] after the end, and a
    # reasoning item re-numbered in the final output: one part, not two.
    "pyai_openrouter_raw_cot_stream.sse.txt": Expect(
        True,
        msg="4",
        reasoning_text='The user asks: "What is 2+2?" They expect a straightforward answer: 4. '
        "Just answer 4.",
        usage=(78, 37, 115, 0, 22),
        model="openai/gpt-oss-20b",
        id="gen-1764265411-Fu1iEX7h5MRWiL79lb94",
        parts=1,
    ),
    "pyai_reasoning_function_call_usage_stream.sse.txt": Expect(
        True,
        finish_reason="tool_calls",
        tool_calls=(("final_result", {"result": 6666}, "call_CWXgs68YprAjp6t0371hiPOI"),),
        usage=(53, 469, 522, 0, 448),
        model="gpt-5-2025-08-07",
        id="resp_0050471a34b36ae60068c97b94a480819587a9d70cf2979b33",
        parts=1,
    ),
    "pyai_reasoning_summary_stream.sse.txt": Expect(
        True,
        msg=Long(
            1251, "I'm not a road safety professional, but", "specific to your area. Stay safe!"
        ),
        reasoning_text=Long(
            2028, "**Providing street crossing instructions**\n\n", "clear and easy to understand!"
        ),
        usage=(13, 1680, 1693, 0, 1408),
        model="o3-mini-2025-01-31",
        id="resp_68c42d0fb418819dbfa579f69406b49508fbf9b1584184ff",
        parts=1,
    ),
    "pyai_text_stream_after_tool.sse.txt": Expect(
        True,
        msg="The capital of France is Paris.",
        usage=(278, 9, 287, 0, 0),
        model="gpt-4o-2024-08-06",
        id="resp_67e554a21aa88191b65876ac5e5bbe0406c52f0e511c76ed",
    ),
    "pyai_web_search_annotations_stream.sse.txt": Expect(
        True,
        msg=Long(
            162, "The tallest mountain in Alberta is **Mount Columbia**", "utm_source=openai))"
        ),
        usage=(12243, 140, 12383, 0, 100),
        citations=("https://www.britannica.com/place/Mount-Columbia?utm_source=openai",),
        model="gpt-5.2-2025-12-11",
        id="resp_0a4bc5e23769d65c00696d5e657050819db65effaff8424729",
    ),
    # web_search_call items (outside the issue) ignored; their reasoning items kept.
    "pyai_web_search_stream.sse.txt": Expect(
        True,
        msg=Long(212, "San Francisco weather today (Tuesday, September 16, 2025)", "evening. "),
        usage=(9463, 582, 10045, 8320, 512),
        model="gpt-5-2025-08-07",
        id="resp_00a60507bf41223d0068c9d2fbf93481a0ba2a7796ae2cab4c",
        parts=2,
    ),
    "vercel_lmstudio_open_responses_basic.json": Expect(
        True,
        msg="text content",
        reasoning_text="reasoning content",
        usage=(136, 3677, 3813, 0, 2456),
        model="mistralai/ministral-3-14b-reasoning",
        id="resp_551daeb1a02e4fcaf9ab76ed29f821a6db2df1883e55652c",
        parts=1,
    ),
    "vercel_lmstudio_open_responses_basic.sse-data.ndjson": Expect(
        True,
        msg=Long(1384, "## The Festival of Whispering Leaves", "through storytelling around fire"),
        usage=(31, 282, 313, 30, 0),
        model="gemma-7b-it",
        id="resp_604f426346767f2cd7f98c793d9cfd27cba9ef834509019c",
    ),
    "vercel_openai_error_429_insufficient_quota.json": Expect(
        False, None, None, error_class="http", error_status=429, err=QUOTA
    ),
    # The `error` event is the end: the response.failed after it is not read.
    "vercel_openai_stream_error_then_failed.sse-data.ndjson": Expect(
        **FAILED,  # type: ignore[arg-type]
        finish_reason=None,
        provider_finish_reason=None,
        err=QUOTA,
        model="gpt-5-nano-2025-08-07",
        id="resp_05500b38c2cd9bfc00691c7c9d222481a3b595421266dab424",
    ),
    # A summary-only reasoning item (no encrypted_content, no text) cannot go back: no part.
    "vercel_xai_responses_reasoning_summary.sse-data.ndjson": Expect(
        True,
        msg=Long(2849, "### Overview of Sonoran Cuisine", "Tucson or markets in Hermosillo."),
        reasoning_text=Long(766, 'First, the question is: "What is specifically notable', "."),
        usage=(216, 923, 1139, 192, 323),
        model="grok-code-fast-1",
        id="bf3b2b34-79d4-a45c-7be8-d1e5f96386c2",
    ),
}


# -- the files -------------------------------------------------------------------------


def capture_names() -> list[str]:
    if not CAPTURES.is_dir():
        return []
    return sorted(p.name for p in CAPTURES.iterdir() if p.is_file() and p.name != PROVENANCE.name)


def _params(names: list[str]) -> list[Any]:
    if not CAPTURES.is_dir():
        reason = f"{CAPTURES} absent: no responses capture checked"
        return [pytest.param(None, id="responses-captures", marks=pytest.mark.skip(reason=reason))]
    return [pytest.param(name, id=name) for name in names]


STREAMS = [n for n in capture_names() if not n.endswith(".json")]


@cache
def recorded_status(name: str) -> int:
    for line in PROVENANCE.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| `{name}` |"):
            found = re.search(r"-> (\d{3})\]", line) or re.search(r"HTTP (\d{3}) error", line)
            return int(found.group(1)) if found else 200
    raise LookupError(f"{name} has no row in {PROVENANCE}")


def sse_events(name: str) -> list[bytes]:
    data = (CAPTURES / name).read_bytes()
    if name.endswith(".sse-data.ndjson"):
        return [b"data: " + line + b"\n\n" for line in data.split(b"\n") if line.strip()]
    return [event for event in re.split(rb"(?<=\n\n)", data) if event]


def payloads(name: str) -> list[dict[str, Any]]:
    """The JSON objects of a stream capture's data frames, in order (not via the library)."""
    out = []
    for event in sse_events(name):
        lines = event.decode("utf-8").split("\n")
        data = "\n".join(l[5:].removeprefix(" ") for l in lines if l.startswith("data:"))  # noqa: E741
        if data and data != "[DONE]":
            out.append(json.loads(data))
    return out


def final_body(name: str) -> dict[str, Any] | None:
    """A stream's last response object (completed, failed …): its blocking twin."""
    ends = [p["response"] for p in payloads(name) if p.get("type") in _ENDS]
    return dict(ends[-1]) if ends else None


_ENDS = ("response.completed", "response.incomplete", "response.failed")


@cache
def wire_texts(name: str) -> tuple[str, str]:
    """`(answer, reasoning)` as the file says them, read without the library."""
    if name.endswith(".json"):
        body = json.loads((CAPTURES / name).read_text(encoding="utf-8"))
        answer, reasoning = [], []
        for item in body.get("output") or []:
            for part in item.get("content") or []:
                if item["type"] == "message" and part.get("type") == "output_text":
                    answer.append(part["text"])
                elif item["type"] == "reasoning":
                    reasoning.append(part["text"])
        return "".join(answer), "\n\n".join(reasoning)
    answer, reasoning, last = [], [], None
    for p in payloads(name):
        kind = p.get("type", "")
        if kind == "response.output_text.delta":
            answer.append(p["delta"])
        elif kind.startswith("response.reasoning") and kind.endswith("text.delta"):
            segment = (p.get("item_id"), p.get("summary_index"), p.get("content_index"))
            reasoning.append(("\n\n" if last not in (None, segment) else "") + p["delta"])
            last = segment
    return "".join(answer), "".join(reasoning)


# -- serving and comparing ----------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


def run(server: ScriptedServer, reply: Reply, *, stream: bool) -> Response:
    with OpenAIResponses(server.url, api_key="sk-test") as backend:
        server.push(reply)
        if stream:
            response = backend.chat_completion_stream(HI).wait(SETTLE_GUARD)
        else:
            response = backend.chat_completion(HI)
    assert response.is_done, "the Response never settled"
    return response


def stream_reply(name: str, framing: Framing) -> Reply:
    steps = [Write(event) for event in sse_events(name)]
    return Reply(200, {"Content-Type": "text/event-stream"}, framing=framing, steps=steps)


def snapshot(r: Response) -> dict[str, Any]:
    return {
        "is_success": r.is_success,
        "error_class": r.error_class,
        "error_status": r.error_status,
        "err": r.err,
        "finish_reason": r.finish_reason,
        "provider_finish_reason": r.provider_finish_reason,
        "msg": r.msg,
        "reasoning_text": r.reasoning_text,
        "tool_calls": [(c.name, c.arguments, c.id) for c in r.tool_calls],
        "usage": (
            r.prompt_tokens,
            r.completion_tokens,
            r.total_tokens,
            r.cached_tokens,
            r.reasoning_tokens,
        ),
        "citations": r.citations,
        "model": r.model,
        "id": r.id,
        "parts": len(r.reasoning_parts or []),
        "dropped_frames": r.dropped_frames,
    }


def check(name: str, got: dict[str, Any]) -> None:
    want = EXPECTED[name]
    wire_msg, wire_reasoning = wire_texts(name)
    expected = {
        "is_success": want.is_success,
        "error_class": want.error_class,
        "error_status": want.error_status,
        "err": want.err,
        "finish_reason": want.finish_reason,
        "provider_finish_reason": want.provider_finish_reason,
        "tool_calls": list(want.tool_calls),
        "usage": want.usage,
        "citations": None if want.citations is None else list(want.citations),
        "model": want.model,
        "id": want.id,
        "parts": want.parts,
        "dropped_frames": 0,
    }
    wrong = {k: (v, got[k]) for k, v in expected.items() if got[k] != v}
    for key, value, wire in (
        ("msg", want.msg, wire_msg),
        ("reasoning_text", want.reasoning_text, wire_reasoning or None),
    ):
        if isinstance(value, Long):
            ok = value.matches(got[key], wire)
        else:
            ok = got[key] == value and (value or None) == (wire or None)
        if not ok:
            wrong[key] = (value, got[key])
    assert not wrong, f"{name}: {wrong}"


# -- the tests -----------------------------------------------------------------------------


def test_every_capture_has_an_expectation() -> None:
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} absent")
    assert set(EXPECTED) == set(capture_names())


@pytest.mark.parametrize("name", _params(capture_names()))
def test_capture_decodes_to_what_it_shows(server: ScriptedServer, name: str | None) -> None:
    assert name is not None
    if name.endswith(".json"):
        reply = Reply(recorded_status(name), None, (CAPTURES / name).read_bytes())
        got = [run(server, reply, stream=False), run(server, reply, stream=True)]
    else:
        got = [run(server, stream_reply(name, f), stream=True) for f in ("chunked", "close")]
    for response in got:
        check(name, snapshot(response))
        chunks = list(response)
        assert "".join(c.content for c in chunks) == response.msg
        assert "".join(c.thinking or "" for c in chunks) == (response.reasoning_text or "")
        assert [c for chunk in chunks for c in chunk.tool_calls or []] == response.tool_calls


@pytest.mark.parametrize("name", _params(STREAMS))
def test_a_stream_and_its_final_object_as_a_body_agree(
    server: ScriptedServer, name: str | None
) -> None:
    assert name is not None
    body = final_body(name)
    assert body is not None, f"{name}: no final response object"
    streamed = snapshot(run(server, stream_reply(name, "chunked"), stream=True))
    blocking = snapshot(run(server, Reply.json(body), stream=False))
    if any(p.get("type") == "error" for p in payloads(name)):
        # The error event ended the stream; the body is the response.failed after it.
        for key in ("finish_reason", "provider_finish_reason"):
            streamed.pop(key), blocking.pop(key)
    assert blocking == streamed


def chunks_of(pieces: list[bytes]) -> list[Chunk]:
    """The chunks the pure stages make of a body delivered in `pieces`."""
    decoder = SSEDecoder()
    acc = Accumulator(ResponsesDialect())
    out: list[Chunk] = []
    for piece in pieces:
        for event in decoder.feed(piece):
            out += acc.feed_event(event)
    for event in decoder.flush():
        out += acc.feed_event(event)
    return out


@pytest.mark.parametrize("name", _params(STREAMS))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_split_of_a_stream_gives_the_same_chunks(name: str | None, data: st.DataObject) -> None:
    assert name is not None
    body = b"".join(sse_events(name))
    whole = chunks_of([body])
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=12), label="cuts"))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert chunks_of(pieces) == whole
