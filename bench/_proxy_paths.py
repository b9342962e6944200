"""The proxy bench's client paths: the upstream's script, every client, the raw readers.

`Contenders` builds every client once; `stream[name]()` and `short[name]()`
return the text read, which `checked` compares on every call. The raw readers
(`face_readers`) read each proxy face with `requests` and a minimal parse, to
isolate the proxy's own cost from its clients'.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from _report import NOT_INSTALLED, close_litellm, litellm_stream
from bench_stream import raw_content, raw_frames

__all__ = [
    "DELTAS",
    "DRAIN",
    "MODEL",
    "SHORT_TEXT",
    "WAIT",
    "WRITE_SIZE",
    "Contenders",
    "checked",
    "face_readers",
    "litellm_idle",
    "upstream_script",
]

MODEL = "loopback"
SYSTEM = "You are a terse assistant."
LONG_PROMPT = "Tell me a long story."
SHORT_PROMPT = "Say ok."
SHORT_TEXT = "ok"
DELTAS = 1_000
WRITE_SIZE = 65_536
MAX_TOKENS = 4_096
"""Anthropic requires `max_tokens`; every client sends it, above the stream's length."""
WAIT = 10.0
HEADERS = {"Content-Type": "application/json"}


def messages(prompt: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def chat_body(prompt: str, *, stream: bool) -> dict[str, Any]:
    """An OpenAI chat request body for `prompt`; streamed with the usage event when `stream`."""
    body: dict[str, Any] = {"model": MODEL, "messages": messages(prompt), "max_tokens": MAX_TOKENS}
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    return body


def responses_body_for(prompt: str) -> dict[str, Any]:
    """A Responses API request for `prompt` (the system text as ``instructions``)."""
    return {
        "model": MODEL,
        "instructions": SYSTEM,
        "input": prompt,
        "max_output_tokens": MAX_TOKENS,
    }


# -- the upstream -----------------------------------------------------------------


def upstream_script(long_reply: Any) -> Callable[[Any], Any]:
    """The ScriptedServer's responder: the long stream for the long prompt, else "ok"."""
    from llmchat.testing import ChatResponder

    short = ChatResponder(SHORT_TEXT, model=MODEL)
    marker = LONG_PROMPT.encode()

    def respond(request: Any) -> Any:
        return long_reply if marker in request.body else short(request)

    return respond


# -- raw readers ------------------------------------------------------------------


def ndjson_lines(response: Any) -> Iterator[bytes]:
    """Split an NDJSON body (the Ollama face) into lines, `read1` at a time."""
    read1 = response.raw.read1
    rest = b""
    while True:
        data = read1(WRITE_SIZE)
        if not data:
            if rest.strip():
                yield rest
            return
        *lines, rest = (rest + data).split(b"\n")
        yield from lines


def sse_payloads(response: Any) -> Iterator[tuple[bytes, bytes]]:
    """Split an SSE body into `(event name, data payload)` frames, `read1` at a time."""
    read1 = response.raw.read1
    rest = b""
    while True:
        data = read1(WRITE_SIZE)
        if not data:
            return
        *frames, rest = (rest + data).split(b"\n\n")
        for frame in frames:
            name, payload = b"", b""
            for line in frame.split(b"\n"):
                if line.startswith(b"event: "):
                    name = line[7:]
                elif line.startswith(b"data: "):
                    payload = line[6:]
            yield name, payload


def raw_chat_reader(session: Any, url: str) -> Callable[[], str]:
    """The raw floor's reader of an OpenAI chat stream at `url` (the upstream or the relay)."""
    body = json.dumps(chat_body(LONG_PROMPT, stream=True)).encode()

    def read() -> str:
        with session.post(url, data=body, headers=HEADERS, stream=True) as r:
            texts = [raw_content(payload) for payload in raw_frames(r)]
        return "".join(text for text in texts if text)

    return read


def face_readers(session: Any, proxy: str) -> dict[str, Callable[[], str]]:
    """Minimal `requests` readers of the proxy's faces, for the long prompt."""
    ollama_url, anthropic_url = proxy + "/api/chat", proxy + "/v1/messages"
    ollama_body = json.dumps(
        {"model": MODEL, "messages": messages(LONG_PROMPT), "stream": True}
    ).encode()
    anthropic_body = json.dumps(
        {
            "model": MODEL,
            "max_tokens": MAX_TOKENS,
            "system": SYSTEM,
            "messages": [{"role": "user", "content": LONG_PROMPT}],
            "stream": True,
        }
    ).encode()
    responses_url = proxy + "/v1/responses"
    responses_body = json.dumps({**responses_body_for(LONG_PROMPT), "stream": True}).encode()
    gemini_url = proxy + f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
    gemini_body = json.dumps(
        {
            "systemInstruction": {"parts": [{"text": SYSTEM}]},
            "contents": [{"role": "user", "parts": [{"text": LONG_PROMPT}]}],
            "generationConfig": {"maxOutputTokens": MAX_TOKENS},
        }
    ).encode()

    def raw_ollama() -> str:
        with session.post(ollama_url, data=ollama_body, headers=HEADERS, stream=True) as r:
            texts = [json.loads(line)["message"]["content"] for line in ndjson_lines(r)]
        return "".join(texts)

    def raw_anthropic() -> str:
        with session.post(anthropic_url, data=anthropic_body, headers=HEADERS, stream=True) as r:
            return sse_texts(r, b"content_block_delta", anthropic_text)

    def raw_responses() -> str:
        with session.post(responses_url, data=responses_body, headers=HEADERS, stream=True) as r:
            return sse_texts(r, b"response.output_text.delta", lambda event: event["delta"])

    def raw_gemini() -> str:
        with session.post(gemini_url, data=gemini_body, headers=HEADERS, stream=True) as r:
            return "".join(gemini_texts(r))

    return {
        "raw ollama": raw_ollama,
        "raw anthropic": raw_anthropic,
        "raw responses": raw_responses,
        "raw gemini": raw_gemini,
        "raw relay": raw_chat_reader(session, proxy + "/v1/chat/completions"),
    }


def sse_texts(response: Any, event: bytes, text: Callable[[Any], str | None]) -> str:
    """The texts `text` picks from each `event` frame of an SSE body (`json.loads` each), joined."""
    texts = []
    for name, payload in sse_payloads(response):
        if name == event:
            piece = text(json.loads(payload))
            if piece:
                texts.append(piece)
    return "".join(texts)


def gemini_texts(response: Any) -> Iterator[str]:
    """The text parts of a Gemini ``alt=sse`` body (CRLF frames, `json.loads` each), no thoughts."""
    read1 = response.raw.read1
    rest = b""
    while True:
        data = read1(WRITE_SIZE)
        if not data:
            return
        *frames, rest = (rest + data).split(b"\r\n\r\n")
        for frame in frames:
            if frame.startswith(b"data: "):
                for candidate in json.loads(frame[6:]).get("candidates", ()):
                    for part in candidate.get("content", {}).get("parts", ()):
                        if part.get("text") and not part.get("thought"):
                            yield part["text"]


def anthropic_text(event: Any) -> str | None:
    """A ``content_block_delta``'s text, if it is a ``text_delta``."""
    delta = event["delta"]
    return delta["text"] if delta.get("type") == "text_delta" else None


# -- the contenders ---------------------------------------------------------------


class Contenders:
    """Every client, built once; `stream[name]()` and `short[name]()` return the text read."""

    def __init__(self, upstream: str, proxy: str) -> None:
        import requests

        self.stream: dict[str, Callable[[], str]] = {}
        self.short: dict[str, Callable[[], str]] = {}
        self.notes: dict[str, str] = {}
        self._closers: list[Callable[[], Any]] = []
        session = requests.Session()
        self._closers.append(session.close)
        # direct to the upstream, then through the proxy, then the proxy's raw readers
        self._direct(session, upstream)
        self._openai(upstream, proxy)
        self._litellm(upstream)
        self._ollama(proxy)
        self._anthropic(proxy)
        self.stream.update(face_readers(session, proxy))

    def _direct(self, session: Any, upstream: str) -> None:
        """The raw floor and llmchat, direct to the upstream."""
        import llmchat

        chat_url = upstream + "/chat/completions"
        short_body = chat_body(SHORT_PROMPT, stream=False)

        def raw_short() -> str:  # encodes its body per call, as a client does
            r = session.post(chat_url, data=json.dumps(short_body).encode(), headers=HEADERS)
            return json.loads(r.content)["choices"][0]["message"]["content"]

        self.stream["raw"], self.short["raw"] = raw_chat_reader(session, chat_url), raw_short

        backend = llmchat.OpenAICommon(upstream, model=MODEL)
        self._closers.append(backend.close)
        settings = llmchat.Settings(max_tokens=MAX_TOKENS)
        long_messages, short_messages = messages(LONG_PROMPT), messages(SHORT_PROMPT)

        def mine() -> str:
            response = backend.chat_completion_stream(long_messages, settings=settings)
            texts = [chunk.content for chunk in response if chunk.content]
            assert response.is_success, response.err
            return "".join(texts)

        def mine_short() -> str:
            return backend.chat_completion(short_messages, settings=settings).msg

        self.stream["llmchat"], self.short["llmchat"] = mine, mine_short

    def _openai(self, upstream: str, proxy: str) -> None:
        """The openai SDK: chat completions direct and through the relay, and the Responses face."""
        try:
            import openai
        except ImportError:
            self.notes["openai"] = self.notes["openai relay"] = NOT_INSTALLED
            self.notes["responses"] = NOT_INSTALLED
            return
        for name, base in (("openai", upstream), ("openai relay", proxy + "/v1")):
            client = openai.OpenAI(base_url=base, api_key="x", max_retries=0, timeout=WAIT)
            self._closers.append(client.close)
            self.stream[name], self.short[name] = openai_chat(client)
        # the last client is the proxy's: its /v1/responses is the Responses face
        self.stream["responses"], self.short["responses"] = openai_responses(client)

    def _litellm(self, upstream: str) -> None:
        lite = litellm_stream(upstream, MODEL, messages(LONG_PROMPT), max_tokens=MAX_TOKENS)
        if lite is None:
            self.notes["litellm"] = NOT_INSTALLED
        else:
            self.stream["litellm"] = lite
            self._closers.append(close_litellm)

    def _ollama(self, proxy: str) -> None:
        """The `ollama` client on the Ollama face."""
        try:
            import ollama
        except ImportError:
            self.notes["ollama"] = NOT_INSTALLED
            return
        client = ollama.Client(host=proxy, timeout=WAIT)
        with contextlib.suppress(Exception):
            self._closers.append(client._client.close)  # its httpx.Client (private)
        long_messages, short_messages = messages(LONG_PROMPT), messages(SHORT_PROMPT)

        def olla() -> str:
            parts = client.chat(model=MODEL, messages=long_messages, stream=True)
            return "".join(part.message.content or "" for part in parts)

        def olla_short() -> str:
            answer = client.chat(model=MODEL, messages=short_messages, stream=False)
            return answer.message.content or ""

        self.stream["ollama"], self.short["ollama"] = olla, olla_short

    def _anthropic(self, proxy: str) -> None:
        """The `anthropic` SDK on the Anthropic face."""
        try:
            import anthropic
        except ImportError:
            self.notes["anthropic"] = NOT_INSTALLED
            return
        claude = anthropic.Anthropic(base_url=proxy, api_key="x", max_retries=0, timeout=WAIT)
        self._closers.append(claude.close)
        turn = [{"role": "user", "content": LONG_PROMPT}]
        short_turn = [{"role": "user", "content": SHORT_PROMPT}]

        def anth() -> str:
            with claude.messages.stream(
                model=MODEL,
                max_tokens=MAX_TOKENS,
                system=SYSTEM,
                messages=turn,  # type: ignore[arg-type]
            ) as stream:
                return "".join(stream.text_stream)

        def anth_short() -> str:
            message = claude.messages.create(
                model=MODEL,
                max_tokens=MAX_TOKENS,
                system=SYSTEM,
                messages=short_turn,  # type: ignore[arg-type]
            )
            return "".join(block.text for block in message.content if block.type == "text")

        self.stream["anthropic"], self.short["anthropic"] = anth, anth_short

    def close(self) -> None:
        for close in reversed(self._closers):
            with contextlib.suppress(Exception):
                close()


def openai_chat(client: Any) -> tuple[Callable[[], str], Callable[[], str]]:
    """`client.chat.completions.create`: a long stream's text, a short answer's text."""
    create = client.chat.completions.create
    long_messages, short_messages = messages(LONG_PROMPT), messages(SHORT_PROMPT)

    def sdk() -> str:
        texts = []
        for chunk in create(
            model=MODEL,
            messages=long_messages,
            max_tokens=MAX_TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        ):
            if chunk.choices and chunk.choices[0].delta.content:
                texts.append(chunk.choices[0].delta.content)
        return "".join(texts)

    def sdk_short() -> str:
        answer = create(model=MODEL, messages=short_messages, max_tokens=MAX_TOKENS)
        return answer.choices[0].message.content or ""

    return sdk, sdk_short


def openai_responses(client: Any) -> tuple[Callable[[], str], Callable[[], str]]:
    """`client.responses.create`: a long stream's text, a short answer's `output_text`.

    The stream is read as Codex reads it: every event in order, the text from
    each ``response.output_text.delta`` (not the `responses.stream()` helper,
    which also accumulates a snapshot of the response per event).
    """
    create = client.responses.create
    long_body, short_body = responses_body_for(LONG_PROMPT), responses_body_for(SHORT_PROMPT)

    def sdk() -> str:
        events = create(**long_body, stream=True)
        return "".join(e.delta for e in events if e.type == "response.output_text.delta")

    def sdk_short() -> str:
        return str(create(**short_body).output_text)

    return sdk, sdk_short


def checked(name: str, fn: Callable[[], str], expected: str) -> Callable[[], None]:
    """`fn`, failing loudly whenever the text it read is not `expected` (a string compare)."""

    def call() -> None:
        text = fn()
        if text != expected:
            raise AssertionError(
                f"{name} read {len(text)} characters, not the expected {len(expected)}: "
                f"{text[:60]!r}..."
            )

    return call


def litellm_idle() -> None:
    """Untimed, never reported: wait out litellm's per-chunk logging backlog (see bench_stream)."""
    try:
        from litellm.litellm_core_utils.thread_pool_executor import executor

        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            slots = executor._pending_slots._value  # type: ignore[attr-defined]
            if int(executor._max_pending_tasks) - int(slots) == 0:  # type: ignore[attr-defined]
                return
            time.sleep(0.0005)
    except Exception:
        time.sleep(0.05)


DRAIN = "(litellm logging backlog)"
