"""Count what one streamed content frame costs llmchat: Python calls, locks, by stage.

Deterministic counts, not timings (the machine is shared; a count does not
depend on what else runs). A llama.cpp-shaped stream of N content frames
(`bench_stream.stream_frames`: role, N contents, finish, usage, ``[DONE]``),
one frame per read, is read through
``OpenAICommon(...).chat_completion_stream(...)`` and iterated to the end.
The same stream with 0 content frames is the baseline, so the figures are the
marginal cost of one frame, the per-request part left out.

- ``socket``: the bench server runs in another process (`ScriptedServer`,
  one HTTP chunk per event, as real servers write it), the real transport.
- ``mock``: the same frames through a `MockTransport` (one body piece per
  read): no socket, for the pipeline alone.
- ``floor``: the raw floor on the socket (`requests` + ``read1`` + split +
  `json.loads`), as `bench_stream.py` measures it.

Calls are counted with a profile hook on every thread (`sys.setprofile` and
`threading.setprofile`): Python functions and builtins, as cProfile counts
them, each given to the stage of the innermost llmchat frame it runs under.
Locks are counted in a separate pass: `threading.Lock` (and the locks a
`Condition` waits on) replaced by a counting wrapper, each acquisition given
to the llmchat line that made the lock.

    python bench/profile_frame.py [--frames N] [--quick] [--modes socket,mock,floor]
                                  [--parser stdlib|orjson] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

MESSAGES = [{"role": "user", "content": "Tell me a long story."}]
FRAMES = 20_000
QUICK_FRAMES = 2_000
SSE_HEADERS = {"Content-Type": "text/event-stream"}


# -- the stream and its server (in another process) ----------------------------------


def frames_of(count: int) -> list[bytes]:
    """Every frame of a stream with `count` content frames (`bench_stream`'s shapes)."""
    from bench_stream import deltas, stream_frames

    return stream_frames(deltas(count))


def serve(counts: list[int]) -> None:
    """The server process: one `ScriptedServer` per count; their URLs on stdout; stop at EOF."""
    from llmchat.testing import Reply, ScriptedServer, Write

    servers = [
        ScriptedServer(
            Reply(200, SSE_HEADERS, framing="chunked", steps=[Write(f) for f in frames_of(n)])
        )
        for n in counts
    ]
    urls = [server.__enter__() for server in servers]
    print(" ".join(urls), flush=True)
    sys.stdin.read()
    for server in servers:
        server.__exit__(None, None, None)


class ServerProcess:
    """`serve` in a child process: the server's work never runs in the measured one."""

    def __init__(self, counts: list[int]) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", *map(str, counts)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert self.proc.stdout is not None
        self.urls = self.proc.stdout.readline().split()
        if len(self.urls) != len(counts):
            raise RuntimeError("the bench server process did not start")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


# -- the readers ----------------------------------------------------------------------


def llmchat_reader(url: str | None, frames: list[bytes]) -> Callable[[], str]:
    """Read the stream once with llmchat (the socket at `url`, or a MockTransport)."""
    from llmchat import OpenAICommon
    from llmchat.transport.mock import MockResponse, MockTransport

    if url is None:
        answer = MockResponse(200, SSE_HEADERS, frames)
        backend = OpenAICommon("http://mock.invalid/v1", transport=MockTransport(lambda r: answer))
    else:
        backend = OpenAICommon(url + "/v1")

    def read() -> str:
        response = backend.chat_completion_stream(MESSAGES)
        parts = [chunk.content for chunk in response]
        response.wait()
        assert response.is_success, response.err
        return "".join(parts)

    return read


def floor_reader(url: str | None, frames: list[bytes]) -> Callable[[], str]:
    """The raw floor: `requests`, ``read1``, split on blank lines, `json.loads`."""
    import requests
    from bench_stream import raw_content, raw_frames

    assert url is not None, "the floor reads a socket"
    session = requests.Session()

    def read() -> str:
        body = {"model": "m", "messages": MESSAGES, "stream": True}
        with session.post(url + "/v1/chat/completions", json=body, stream=True) as response:
            parts = [raw_content(payload) or "" for payload in raw_frames(response)]
        return "".join(parts)

    return read


# -- counting calls ---------------------------------------------------------------------

# The stage of a frame's code: by llmchat file (and function where a file holds two).
_BY_FILE = (
    ("llmchat/sse.py", "sse framing"),
    ("llmchat/fastjson.py", "json"),
    ("llmchat/dialects/", "dialect decode"),
    ("llmchat/pipeline/think_tags.py", "think tags"),
    ("llmchat/pipeline/accumulate.py", "accumulate"),
    ("llmchat/tools.py", "tool assembly"),
    ("llmchat/backends/_baton.py", "baton"),
    ("llmchat/response_writer.py", "publish"),
    ("llmchat/response.py", "iterate"),
    ("llmchat/transport/", "read (transport)"),
    ("llmchat/backends/_runners.py", "pump"),
    ("llmchat/backends/_hooks.py", "lift usage"),
    ("llmchat/", "other llmchat"),
)
_BY_FUNCTION = {
    "usage_fields": "lift usage",
    "model_and_usage": "lift usage",
    "_lift_usage": "lift usage",
    "_publish": "publish",
    "_sync": "publish",
    "_record_finish": "publish",
    "_apply": "accumulate",
}
_OUTSIDE = (("/json/", "json"), ("/http/client.py", "read (transport)"))


class CallCounter:
    """A profile hook counting every call and builtin call, by stage, on every thread."""

    def __init__(self) -> None:
        self.py: Counter[str] = Counter()
        self.builtin: Counter[str] = Counter()
        self.by_function: Counter[str] = Counter()
        self._stage: dict[CodeType, str | None] = {}
        self._init_stages()

    def _init_stages(self) -> None:
        # dataclass __init__s are compiled from "<string>": name them by their class.
        from llmchat.chunk import Chunk
        from llmchat.dialects.base import Delta
        from llmchat.sse import SSEEvent

        for cls, stage in ((Chunk, "chunk"), (Delta, "dialect decode"), (SSEEvent, "sse framing")):
            self._stage[cls.__init__.__code__] = stage

    def stage_of(self, code: CodeType) -> str | None:
        try:
            return self._stage[code]
        except KeyError:
            pass
        path = code.co_filename.replace("\\", "/")
        stage = _BY_FUNCTION.get(code.co_name) if "/llmchat/" in path else None
        for part, name in _BY_FILE if stage is None else ():
            if "/" + part in path:
                stage = name
                break
        for part, name in _OUTSIDE if stage is None else ():
            if part in path:
                stage = name
        if stage is None and path == __file__:
            stage = "consumer"
        self._stage[code] = stage
        return stage

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            name = f"{frame.f_code.co_name} ({Path(frame.f_code.co_filename).name})"
            counts = self.py
        elif event == "c_call":
            name = getattr(arg, "__qualname__", repr(arg))
            counts = self.builtin
        else:
            return
        stage = None
        probe: FrameType | None = frame
        while probe is not None and stage is None:
            stage = self.stage_of(probe.f_code)
            probe = probe.f_back
        counts[stage or "other"] += 1
        self.by_function[name] += 1

    def run(self, fn: Callable[[], Any]) -> None:
        threading.setprofile(self.hook)
        sys.setprofile(self.hook)
        try:
            fn()
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]


# -- counting locks ----------------------------------------------------------------------


class LockCounter:
    """Replaces `threading.Lock` (and a Condition's waiter locks) with counting locks."""

    def __init__(self) -> None:
        self.acquired: Counter[str] = Counter()
        self.counting = False
        self._saved: tuple[Any, Any] | None = None

    def _site(self) -> str:
        frame = sys._getframe(2)
        while frame is not None:
            path = frame.f_code.co_filename.replace("\\", "/")
            if "/llmchat/" in path:
                return f"{'/'.join(Path(path).parts[-2:])}:{frame.f_code.co_name}"
            frame = frame.f_back  # type: ignore[assignment]
        return "outside llmchat"

    def new_lock(self) -> Any:
        counter, site, real = self, self._site(), self._saved[0]()  # type: ignore[index]

        class Counting:
            """A lock that counts its acquisitions while the counter counts."""

            def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
                if counter.counting:
                    counter.acquired[site] += 1
                return bool(real.acquire(blocking, timeout))

            def release(self) -> None:
                real.release()

            def locked(self) -> bool:
                return bool(real.locked())

            def _at_fork_reinit(self) -> None:
                real._at_fork_reinit()

            def __enter__(self) -> bool:
                return self.acquire()

            def __exit__(self, *exc: object) -> None:
                real.release()

        return Counting()

    def __enter__(self) -> LockCounter:
        self._saved = (threading.Lock, threading._allocate_lock)  # type: ignore[attr-defined]
        threading.Lock = self.new_lock  # type: ignore[misc]
        threading._allocate_lock = self.new_lock  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._saved is not None
        threading.Lock, threading._allocate_lock = self._saved  # type: ignore[misc,attr-defined]


# -- the report ------------------------------------------------------------------------


def per_frame(
    make: Callable[[str | None, list[bytes]], Callable[[], str]],
    urls: tuple[str | None, str | None],
    frames: int,
) -> dict[str, Any]:
    """Calls and locks of one frame: (the N-frame stream - the 0-frame one) / N."""
    long_frames, short_frames = frames_of(frames), frames_of(0)
    counted: dict[str, tuple[CallCounter, Counter[str]]] = {}
    # Calls with the real locks; then locks with counting ones (their calls not counted).
    # The per-request locks are made during the call: the counting ones only then.
    readers = make(urls[0], long_frames), make(urls[1], short_frames)
    locks = LockCounter()
    for read in readers:  # warm: pools, imports, caches
        read()
    for label, read in zip(("long", "short"), readers, strict=True):
        calls = CallCounter()
        calls.run(read)
        with locks:
            locks.acquired.clear()
            locks.counting = True
            read()
            locks.counting = False
        counted[label] = (calls, Counter(locks.acquired))
    long_calls, long_locks = counted["long"]
    short_calls, short_locks = counted["short"]

    def diff(long: Counter[str], short: Counter[str]) -> dict[str, float]:
        out = {key: (long[key] - short[key]) / frames for key in long | short}
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    py = diff(long_calls.py, short_calls.py)
    builtin = diff(long_calls.builtin, short_calls.builtin)
    stages = {
        stage: (py.get(stage, 0.0), builtin.get(stage, 0.0))
        for stage in sorted(
            py.keys() | builtin.keys(), key=lambda s: -py.get(s, 0) - builtin.get(s, 0)
        )
    }
    return {
        "python_calls": sum(py.values()),
        "builtin_calls": sum(builtin.values()),
        "locks": sum(diff(long_locks, short_locks).values()),
        "stages": {k: v for k, v in stages.items() if v[0] + v[1] >= 0.05},
        "functions": {
            k: v
            for k, v in list(diff(long_calls.by_function, short_calls.by_function).items())[:30]
            if v >= 0.05
        },
        "lock_sites": {k: v for k, v in diff(long_locks, short_locks).items() if abs(v) >= 0.005},
    }


def print_report(mode: str, result: dict[str, Any]) -> None:
    py, builtin = result["python_calls"], result["builtin_calls"]
    print(
        f"\n## {mode}: {py + builtin:.1f} calls/frame ({py:.1f} Python functions, "
        f"{builtin:.1f} builtins), {result['locks']:.2f} lock acquisitions/frame"
    )
    print("\n| stage | Python calls/frame | builtin calls/frame |\n|---|---:|---:|")
    for stage, (p, b) in result["stages"].items():
        print(f"| {stage} | {p:.2f} | {b:.2f} |")
    print("\n| function (top 30) | calls/frame |\n|---|---:|")
    for name, count in result["functions"].items():
        print(f"| `{name}` | {count:.2f} |")
    if result["lock_sites"]:
        print("\n| lock made in | acquisitions/frame |\n|---|---:|")
        for site, count in result["lock_sites"].items():
            print(f"| `{site}` | {count:.2f} |")


def timed_rounds(url: str, frames: int, rounds: int) -> dict[str, float]:
    """Wall-clock frames/s of llmchat and the floor, interleaved; the median round ratio.

    A timing, unlike the counts: only meaningful on a quiet machine.
    """
    import statistics
    import time

    stream = frames_of(frames)
    readers = {"llmchat": llmchat_reader(url, stream), "floor": floor_reader(url, stream)}
    for read in readers.values():
        read()
    ratios: list[float] = []
    rates: dict[str, list[float]] = {name: [] for name in readers}
    for _ in range(rounds):
        for name, read in readers.items():
            start = time.perf_counter()
            read()
            rates[name].append(frames / (time.perf_counter() - start))
        ratios.append(rates["llmchat"][-1] / rates["floor"][-1])
    return {
        "llmchat_fps": statistics.median(rates["llmchat"]),
        "floor_fps": statistics.median(rates["floor"]),
        "ratio": statistics.median(ratios),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=FRAMES)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_FRAMES} frames")
    parser.add_argument("--modes", default="socket,mock,floor")
    parser.add_argument("--parser", choices=("stdlib", "orjson"), default="stdlib")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--time", type=int, default=0, metavar="ROUNDS", help="also time llmchat against the floor"
    )
    parser.add_argument("--serve", nargs="+", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    from llmchat import fastjson

    fastjson.use(args.parser)
    frames = QUICK_FRAMES if args.quick else args.frames
    modes = args.modes.split(",")
    results: dict[str, Any] = {"frames": frames, "parser": args.parser}
    server = ServerProcess([frames, 0]) if {"socket", "floor"} & set(modes) else None
    try:
        sockets = (server.urls[0], server.urls[1]) if server else (None, None)
        readers: dict[str, tuple[Any, tuple[str | None, str | None]]] = {
            "socket": (llmchat_reader, sockets),
            "mock": (llmchat_reader, (None, None)),
            "floor": (floor_reader, sockets),
        }
        for mode in modes:
            make, urls = readers[mode]
            results[mode] = per_frame(make, urls, frames)
            print_report(mode, results[mode])
        if args.time:
            server_time = server or ServerProcess([frames, 0])
            timing = timed_rounds(server_time.urls[0], frames, args.time)
            results["timing"] = timing
            print(
                f"\n## timing ({args.time} interleaved rounds, median; a quiet machine only): "
                f"llmchat {timing['llmchat_fps']:,.0f} frames/s, floor "
                f"{timing['floor_fps']:,.0f} frames/s, ratio {timing['ratio']:.2f}x"
            )
            if server is None:
                server_time.close()
    finally:
        if server is not None:
            server.close()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
