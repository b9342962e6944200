"""SSEDecoder: a read that is exactly one frame (one HTTP chunk per event) gives the events the
decoder gives the same reads without its one-frame path."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llmchat.sse import EventTooLarge, SSEDecoder, SSEEvent

_piece = st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b""))
_field = st.sampled_from([b"data: ", b"data:", b"event: ", b"event:", b"id: ", b": ", b"x: "])
_line = st.tuples(_field, _piece).map(lambda t: t[0] + t[1] + b"\n")
_common = st.tuples(_piece, _piece).map(lambda t: b"event: " + t[0] + b"\ndata: " + t[1] + b"\n\n")
_frame = (
    st.lists(_line, min_size=1, max_size=3).map(lambda lines: b"".join(lines) + b"\n")
    | _common
    | _piece.map(lambda p: b"data: " + p + b"\n\n")
)


class _LineRulesOnly(SSEDecoder):
    """The decoder with its one-frame path off: every read goes through the general rules."""

    @staticmethod
    def _one_frame(data: bytes) -> SSEEvent | None:
        return None


def _per_frame(
    frames: list[bytes], limit: int | None, cls: type[SSEDecoder] = SSEDecoder
) -> list[SSEEvent] | str:
    decoder = cls(limit)
    out: list[SSEEvent] = []
    try:
        for frame in frames:
            out += decoder.feed(frame)
    except EventTooLarge:
        return "too large"
    return out + decoder.flush()


@given(st.lists(_frame, min_size=1, max_size=6), st.none() | st.integers(0, 40))
def test_one_frame_per_read_equals_the_line_rules(frames: list[bytes], limit: int | None) -> None:
    assert _per_frame(frames, limit) == _per_frame(frames, limit, _LineRulesOnly)


def test_the_common_frames_take_the_one_frame_path() -> None:
    decoder = SSEDecoder()
    decoder.feed(b": hello\n\n")  # the first line of a body goes through the BOM rule
    assert decoder.feed(b"data: {}\n\n") == [SSEEvent("{}")]
    assert decoder.feed(b"event: message_stop\ndata: {}\n\n") == [SSEEvent("{}", "message_stop")]
    assert decoder.feed(b"event: \xff\ndata: {}\n\n") == [SSEEvent("{}", undecodable=True)]
    assert decoder.feed(b"data: \xff\n\n") == [SSEEvent(undecodable=True)]


def test_the_one_frame_path_keeps_the_size_limit_to_the_byte() -> None:
    for frame in (b"data: 0123456789\n\n", b"event: e\ndata: 0123456789\n\n"):
        for limit in range(len(frame) - 5, len(frame) + 2):
            frames = [b"data: x\n\n", frame]
            assert _per_frame(frames, limit) == _per_frame(frames, limit, _LineRulesOnly), limit
