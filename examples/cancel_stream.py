"""Cancel a stream from another thread; the server stops generating at once.

    python examples/cancel_stream.py

A cancel is synchronous and never raises: the Response is settled as
cancelled before the network is touched, then the connection is dropped —
even during prefill, before the server sent a single byte.
"""

from __future__ import annotations

import threading

from _server import server_url

from llmchat import OpenAICommon

STORY = "Once upon a time, a model kept talking long after anyone wanted to listen. " * 20

with server_url(STORY, delay=0.02) as url:
    backend = OpenAICommon(url)
    response = backend.chat_completion_stream([{"role": "user", "content": "Tell me a story."}])
    enough = threading.Event()

    def user_presses_escape() -> None:
        enough.wait(10)
        response.cancel()  # thread-safe; returns at once

    threading.Thread(target=user_presses_escape).start()
    for count, text in enumerate(response.iter_text(), 1):
        print(text, end="", flush=True)
        if count == 5:
            enough.set()
    print()
    print(
        f"is_cancelled={response.is_cancelled} err={response.err!r} "
        f"error_class={response.error_class!r}"
    )
    print(f"kept {len(response.latest)} of {len(STORY)} characters")
    backend.close()
