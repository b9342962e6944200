"""The proxy faces' translator stage alone: µs and Python calls per delta, in-process.

Each translating face (Anthropic, Gemini, Ollama, Responses) turns one upstream delta
into the bytes its client reads. Two stages are measured per face, with no
socket and no thread, in the steady state (the content block or item is
already open, so every delta is the common one):

- ``translator``: the face's stream translator taking one decoded OpenAI chunk
  (`AnthropicStream.delta` and friends), what the issue calls the translator
  stage;
- ``face``: what the proxy does per delta from an upstream `Chunk` to the
  bytes it writes: the face's `Answer` and the `CleanStream` door around its
  translator (key and lone-surrogate cleaning), as `StreamBody` calls them.

Deterministic counts come first, since timings on a shared machine are noise:
Python function calls per delta (``py calls``, counted with `sys.setprofile`)
and C calls per delta (``c calls``). The µs column is the best of several
runs. No JSON is parsed on this path (the upstream's decoder did that), so the
``fast`` extra (orjson) does not change it.

    python bench/bench_translators.py [--quick] [--write]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from _report import BENCHMARKS_MD, best_of, calls_for, stamp, table, write_section

SECTION = "Proxy faces: the translator stage"
MODEL = "bench-model"
GOAL_US = 15.0
"""Issue 29's goal for each translating face's own cost per delta."""

_TEXTS = {"text": " the", "unicode": ' café 日本語 "q"\n'}


def _chunk_dict(text: str, reasoning: bool) -> dict[str, Any]:
    delta = {"reasoning_content": text} if reasoning else {"content": text}
    return {
        "id": "chatcmpl-bench",
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }


def _answers() -> dict[str, Any]:
    from llmchat.proxy.faces.anthropic.answer import AnthropicAnswer
    from llmchat.proxy.faces.gemini.answer import GeminiAnswer
    from llmchat.proxy.faces.ollama.answer import OllamaAnswer
    from llmchat.proxy.faces.responses.routes import ResponsesAnswer

    thinking = {"type": "enabled", "budget_tokens": 2048}
    return {
        "anthropic": lambda: AnthropicAnswer(
            {"model": MODEL, "max_tokens": 64, "thinking": thinking}
        ),
        "gemini": lambda: GeminiAnswer(MODEL),
        "gemini array": lambda: GeminiAnswer(MODEL, framing="array"),
        "ollama": lambda: OllamaAnswer({"model": MODEL}, "chat"),
        "ollama generate": lambda: OllamaAnswer({"model": MODEL}, "generate"),
        "responses": lambda: ResponsesAnswer({"model": MODEL}),
    }


def _translator_fn(make_answer: Callable[[], Any], text: str, reasoning: bool) -> Callable[[], Any]:
    """The translator alone, one decoded chunk per call, in the steady state."""
    translator = make_answer().translator()
    translator.start()
    chunk = _chunk_dict(text, reasoning)
    translator.delta(chunk)  # opens the block / item
    return lambda: translator.delta(chunk)


def _face_fn(make_answer: Callable[[], Any], text: str, reasoning: bool) -> Callable[[], Any]:
    """Chunk to bytes as `StreamBody` does it: the answer, the clean door, the translator."""
    from llmchat.chunk import Chunk

    answer = make_answer()
    stream = answer.stream()
    stream.start()
    chunk = Chunk("", model=MODEL, thinking=text) if reasoning else Chunk(text, model=MODEL)
    write = getattr(answer, "write", None)
    if write is not None:
        step: Callable[[], Any] = lambda: write(stream, chunk, "chatcmpl-bench")  # noqa: E731
    else:  # a tree from before `Answer.write`: the path it had
        step = lambda: stream.delta(answer.chunk(chunk, "chatcmpl-bench"))  # noqa: E731
    step()
    return step


def count_calls(fn: Callable[[], Any], times: int = 200) -> tuple[float, float]:
    """Python and C function calls per call of `fn` (profile events, averaged over `times`)."""
    counts = {"call": 0, "c_call": 0}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event in counts:
            counts[event] += 1

    fn()
    sys.setprofile(profile)
    try:
        for _ in range(times):
            fn()
    finally:
        sys.setprofile(None)
    # The loop's own `fn()` is one Python call per round; setprofile(None) is one C call.
    return (counts["call"] - times) / times, max(0, counts["c_call"] - 1) / times


def measure(quick: bool) -> list[dict[str, Any]]:
    """One row per face, case and stage: py calls, c calls and µs per delta."""
    repeat = 3 if quick else 9
    rows: list[dict[str, Any]] = []
    for face, make_answer in _answers().items():
        for case, text in _TEXTS.items():
            for reasoning in (False, True):
                if reasoning and case != "text":
                    continue
                label = "reasoning" if reasoning else case
                for stage, build in (("translator", _translator_fn), ("face", _face_fn)):
                    fn = build(make_answer, text, reasoning)
                    py, c = count_calls(fn)
                    seconds = best_of(fn, repeat, calls_for(fn, 0.02 if quick else 0.05))
                    rows.append(
                        {
                            "face": face,
                            "case": label,
                            "stage": stage,
                            "py_calls": py,
                            "c_calls": c,
                            "us": seconds * 1e6,
                        }
                    )
    return rows


def end_to_end(streams: int) -> dict[str, dict[str, float]]:
    """Per face read by its raw reader through a real proxy on loopback: writes to the
    client socket and Python calls in the proxy's handler thread, per delta.

    The upstream is `bench_proxy`'s: 1,000 token deltas sent in 64 KiB writes, so a
    read of the proxy's upstream client delivers many deltas at once.
    """
    import cProfile
    import pstats
    import threading

    import requests
    from _proxy_paths import DELTAS, WAIT, WRITE_SIZE, checked, face_readers, upstream_script
    from _proxy_paths import MODEL as UPSTREAM_MODEL
    from _proxy_profile import ProfiledApp
    from bench_stream import deltas, stream_frames

    import llmchat
    from llmchat.proxy import make_app, make_server
    from llmchat.proxy.server import deadlines
    from llmchat.testing import Reply, ScriptedServer, Write

    texts = deltas(DELTAS)
    body = b"".join(stream_frames(texts))
    writes = [Write(body[i : i + WRITE_SIZE]) for i in range(0, len(body), WRITE_SIZE)]
    reply = Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=writes)
    sent = [0]
    write = deadlines.StallWriter.write

    def counted(self: Any, data: Any) -> int:
        sent[0] += 1
        return write(self, data)

    out: dict[str, dict[str, float]] = {}
    deadlines.StallWriter.write = counted  # type: ignore[method-assign]
    try:
        with (
            ScriptedServer(upstream_script(reply)) as upstream,
            llmchat.OpenAICommon(upstream, model=UPSTREAM_MODEL) as backend,
            requests.Session() as session,
        ):
            for face in ("raw anthropic", "raw ollama", "raw responses", "raw relay"):
                app = ProfiledApp(make_app(backend))
                server = make_server(app, "127.0.0.1", 0)
                thread = threading.Thread(target=server.serve_forever, daemon=True)
                thread.start()
                try:
                    read = checked(face, face_readers(session, server.url)[face], "".join(texts))
                    read()  # warm-up
                    sent[0] = 0
                    for _ in range(streams):
                        read()
                    writes_per = sent[0] / streams / DELTAS
                    app.profiler = cProfile.Profile()
                    for _ in range(streams):
                        read()
                    stats = pstats.Stats(app.profiler).stats  # type: ignore[attr-defined]
                    calls = sum(entry[1] for entry in stats.values()) / streams / DELTAS
                finally:
                    server.shutdown()
                    server.server_close()
                    thread.join(WAIT)
                out[face.removeprefix("raw ")] = {"writes": writes_per, "calls": calls}
    finally:
        deadlines.StallWriter.write = write  # type: ignore[method-assign]
    return out


def render_end_to_end(figures: dict[str, dict[str, float]]) -> str:
    rows = [[face, f"{row['writes']:.3f}", f"{row['calls']:.1f}"] for face, row in figures.items()]
    return (
        "Through a real proxy on loopback, each face read by a raw `requests` reader "
        "(`bench_proxy`'s upstream: 1,000 deltas in 64 KiB writes): writes to the client "
        "socket and function calls (Python and C, cProfile) in the proxy's handler thread, "
        "per delta.\n\n" + table(["face", "socket writes / delta", "calls / delta"], rows)
    )


def render(rows: list[dict[str, Any]]) -> str:
    body = [
        [
            row["face"],
            row["case"],
            row["stage"],
            f"{row['py_calls']:.1f}",
            f"{row['c_calls']:.1f}",
            f"{row['us']:.2f}",
        ]
        for row in rows
    ]
    return (
        f"{stamp()}\n\n"
        "Per delta, in-process, steady state (`python bench/bench_translators.py`). "
        "`translator`: the face's translator taking one decoded OpenAI chunk; `face`: "
        "an upstream `Chunk` to the bytes written (the face's answer, `CleanStream` "
        f"and the translator). Goal: each face's own cost ≤ {GOAL_US:.0f} µs per delta.\n\n"
        + table(["face", "delta", "stage", "py calls", "c calls", "µs"], body, "lllrrr")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer timing runs")
    parser.add_argument("--write", action="store_true", help=f"update {BENCHMARKS_MD.name}")
    parser.add_argument(
        "--no-proxy", action="store_true", help="skip the end-to-end counts through a real proxy"
    )
    args = parser.parse_args(argv)
    markdown = render(measure(args.quick))
    if not args.no_proxy:
        markdown += "\n\n" + render_end_to_end(end_to_end(2 if args.quick else 5))
    print(markdown)
    if args.write:
        write_section(BENCHMARKS_MD, SECTION, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
