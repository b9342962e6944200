"""One process's figures for `bench_before_after.py`: llmchat imported from a given tree.

    python bench/_before_after_probe.py TREE [--repeat N]

TREE is a folder holding an ``llmchat/`` package (a past commit unpacked, or
this checkout). It goes first on ``sys.path`` before anything imports
llmchat, so the figures are that tree's code; the measuring code (this file,
`bench_stream`'s frames, `_proxy_paths`' readers) is the same for every tree.
Prints one JSON object: the seconds of each path (the best of `--repeat`
runs) and the file llmchat was imported from.

Only names public in every version are used (`OpenAICommon`, `make_app`,
`make_server`, `ScriptedServer`, `Reply`, `Write`, `ChatResponder`).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # the tree under test first, before any llmchat import
    sys.path.insert(0, sys.argv[1])

import argparse
import json
import threading
from collections.abc import Callable
from typing import Any

import requests
from _proxy_paths import DELTAS, HEADERS, MODEL, SHORT_TEXT, face_readers, upstream_script
from _report import best_of as best
from _report import loopback_only
from bench_stream import FRAMES, MESSAGES, WRITE_SIZE, deltas, stream_frames


def checked(fn: Callable[[], str], expected: str) -> Callable[[], None]:
    """`fn`, failing loudly when its text is not `expected` (a broken path is not fast)."""

    def run() -> None:
        text = fn()
        if text != expected:
            raise AssertionError(f"wrong text: {text[:60]!r}…")

    return run


def direct(repeat: int) -> dict[str, float]:
    """llmchat as a client of one loopback server: a 2,000-frame stream, a short request."""
    import llmchat
    from llmchat.testing import ChatResponder, Reply, ScriptedServer, Write

    texts = deltas(FRAMES)
    expected = "".join(texts)
    frames = stream_frames(texts)
    body = b"".join(frames)
    headers = {"Content-Type": "text/event-stream"}
    bulk = Reply(
        200,
        headers,
        framing="chunked",
        steps=[Write(body[i : i + WRITE_SIZE]) for i in range(0, len(body), WRITE_SIZE)],
    )
    per_event = Reply(200, headers, framing="chunked", steps=[Write(f) for f in frames])
    figures: dict[str, float] = {}
    for name, reply in (("stream, 64 KiB writes", bulk), ("stream, a write per frame", per_event)):
        with ScriptedServer(reply) as url:
            backend = llmchat.OpenAICommon(url, model=MODEL)

            def stream(backend: Any = backend) -> str:
                return "".join(c.content for c in backend.chat_completion_stream(MESSAGES))

            figures[name] = best(checked(stream, expected), repeat)
            backend.close()
    with ScriptedServer(ChatResponder(SHORT_TEXT, model=MODEL)) as url:
        backend = llmchat.OpenAICommon(url, model=MODEL)
        figures["blocking request"] = best(
            checked(lambda: backend.chat_completion(MESSAGES).msg, SHORT_TEXT), repeat, 20
        )
        backend.close()
    return figures


def proxied(repeat: int) -> dict[str, float]:
    """Raw readers of each face of `llmchat proxy` over one upstream; a short request."""
    import llmchat
    from llmchat.proxy import make_app, make_server
    from llmchat.testing import Reply, ScriptedServer, Write

    texts = deltas(DELTAS)
    expected = "".join(texts)
    body = b"".join(stream_frames(texts))
    writes = [Write(body[i : i + WRITE_SIZE]) for i in range(0, len(body), WRITE_SIZE)]
    long_reply = Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=writes)
    figures: dict[str, float] = {}
    with ScriptedServer(upstream_script(long_reply)) as upstream:
        backend = llmchat.OpenAICommon(upstream, model=MODEL)
        proxy = make_server(make_app(backend), "127.0.0.1", 0)
        thread = threading.Thread(target=proxy.serve_forever, daemon=True)
        thread.start()
        session = requests.Session()
        try:
            for name, read in face_readers(session, proxy.url).items():
                figures[f"proxy {name.removeprefix('raw ')}"] = best(
                    checked(read, expected), repeat
                )
            short = json.dumps(
                {
                    "model": MODEL,
                    "stream": False,
                    "messages": [{"role": "user", "content": "Say ok."}],
                }
            ).encode()

            def ollama_short() -> str:
                r = session.post(proxy.url + "/api/chat", data=short, headers=HEADERS)
                return str(json.loads(r.content.splitlines()[-1])["message"]["content"])

            figures["proxy ollama, short request"] = best(
                checked(ollama_short, SHORT_TEXT), repeat, 10
            )
        finally:
            session.close()
            proxy.shutdown()
            proxy.server_close()
            thread.join(10)
            backend.close()
    return figures


def main() -> int:
    """Measure both parts and print them as one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with loopback_only():
        figures = {**direct(args.repeat), **proxied(args.repeat)}
    import llmchat

    print(json.dumps({"llmchat": llmchat.__file__, "seconds": figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
