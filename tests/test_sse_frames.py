"""SSEDecoder: a read that is exactly one frame (one HTTP chunk per event) gives the events the
line rules give the same bytes fed one at a time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llmchat.sse import EventTooLarge, SSEDecoder, SSEEvent

_piece = st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b""))
_field = st.sampled_from([b"data: ", b"data:", b"event: ", b"event:", b"id: ", b": ", b"x: "])
_line = st.tuples(_field, _piece).map(lambda t: t[0] + t[1] + b"\n")
_frame = st.lists(_line, min_size=1, max_size=3).map(lambda lines: b"".join(lines) + b"\n")


def _bytewise(frames: list[bytes], limit: int | None) -> list[SSEEvent] | str:
    decoder = SSEDecoder(limit)
    out: list[SSEEvent] = []
    try:
        for frame in frames:
            for i in range(len(frame)):
                out += decoder.feed(frame[i : i + 1])
    except EventTooLarge:
        return "too large"
    return out + decoder.flush()


def _per_frame(frames: list[bytes], limit: int | None) -> list[SSEEvent] | str:
    decoder = SSEDecoder(limit)
    out: list[SSEEvent] = []
    try:
        for frame in frames:
            out += decoder.feed(frame)
    except EventTooLarge:
        return "too large"
    return out + decoder.flush()


@given(st.lists(_frame, min_size=1, max_size=6), st.none() | st.integers(0, 40))
def test_one_frame_per_read_equals_byte_by_byte(frames: list[bytes], limit: int | None) -> None:
    assert _per_frame(frames, limit) == _bytewise(frames, limit)


def test_the_common_frames_take_the_one_frame_path() -> None:
    decoder = SSEDecoder()
    decoder.feed(b": hello\n\n")  # the first line of a body goes through the BOM rule
    assert decoder.feed(b"data: {}\n\n") == [SSEEvent("{}")]
    assert decoder.feed(b"event: message_stop\ndata: {}\n\n") == [SSEEvent("{}", "message_stop")]
    assert decoder.feed(b"event: \xff\ndata: {}\n\n") == [SSEEvent("{}", undecodable=True)]
    assert decoder.feed(b"data: \xff\n\n") == [SSEEvent(undecodable=True)]
