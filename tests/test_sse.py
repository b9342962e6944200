"""sse: the push decoder — line endings, fields, flush, UTF-8, and split invariance.

The golden transcripts are raw stream bodies from a real llama-server. Three
small ones are copied byte for byte into ``tests/fixtures/llamacpp/`` so a
clone without the shared captures folder still runs the every-split tests;
when ``CAPTURES_DIR / "llamacpp"`` exists, every ``*.sse.txt`` there runs too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat.sse import EventTooLarge, KeepAliveOnly, KeepAliveWatch, SSEDecoder, SSEEvent

from .support.golden_sse import (
    FIXTURES_DIR,
    SHARED_LLAMACPP,
    decode,
    golden_params,
    golden_transcripts,
    read_golden,
    split_at,
    split_outcomes,
)


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_events_split_at_each_line_ending(eol: bytes) -> None:
    body = b"data: a" + eol + eol + b"data: b" + eol + b"data: c" + eol + eol
    assert decode([body]) == [SSEEvent(data="a"), SSEEvent(data="b\nc")]


def test_mixed_line_endings_in_one_stream() -> None:
    body = b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r"
    assert decode([body]) == [SSEEvent(data="a\nb\nc"), SSEEvent(data="d")]


def test_crlf_split_across_two_feeds_is_one_line_ending() -> None:
    # Were the LF counted again it would be a blank line dispatching "a" alone.
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\ndata: b\r\n\r\n") == [SSEEvent(data="a\nb")]
    assert decoder.flush() == []


def test_cr_at_the_end_of_a_feed_followed_by_other_text() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"data: b\r") == []
    assert decoder.feed(b"\r") == [SSEEvent(data="a\nb")]


def test_a_lone_lf_after_a_completed_crlf_is_a_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r\n") == []
    assert decoder.feed(b"\n") == [SSEEvent(data="a")]


def test_an_empty_feed_between_cr_and_lf_changes_nothing() -> None:
    assert decode([b"data: a\r", b"", b"\ndata: b\n\n"]) == [SSEEvent(data="a\nb")]


# -- fields ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "value"),
    [
        (b"data: x", "x"),
        (b"data:x", "x"),
        (b"data:  x", " x"),  # only one leading space is dropped
        (b"data: x ", "x "),
        (b"data:", ""),
        (b"data", ""),  # a field name alone: empty value
        (b"data: a:b: c", "a:b: c"),  # only the first colon separates
    ],
)
def test_data_value_forms(line: bytes, value: str) -> None:
    assert decode([line + b"\n\n"]) == [SSEEvent(data=value)]


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert decode([b"data: {\ndata:  1\ndata: }\n\n"]) == [SSEEvent(data="{\n 1\n}")]
    assert decode([b"data:\ndata:\n\n"]) == [SSEEvent(data="\n")]


@pytest.mark.parametrize(
    ("line", "text"), [(b": ping", "ping"), (b":ping", "ping"), (b":", ""), (b":  two", " two")]
)
def test_comments_come_out_as_comment_events(line: bytes, text: str) -> None:
    assert decode([line + b"\n"]) == [SSEEvent(comment=text)]


def test_a_comment_inside_an_event_neither_dispatches_nor_breaks_it() -> None:
    body = b"data: a\n: keep-alive\ndata: b\n\n"
    assert decode([body]) == [SSEEvent(comment="keep-alive"), SSEEvent(data="a\nb")]


def test_event_and_id_fields() -> None:
    body = b"event: delta\nid: 7\ndata: x\n\ndata: y\n\n"
    events = decode([body])
    assert events[0] == SSEEvent(data="x", event="delta", id="7")
    assert events[1].data == "y" and events[1].event is None


@pytest.mark.parametrize(
    "line",
    [b"retry: 3000", b"retry", b"foo: bar", b"Data: upper-case is another field", b" data: x"],
)
def test_retry_and_unknown_fields_are_ignored(line: bytes) -> None:
    assert decode([b"data: x\n" + line + b"\ndata: y\n\n"]) == [SSEEvent(data="x\ny")]
    # On their own they carry no data: nothing a frame parser could take.
    assert all(e.data is None and e.comment is None for e in decode([line + b"\n\n"]))


@pytest.mark.parametrize("body", [b"\n", b"\n\n\n", b"\r\n\r\n", b"\r\r", b"\n\r\n\r"])
def test_blank_lines_with_no_fields_dispatch_nothing(body: bytes) -> None:
    assert decode([body]) == []
    assert decode([b"data: a\n\n" + body + b"data: b\n\n"]) == [
        SSEEvent(data="a"),
        SSEEvent(data="b"),
    ]


# -- end of body -------------------------------------------------------------------


def test_flush_returns_an_unterminated_last_event() -> None:
    # KoboldCpp ends its stream with `data: [DONE]` and no blank line.
    decoder = SSEDecoder()
    assert decoder.feed(b"data: {}\n\ndata: [DONE]") == [SSEEvent(data="{}")]
    assert decoder.flush() == [SSEEvent(data="[DONE]", terminated=False)]
    assert decoder.flush() == []  # flushing again finds nothing


def test_flush_of_a_terminated_line_without_its_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: [DONE]\n") == []
    assert decoder.flush() == [SSEEvent(data="[DONE]", terminated=False)]


def test_flush_of_an_event_cut_mid_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"choices":[\n\ndata: {"cho') == [SSEEvent(data='{"choices":[')]
    assert decoder.flush() == [SSEEvent(data='{"cho', terminated=False)]


@pytest.mark.parametrize("body", [b"data: x\n\n", b"data: x\r\n\r\n", b"data: x\r\r", b""])
def test_flush_after_a_clean_end_returns_nothing(body: bytes) -> None:
    decoder = SSEDecoder()
    decoder.feed(body)
    assert decoder.flush() == []


def test_flush_of_an_unterminated_comment() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\n\n: ping") == [SSEEvent(data="x")]
    assert decoder.flush() == [SSEEvent(comment="ping")]


# -- UTF-8 -------------------------------------------------------------------------

MULTIBYTE = "data: é € 😀 中\n\n".encode()


@pytest.mark.parametrize("k", range(len(MULTIBYTE) + 1))
def test_a_character_split_across_feeds_decodes_intact(k: int) -> None:
    assert decode([MULTIBYTE[:k], MULTIBYTE[k:]]) == [SSEEvent(data="é € 😀 中")]


def test_a_character_fed_byte_by_byte_decodes_intact() -> None:
    pieces = [MULTIBYTE[i : i + 1] for i in range(len(MULTIBYTE))]
    assert decode(pieces) == [SSEEvent(data="é € 😀 中")]


@pytest.mark.parametrize(
    "bad",
    [b"data: \xff", b"data: \xc3(", b"data: \xed\xa0\x80", b"id: \x80", b"event: \xe2\x82"],
)
def test_invalid_utf8_marks_its_event_undecodable_and_only_that_event(bad: bytes) -> None:
    events = decode([b"data: before\n\n" + bad + b"\ndata: same event\n\ndata: next\n\n"])
    assert events[0] == SSEEvent(data="before")
    assert events[1].undecodable and events[1].terminated
    assert events[2] == SSEEvent(data="next")
    assert len(events) == 3


def test_an_undecodable_line_alone_still_dispatches_an_event_to_count() -> None:
    assert decode([b"data: \xff\n\n"]) == [SSEEvent(undecodable=True)]


def test_a_character_cut_off_at_end_of_body_is_undecodable_not_an_error() -> None:
    assert decode([b"data: \xe2\x82"]) == [SSEEvent(terminated=False, undecodable=True)]


def test_an_undecodable_comment_does_not_poison_the_next_event() -> None:
    events = decode([b": \xff\xfe\ndata: ok\n\n"])
    assert [e for e in events if e.data is not None] == [SSEEvent(data="ok")]


def test_a_leading_bom_is_stripped() -> None:
    assert decode([b"\xef\xbb\xbfdata: x\n\n"]) == [SSEEvent(data="x")]


# -- split invariance (hypothesis) ---------------------------------------------------


@st.composite
def cut_into_pieces(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """`data` in non-empty pieces cut at drawn offsets."""
    cuts = draw(st.sets(st.integers(1, max(len(data) - 1, 1)), max_size=40))
    return [p for p in split_at(data, [c for c in cuts if c < len(data)]) if p]


@given(st.data(), st.binary(max_size=400))
def test_any_bytes_in_any_pieces_give_the_same_events(data: st.DataObject, body: bytes) -> None:
    pieces = data.draw(cut_into_pieces(body))
    assert b"".join(pieces) == body
    assert decode(pieces) == decode([body])


_VALUE = st.text(st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]))
_LINE = st.one_of(
    st.builds("data: {}".format, _VALUE),
    st.builds("data:{}".format, _VALUE),
    st.builds(": {}".format, _VALUE),
    st.builds("event: {}".format, _VALUE),
    st.builds("id: {}".format, _VALUE),
    st.sampled_from(["retry: 100", "data: [DONE]", "data", "event", ""]),
).map(str.encode) | st.sampled_from([b"data: \xff\xfe", b"data: \xe2\x82", b"id: \xc3("])
_SSE_LIKE = st.lists(
    st.tuples(_LINE, st.sampled_from([b"\n", b"\r", b"\r\n", b"\n\n", b"\r\n\r\n"])),
    max_size=25,
).map(lambda lines: b"".join(line + eol for line, eol in lines))


@given(st.data(), _SSE_LIKE, st.booleans())
def test_sse_like_text_in_any_pieces_gives_the_same_events(
    data: st.DataObject, body: bytes, cut_tail: bool
) -> None:
    if cut_tail and body:
        body = body[: data.draw(st.integers(0, len(body) - 1))]  # an unterminated end too
    pieces = data.draw(cut_into_pieces(body))
    assert decode(pieces) == decode([body])


def _reference_events(body: bytes) -> list[SSEEvent]:
    """An independent reading of the same rules: split the whole body, then interpret."""
    *lines, tail = re.split(rb"\r\n|\r|\n", body)
    if tail:
        lines.append(tail)
    out: list[SSEEvent] = []
    data: list[str] = []
    fields: dict[str, str] = {}
    is_open = bad = False
    for raw in lines:
        if raw == b"":
            if is_open:
                out.append(
                    SSEEvent(
                        data="\n".join(data) if data else None,
                        event=fields.get("event"),
                        id=fields.get("id"),
                        undecodable=bad,
                    )
                )
            data, fields, is_open, bad = [], {}, False, False
            continue
        try:
            line = raw.decode()
        except UnicodeDecodeError:
            is_open = bad = True
            continue
        if line.startswith(":"):
            out.append(SSEEvent(comment=line[2:] if line.startswith(": ") else line[1:]))
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        is_open = True
        if name == "data":
            data.append(value)
        elif name in ("event", "id"):
            fields[name] = value
    if is_open:
        out.append(
            SSEEvent(
                data="\n".join(data) if data else None,
                event=fields.get("event"),
                id=fields.get("id"),
                terminated=False,
                undecodable=bad,
            )
        )
    return out


@given(st.data(), _SSE_LIKE)
def test_sse_like_text_matches_an_independent_reading(data: st.DataObject, body: bytes) -> None:
    assert decode(data.draw(cut_into_pieces(body))) == _reference_events(body)


# -- golden transcripts --------------------------------------------------------------


@pytest.mark.parametrize("path", golden_params())
def test_golden_transcript_split_at_every_offset_gives_the_same_events(path: Path) -> None:
    data = read_golden(path)
    whole = decode([data])
    assert whole and all(e.terminated and not e.undecodable for e in whole)
    assert [e.data for e in whole] == [
        line[len(b"data: ") :].decode() for line in data.split(b"\n") if line
    ]
    outcomes = split_outcomes(path)
    bad = {k[0] for events, k in outcomes.items() if list(events) != whole and k}
    assert not bad, f"{path.name}: splits at {sorted(bad)[:10]} give other events"
    assert sorted(outcomes[tuple(whole)]) == list(range(len(data) + 1))


@given(st.data())
def test_golden_transcripts_in_many_random_pieces_give_the_same_events(
    data: st.DataObject,
) -> None:
    path = data.draw(st.sampled_from(golden_transcripts()))
    body = read_golden(path)
    pieces = data.draw(cut_into_pieces(body))
    assert decode(pieces) == decode([body])


def test_fixture_copies_are_byte_identical_to_the_shared_captures() -> None:
    fixtures = sorted(FIXTURES_DIR.glob("*.sse.txt"))
    assert fixtures, f"no fixture copies under {FIXTURES_DIR}"
    if not SHARED_LLAMACPP.is_dir():
        pytest.skip(f"{SHARED_LLAMACPP} absent: nothing to compare the copies with")
    for path in fixtures:
        assert path.read_bytes() == (SHARED_LLAMACPP / path.name).read_bytes(), path.name


# -- max_event_bytes ------------------------------------------------------------


def test_event_limit_fast_path_frame_keeps_the_events_before_it() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    with pytest.raises(EventTooLarge, match=r"max_event_bytes \(100 bytes\)") as caught:
        decoder.feed(b"data: a\n\ndata: b\n\ndata: " + b"x" * 200 + b"\n\ndata: c\n\n")
    assert [e.data for e in caught.value.events] == ["a", "b"]


def test_event_limit_counts_an_unterminated_line_across_feeds() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    assert decoder.feed(b"data: ok\n\ndata: " + b"y" * 50) == [SSEEvent("ok")]
    with pytest.raises(EventTooLarge):
        decoder.feed(b"y" * 60)


def test_event_limit_counts_every_line_of_one_event() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    with pytest.raises(EventTooLarge):
        for _ in range(5):
            decoder.feed(b"data: " + b"z" * 30 + b"\n")
    small = SSEDecoder(max_event_bytes=100)
    for _ in range(3):  # each event under the limit, however many there are
        assert small.feed(b"data: " + b"z" * 80 + b"\r\n\r\n") == [SSEEvent("z" * 80)]


def test_no_event_limit_by_default() -> None:
    assert SSEDecoder().feed(b"data: " + b"w" * 2**20 + b"\n\n") == [SSEEvent("w" * 2**20)]


def test_stray_json_reads_a_bare_object_between_events_at_any_split() -> None:
    body = b'data: {"a": 1}\n\n{\n  "error": {\n    "code": 499\n  }\n}\n'
    for cut in range(len(body) + 1):
        decoder = SSEDecoder(stray_json=True)
        events = decoder.feed(body[:cut]) + decoder.feed(body[cut:]) + decoder.flush()
        datas = [json.loads(e.data) for e in events if e.data is not None]
        assert datas == [{"a": 1}, {"error": {"code": 499}}], cut


def test_without_stray_json_a_bare_object_is_ignored_as_eventsource_does() -> None:
    decoder = SSEDecoder()
    events = decoder.feed(b'data: {"a": 1}\n\n{\n  "error": 1\n}\n') + decoder.flush()
    assert [e.data for e in events if e.data is not None] == ['{"a": 1}']


# -- KeepAliveWatch: pings alone must not outlast the read timeout ---------------------

PING = SSEEvent(comment="")
TOKEN = SSEEvent(data='{"choices": []}')


def test_keepalive_watch_raises_once_only_comments_came_for_the_limit() -> None:
    watch = KeepAliveWatch(30.0, now=100.0)
    watch.seen([PING], 129.9)  # within the limit
    watch.seen([], 200.0)  # half an event: no line completed, no verdict
    with pytest.raises(KeepAliveOnly, match=r"more than 30s \(keep-alive comments only\)"):
        watch.seen([PING, PING], 130.0)


def test_keepalive_watch_an_event_restarts_the_limit() -> None:
    watch = KeepAliveWatch(30.0, now=0.0)
    watch.seen([PING, TOKEN], 25.0)  # an event among comments is an answer
    watch.seen([PING], 54.0)
    assert watch.last == 25.0
    with pytest.raises(KeepAliveOnly):
        watch.seen([PING], 55.0)


def test_keepalive_watch_without_a_limit_never_raises() -> None:
    watch = KeepAliveWatch(None, now=0.0)
    watch.seen([PING], 1e9)
