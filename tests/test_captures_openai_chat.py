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

`EXPECTED` holds, per file, what reading the file says the Response must be
by the spec (``/work/shared/specs/llm-chat-openaicommon.txt``, STREAM
TERMINATION CONTRACT). Where the library is wrong today, `BUGS` names the
fields that are wrong: that case is a strict xfail whose only accepted failure
is a mismatch in those fields and no others (`KnownBug`), so a regression in
the same file still fails loudly, and the fix turns it into an XPASS (red).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.response import Response
from llmchat.testing import Reply, ScriptedServer, Write
from llmchat.testing.script import Framing

from .capture_support import Long
from .conftest import CAPTURES_DIR

CAPTURES = CAPTURES_DIR / "openai-chat"
PROVENANCE = CAPTURES / "PROVENANCE.md"
HI = [{"role": "user", "content": "Hi"}]
SETTLE_GUARD = 120.0  # a hang guard only: every stream here ends on [DONE] or a close


# -- what a file must come to ---------------------------------------------------


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]
    id: str


@dataclass(frozen=True)
class Expect:
    """The right Response for one capture; counts are None where the file reports none."""

    is_success: bool
    finish_reason: str | None
    msg: str | Long = ""
    reasoning_text: str | Long | None = None
    error_class: str | None = None
    error_status: int | None = None
    err: str | None = None
    tool_calls: tuple[Call, ...] = ()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    citations: tuple[str, ...] | None = None
    model: str | None = None
    id: str | None = None
    dropped_frames: int = 0


@dataclass(frozen=True)
class Bug:
    """A library bug a capture shows: the Response fields it gets wrong, and why."""

    fields: frozenset[str]
    reason: str


PERPLEXITY_CITATIONS = (
    "https://populationstat.com/united-states/san-francisco",
    "https://en.wikipedia.org/wiki/San_Francisco",
    "https://fred.stlouisfed.org/graph/?g=4K5j",
    "https://www.california-demographics.com/cities_by_population",
    "https://worldpopulationreview.com/us-cities/california/san-francisco",
    "https://worldpopulationreview.com/us-counties/california/san-francisco-county",
    "https://www.worldometers.info/world-population/us-population/",
)

EXPECTED: dict[str, Expect] = {
    # [DONE] with no finish reason ever sent: success by the spec (case 1), and the
    # one call (sent twice, arguments "" then "{}") is whole.
    "llm_openrouter_novita_kimi_tool_stream_a.sse.txt": Expect(
        is_success=True,
        finish_reason=None,
        tool_calls=(Call("llm_version", {}, "0"),),
        prompt_tokens=57,
        completion_tokens=17,
        total_tokens=74,
        cached_tokens=0,
        reasoning_tokens=0,
        model="moonshotai/kimi-k2",
        id="gen-1753242299-QZRAt5HJHd1ptY8sdS0s",
    ),
    "openllmetry_mistral_stream.sse.txt": Expect(
        is_success=True,
        finish_reason="stop",
        msg=Long(
            297,
            "Here's a light-hearted joke that combine",
            " hope this brings a smile to your face.)",
        ),
        prompt_tokens=11,
        completion_tokens=80,
        total_tokens=91,
        model="mistral-tiny",
        id="6dc321029f5d4aa5899c1b38c9657a61",
    ),
    # "eos" is not an OpenAI finish reason: the spec's own example of one a
    # subclass must reconcile; OpenAICommon fails it as unknown.
    "openllmetry_together_chat_eos.json": Expect(
        is_success=False,
        finish_reason="eos",
        error_class="response",
        err="Unknown finish reason: eos",
        msg=Long(
            115,
            " Why don't we ever hear secrets at a Ope",
            " an ex-spy place! (I'll show myself out)",
        ),
        prompt_tokens=18,
        completion_tokens=35,
        total_tokens=53,
        model="mistralai/Mixtral-8x7B-Instruct-v0.1",
        id="88fa668fac30bb19-MXP",
    ),
    "pyai_crusoe_stream.sse.txt": Expect(
        is_success=True,
        finish_reason="stop",
        msg="1, 2, 3, 4, 5",
        prompt_tokens=46,
        completion_tokens=14,
        total_tokens=60,
        cached_tokens=0,
        model="meta-llama/Llama-3.3-70B-Instruct",
        id="chatcmpl-bcfbe349402eb3d2",
    ),
    "pyai_deepseek_reasoning_stream.sse.txt": Expect(
        is_success=True,
        finish_reason="stop",
        msg="Hello there! \N{SMILING FACE WITH SMILING EYES} How can I help you today?",
        reasoning_text=Long(
            882,
            'Hmm, the user just said "Hello". It\'s a ',
            "not reply further - and that's okay too.",
        ),
        prompt_tokens=6,
        completion_tokens=212,
        total_tokens=218,
        cached_tokens=0,
        reasoning_tokens=198,
        model="deepseek-reasoner",
        id="33be18fc-3842-486c-8c29-dd8e578f7f20",
    ),
    "pyai_groq_error_400_tool_use_failed.json": Expect(
        is_success=False,
        finish_reason=None,
        error_class="http",
        error_status=400,
        err="Tool call validation failed: tool call validation failed: parameters for tool "
        "get_something_by_name did not match schema: errors: [missing properties: 'name', "
        "additionalProperties 'foo' not allowed]",
    ),
    "pyai_groq_tool_calls_stream.sse.txt": Expect(
        is_success=True,
        finish_reason="tool_calls",
        reasoning_text='We need to call the function with correct parameter "name". '
        'Provide a name, e.g., "example".',
        tool_calls=(
            Call(
                "get_something_by_name",
                {"name": "example"},
                "fc_bfb39741-3748-4def-9886-a93fc9c64a90",
            ),
        ),
        prompt_tokens=304,
        completion_tokens=49,
        total_tokens=353,
        reasoning_tokens=23,
        model="openai/gpt-oss-120b",
        id="chatcmpl-e35442a8-12c0-4fb4-8be4-0e51727ce7b7",
    ),
    # Usage only inside x_groq (not the OpenAI usage block the spec lifts): no counts.
    # The id changes on every chunk; the Response keeps the first one.
    "pyai_groq_web_search_stream.sse.txt": Expect(
        is_success=True,
        finish_reason="stop",
        msg=Long(
            200,
            "The weather in San Francisco today is pa",
            "-22 km/h and a humidity level of 90-94%.",
        ),
        reasoning_text=Long(
            6255,
            "<think>\nTo find the current weather in S",
            "rature of 61\N{DEGREE SIGN}F (17\N{DEGREE SIGN}C) and high humidity.",
        ),
        model="groq/compound",
        id="chatcmpl-03ea1ed2-c2dc-4f8d-ba51-54e08ca9287c",
    ),
    # delta.content is a list of parts; the thinking parts' text is reasoning.
    "pyai_mistral_thinking_stream.sse.txt": Expect(
        is_success=True,
        finish_reason="stop",
        msg=Long(
            607,
            "To cross the street safely, follow these",
            "e steps, you can ensure a safe crossing.",
        ),
        reasoning_text=Long(
            421,
            "Okay, the user is asking how to cross th",
            "ation into a clear and concise response.",
        ),
        prompt_tokens=10,
        completion_tokens=232,
        total_tokens=242,
        model="magistral-medium-latest",
        id="9f9d90210f194076abeee223863eaaf0",
    ),
    "pyai_ollama_local_v1_json_schema.json": Expect(
        is_success=True,
        finish_reason="stop",
        msg='{ "city": "Paris", "country": "France" }',
        reasoning_text=Long(
            508,
            "Okay, the user is asking for the capital",
            "Yep, I'm confident the answer is Paris.\n",
        ),
        prompt_tokens=136,
        completion_tokens=15,
        total_tokens=151,
        model="qwen3:0.6b",
        id="chatcmpl-150",
    ),
    "pyai_openrouter_error_429.json": Expect(
        is_success=False,
        finish_reason=None,
        error_class="http",
        error_status=429,
        err="Provider returned error",
    ),
    # finish_reason length (twice), then an in-band error frame with the usage: a
    # failure with the provider's message; the reasoning of the finish chunk counts.
    "pyai_openrouter_stream_error_length.sse.txt": Expect(
        is_success=False,
        finish_reason="length",
        error_class="response",
        err="Token limit reached",
        reasoning_text="We need to respond to a greeting. The user",
        prompt_tokens=43,
        completion_tokens=10,
        total_tokens=53,
        cached_tokens=0,
        reasoning_tokens=11,
        model="minimax/minimax-m2:free",
        id="gen-1762179802-UN8pkJI4AGZvryk0kFnb",
    ),
    "pyai_openrouter_streaming_reasoning.sse.txt": Expect(
        is_success=True,
        finish_reason="stop",
        msg="2 + 2 = 4",
        reasoning_text="This is a simple arithmetic question. 2+2 equals 4.",
        prompt_tokens=43,
        completion_tokens=36,
        total_tokens=79,
        cached_tokens=0,
        reasoning_tokens=13,
        model="anthropic/claude-sonnet-4.5",
        id="gen-1765226419-AGrwjunAftQIAgweibL8",
    ),
    # delta.annotations (url_citation) are not lifted: `citations` is the top-level
    # list (Perplexity's), and nothing specifies an annotation's place on a Response.
    "pyai_openrouter_web_search_annotations.sse.txt": Expect(
        is_success=True,
        finish_reason="stop",
        msg="The URL for Pydantic AI's GitHub repository is:  \n\n"
        "https://github.com/pydantic/pydantic-ai",
        prompt_tokens=2317,
        completion_tokens=53,
        total_tokens=2370,
        cached_tokens=0,
        reasoning_tokens=0,
        model="deepseek/deepseek-chat",
        id="gen-1786680764-gY2YTdjLLLQA6Cd1Wa6J",
    ),
    "pyai_openrouter_web_search_usage.sse.txt": Expect(
        is_success=True,
        finish_reason="stop",
        msg="https://github.com/pydantic/pydantic-ai ",
        prompt_tokens=8174,
        completion_tokens=30,
        total_tokens=8204,
        cached_tokens=0,
        reasoning_tokens=0,
        model="openai/gpt-4.1-mini",
        id="gen-1786465029-CAkqUciXgQW34RmFaTck",
    ),
    # A literal "<think>" in content is content: only reasoning fields are reasoning.
    # Together's usage.cached_tokens (not prompt_tokens_details) is not read.
    "pyai_together_via_hf_max_tokens_length.json": Expect(
        is_success=False,
        finish_reason="length",
        error_class="response",
        err="Hit max tokens",
        msg=Long(
            450,
            '<think>\nHmm, the user just said "hello".',
            " \n\nKey goals in response: \n- Acknowledge",
        ),
        prompt_tokens=4,
        completion_tokens=100,
        total_tokens=104,
        model="deepseek-ai/DeepSeek-R1",
        id="oXUyQTv-28Eivz-9ce5a0296c7de93c",
    ),
    "pyai_zai_thinking_stream.sse.txt": Expect(
        is_success=True,
        finish_reason="stop",
        msg="4",
        reasoning_text=Long(
            2173,
            "\n1.  **Analyze the User's Request:** The",
            '\n\n7.  **Draft the final response:** "4".',
        ),
        prompt_tokens=13,
        completion_tokens=564,
        total_tokens=577,
        cached_tokens=0,
        reasoning_tokens=561,
        model="glm-4.7",
        id="202607010739425543ff9439144b2c",
    ),
    # The first frame (prompt_filter_results) has id "" and model "": neither is an id.
    "vercel_azure_model_router.sse-data.ndjson": Expect(
        is_success=True,
        finish_reason="stop",
        msg="Capital of Denmark.",
        prompt_tokens=15,
        completion_tokens=78,
        total_tokens=93,
        cached_tokens=0,
        reasoning_tokens=64,
        model="gpt-5-nano-2025-08-07",
        id="chatcmpl-CYPS1lijGoK8gd9lYzY3r9Sx50nbt",
    ),
    # The file has ONE finish chunk (PROVENANCE.md says two; upstream has one too).
    "vercel_mistral_incremental_tool_call.sse-data.ndjson": Expect(
        is_success=True,
        finish_reason="tool_calls",
        tool_calls=(
            Call(
                "webSearchTool",
                {"query": "current Berlin weather"},
                "chatcmpl-tool-9f149c74c42f265b",
            ),
        ),
        prompt_tokens=171,
        completion_tokens=14,
        total_tokens=185,
        cached_tokens=128,
        model="zai-glm-5-2",
        id="735e434874a24f68a2390b3cab149242",
    ),
    # Trimmed upstream: the text really is this short. Usage rides on every chunk.
    "vercel_perplexity_citations.sse-data.ndjson": Expect(
        is_success=True,
        finish_reason="stop",
        msg="The current population of **[2][3]",
        prompt_tokens=10,
        completion_tokens=336,
        total_tokens=346,
        citations=PERPLEXITY_CITATIONS,
        model="sonar",
        id="58cb9740-f356-49e9-b71e-a02a1376c1b9",
    ),
}

BUGS: dict[str, Bug] = {}


class KnownBug(AssertionError):
    """The Response differs from `EXPECTED` in exactly the fields `BUGS` names (or fewer)."""


# -- the files, served --------------------------------------------------------------


def capture_names() -> list[str]:
    if not CAPTURES.is_dir():
        return []
    return sorted(p.name for p in CAPTURES.iterdir() if p.is_file() and p.name != PROVENANCE.name)


def _params(names: list[str], *, known_bugs: bool) -> list[Any]:
    params: list[Any] = []
    for name in names:
        bug = BUGS.get(name) if known_bugs else None
        marks = (
            [pytest.mark.xfail(strict=True, raises=KnownBug, reason=bug.reason)]
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
    return _params(capture_names(), known_bugs=True)


def stream_params() -> list[Any]:
    """A param per stream capture, none xfailed: framing must not matter, bug or not."""
    return _params([n for n in capture_names() if not n.endswith(".json")], known_bugs=False)


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


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


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


def snapshot(response: Response) -> dict[str, Any]:
    """The Response fields a capture decides."""
    return {
        "is_success": response.is_success,
        "error_class": response.error_class,
        "error_status": response.error_status,
        "err": response.err,
        "msg": response.msg,
        "reasoning_text": response.reasoning_text,
        "tool_calls": [(c.name, c.arguments, c.id) for c in response.tool_calls],
        "finish_reason": response.finish_reason,
        "provider_finish_reason": response.provider_finish_reason,
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
        "total_tokens": response.total_tokens,
        "cached_tokens": response.cached_tokens,
        "reasoning_tokens": response.reasoning_tokens,
        "citations": response.citations,
        "model": response.model,
        "id": response.id,
        "dropped_frames": response.dropped_frames,
    }


def _text_ok(want: str | Long | None, got: Any, wire: str) -> bool:
    if not isinstance(want, Long):
        return bool(got == want)
    return want.matches(got, wire)


def mismatches(name: str, expect: Expect, got: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """`{field: (expected, actual)}` for every field where the Response is not `expect`."""
    wire_msg, wire_reasoning = wire_texts(name)
    want: dict[str, Any] = {
        "is_success": expect.is_success,
        "error_class": expect.error_class,
        "error_status": expect.error_status,
        "err": expect.err,
        "tool_calls": [(c.name, c.arguments, c.id) for c in expect.tool_calls],
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
    out = {key: (value, got[key]) for key, value in want.items() if got[key] != value}
    if not _text_ok(expect.msg, got["msg"], wire_msg):
        out["msg"] = (expect.msg, got["msg"])
    if not _text_ok(expect.reasoning_text, got["reasoning_text"], wire_reasoning):
        out["reasoning_text"] = (expect.reasoning_text, got["reasoning_text"])
    return out


# -- the tests ---------------------------------------------------------------------


def test_every_capture_has_an_expectation() -> None:
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} absent: no openai-chat capture checked")
    assert set(EXPECTED) == set(capture_names())
    assert set(BUGS) <= set(EXPECTED)


def test_long_expectations_match_the_wire() -> None:
    """Every `Long` in the table is the file's own text, checked without the library.

    So a wrong table entry fails here, not as a library bug in `test_capture`.
    """
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} absent: no openai-chat capture checked")
    for name, expect in EXPECTED.items():
        for want, wire in zip((expect.msg, expect.reasoning_text), wire_texts(name), strict=True):
            if isinstance(want, Long):
                assert (len(wire), wire[: len(want.head)], wire[-len(want.tail) :]) == (
                    want.length,
                    want.head,
                    want.tail,
                ), name


@pytest.mark.parametrize("name", capture_params())
def test_capture(server: ScriptedServer, name: str | None) -> None:
    assert name is not None
    if name not in EXPECTED:
        pytest.fail(f"{name}: a capture with no EXPECTED entry")
    response = run(server, name)
    got = snapshot(response)

    # What the Response replays chunk by chunk is what it says in aggregate.
    chunks = list(response)
    assert "".join(c.content for c in chunks) == got["msg"]
    assert "".join(c.thinking or "" for c in chunks) == (got["reasoning_text"] or "")
    assert [c for chunk in chunks for c in chunk.tool_calls or []] == response.tool_calls

    wrong = mismatches(name, EXPECTED[name], got)
    if not wrong:
        return
    report = "\n".join(f"  {key}: expected {w!r}, got {g!r}" for key, (w, g) in wrong.items())
    bug = BUGS.get(name)
    if bug is not None and wrong.keys() <= bug.fields:
        raise KnownBug(f"{name}: the known bug, still there:\n{report}")
    pytest.fail(f"{name}: the Response is not what the capture says:\n{report}")


@pytest.mark.parametrize("name", stream_params())
def test_chunked_and_close_delimited_agree(server: ScriptedServer, name: str | None) -> None:
    """The same events, chunked or close-delimited, give the same Response."""
    assert name is not None
    chunked = snapshot(run(server, name, "chunked"))
    assert snapshot(run(server, name, "close")) == chunked
    if name.endswith(".sse-data.ndjson"):
        # The [DONE] this test appends decides nothing: each file has a finish reason.
        assert snapshot(run(server, name, "close", done=False)) == chunked
        assert snapshot(run(server, name, "chunked", done=False)) == chunked
