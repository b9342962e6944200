"""ndjson: the push decoder — line ends, blank lines, flush, UTF-8, the limit, split invariance.

The golden bodies are the ``*.ndjson`` Ollama captures in the shared folder
(see its PROVENANCE.md); two of them end without a final LF, which `flush`
must still read. When the folder is absent those tests show as one skip.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat.ndjson import NDJSONDecoder
from llmchat.sse import EventTooLarge, SSEEvent

from .support.paths import CAPTURES_DIR

SHARED_OLLAMA = CAPTURES_DIR / "ollama"


def decode(pieces: Sequence[bytes], max_event_bytes: int | None = None) -> list[SSEEvent]:
    """Feed `pieces` in order to a fresh decoder, then flush."""
    decoder = NDJSONDecoder(max_event_bytes)
    events: list[SSEEvent] = []
    for piece in pieces:
        events += decoder.feed(piece)
    return events + decoder.flush()


def split_at(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    """`data` cut at the given offsets (duplicates and ends allowed)."""
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in pairwise(bounds)]


def events(*lines: str, last_unterminated: bool = False) -> list[SSEEvent]:
    out = [SSEEvent(line) for line in lines]
    if last_unterminated:
        out[-1].terminated = False
    return out


# -- lines -------------------------------------------------------------------------


def test_one_event_per_line_with_the_line_as_data() -> None:
    body = b'{"a":1}\n{"b":[2, 3]}\n'
    assert decode([body]) == events('{"a":1}', '{"b":[2, 3]}')


def test_crlf_endings_are_dropped_from_the_text() -> None:
    assert decode([b'{"a":1}\r\n{"b":2}\r\n']) == events('{"a":1}', '{"b":2}')


def test_a_crlf_split_between_feeds_is_one_line_end() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b'{"a":1}\r') == []
    assert decoder.feed(b'\n{"b":2}\r\n') == events('{"a":1}', '{"b":2}')
    assert decoder.flush() == []


def test_a_bare_cr_is_not_a_line_end() -> None:
    # JSON allows a raw CR only as whitespace between tokens: it stays in the line.
    assert decode([b'{"a":\r1}\n']) == events('{"a":\r1}')
    assert decode([b'{"a":1}\r\r\n']) == events('{"a":1}\r')


@pytest.mark.parametrize(
    "blank", [b"\n", b"\r\n", b"   \n", b"\t \r\n", b"\n\n\n", b" \r \n"], ids=repr
)
def test_blank_and_whitespace_only_lines_are_skipped(blank: bytes) -> None:
    assert decode([blank]) == []
    assert decode([b"{}\n" + blank + b"[]\n"]) == events("{}", "[]")
    assert decode([b"{}\n" + blank.rstrip(b"\n")]) == events("{}")  # also as the last line


def test_surrounding_spaces_stay_in_the_text() -> None:
    # Only the line end is taken off; JSON readers skip the rest themselves.
    assert decode([b'  {"a": 1}  \n']) == events('  {"a": 1}  ')


def test_a_form_feed_line_is_not_blank() -> None:
    # Not JSON whitespace: handed on for the accumulator to count as a bad frame.
    assert decode([b"\x0c\n"]) == events("\x0c")


def test_a_leading_bom_is_stripped_once() -> None:
    bom = b"\xef\xbb\xbf"
    assert decode([bom + b"{}\n" + bom + b"[]\n"]) == events("{}", "\ufeff[]")
    assert decode([bom[:1], bom[1:2], bom[2:] + b"{}\n"]) == events("{}")
    assert decode([bom]) == []


def test_a_bom_start_that_is_not_a_bom_is_body() -> None:
    assert decode([b"\xef\xbb", b"x\n"]) == [SSEEvent(undecodable=True)]
    assert decode([b"\xef"]) == [SSEEvent(terminated=False, undecodable=True)]


# -- end of body -------------------------------------------------------------------


def test_flush_reads_a_last_line_without_its_newline() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b'{"done":false}\n{"done":true}') == events('{"done":false}')
    assert decoder.flush() == events('{"done":true}', last_unterminated=True)
    assert decoder.flush() == []  # flushing again finds nothing


def test_flush_of_a_line_cut_mid_json_hands_it_on_unterminated() -> None:
    # The accumulator, not the framing, counts it as a frame cut off mid-JSON.
    assert decode([b'{"a":1}\n{"resp']) == events('{"a":1}', '{"resp', last_unterminated=True)


def test_flush_drops_the_cr_of_a_crlf_cut_before_its_lf() -> None:
    assert decode([b"{}\r"]) == events("{}", last_unterminated=True)


@pytest.mark.parametrize("body", [b"{}\n", b"{}\r\n", b"{}\n\n", b"", b"{}\n  "])
def test_flush_after_a_clean_end_returns_nothing(body: bytes) -> None:
    decoder = NDJSONDecoder()
    decoder.feed(body)
    assert decoder.flush() == []


def test_an_empty_feed_changes_nothing() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(b"{") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"}\n") == events("{}")


# -- UTF-8 -------------------------------------------------------------------------

MULTIBYTE = '{"response":"é € 😀 中"}\n'.encode()


@pytest.mark.parametrize("k", range(len(MULTIBYTE) + 1))
def test_a_character_split_across_feeds_decodes_intact(k: int) -> None:
    assert decode([MULTIBYTE[:k], MULTIBYTE[k:]]) == events('{"response":"é € 😀 中"}')


def test_a_body_fed_byte_by_byte_decodes_intact() -> None:
    body = MULTIBYTE * 3
    pieces = [body[i : i + 1] for i in range(len(body))]
    assert decode(pieces) == decode([body]) == events(*['{"response":"é € 😀 中"}'] * 3)


@pytest.mark.parametrize("bad", [b"\xff", b'{"a":"\xc3("}', b"\xed\xa0\x80", b'{"a":"\xe2\x82"}'])
def test_an_invalid_utf8_line_is_undecodable_and_only_that_line(bad: bytes) -> None:
    got = decode([b'{"n":1}\n' + bad + b'\n{"n":2}\n'])
    assert got == [SSEEvent('{"n":1}'), SSEEvent(undecodable=True), SSEEvent('{"n":2}')]


def test_a_character_cut_off_at_end_of_body_is_undecodable_not_an_error() -> None:
    assert decode([b'{"a":"\xe2\x82']) == [SSEEvent(terminated=False, undecodable=True)]


# -- max_event_bytes ------------------------------------------------------------------


def test_a_line_over_the_limit_raises_with_the_events_before_it() -> None:
    decoder = NDJSONDecoder(max_event_bytes=10)
    with pytest.raises(EventTooLarge) as caught:
        decoder.feed(b'{"a":1}\n{"b":2}\n' + b"x" * 11 + b'\n{"c":3}\n')
    assert caught.value.events == events('{"a":1}', '{"b":2}')
    assert caught.value.limit == 10
    assert "max_event_bytes (10 bytes)" in str(caught.value)


def test_a_line_at_the_limit_passes_and_its_line_end_is_not_counted() -> None:
    assert decode([b"x" * 10 + b"\n"], max_event_bytes=10) == events("x" * 10)
    with pytest.raises(EventTooLarge):  # the CR of a CRLF ending is part of the line
        decode([b"x" * 10 + b"\r\n"], max_event_bytes=10)


def test_a_partial_line_over_the_limit_raises_before_its_newline() -> None:
    decoder = NDJSONDecoder(max_event_bytes=10)
    assert decoder.feed(b'{"a":1}\n' + b"x" * 6) == events('{"a":1}')
    with pytest.raises(EventTooLarge) as caught:
        decoder.feed(b"x" * 5)  # no LF yet: 11 bytes buffered
    assert caught.value.events == []


def test_a_partial_line_over_the_limit_in_the_same_feed_carries_the_events() -> None:
    with pytest.raises(EventTooLarge) as caught:
        NDJSONDecoder(max_event_bytes=4).feed(b"[1]\n{}\n" + b"y" * 5)
    assert caught.value.events == events("[1]", "{}")


def test_a_leading_bom_does_not_count_against_the_limit() -> None:
    assert decode([b"\xef\xbb\xbf" + b"x" * 4 + b"\n"], max_event_bytes=4) == events("xxxx")
    assert decode([b"\xef\xbb", b"\xbf" + b"x" * 4], max_event_bytes=4) == events(
        "xxxx", last_unterminated=True
    )


def test_an_undecodable_line_is_still_bounded() -> None:
    with pytest.raises(EventTooLarge) as caught:
        decode([b"{}\n\xff" + b"x" * 5 + b"\n"], max_event_bytes=5)
    assert caught.value.events == events("{}")


def outcome(pieces: Sequence[bytes], limit: int | None) -> tuple[list[SSEEvent], bool]:
    """All events a reader would see (including `EventTooLarge.events`), and whether it raised."""
    decoder = NDJSONDecoder(limit)
    seen: list[SSEEvent] = []
    try:
        for piece in pieces:
            seen += decoder.feed(piece)
        seen += decoder.flush()
    except EventTooLarge as exc:
        return seen + exc.events, True
    return seen, False


# -- golden captures ------------------------------------------------------------------


def golden_params() -> list[Any]:
    if not SHARED_OLLAMA.is_dir():
        return [
            pytest.param(
                None,
                id="shared-captures",
                marks=pytest.mark.skip(reason=f"{SHARED_OLLAMA} absent: no Ollama captures"),
            )
        ]
    paths = sorted(SHARED_OLLAMA.glob("*.ndjson"))
    return [pytest.param(path, id=path.name) for path in paths]


@pytest.mark.parametrize("path", golden_params())
def test_every_line_of_each_ollama_capture_is_one_json_event(path: Path) -> None:
    body = path.read_bytes()
    got = decode([body])
    lines = [line for line in body.split(b"\n") if line.strip()]
    assert len(got) == len(lines) > 0
    assert [json.loads(line) for line in lines] == [json.loads(e.data or "") for e in got]
    assert all(not e.undecodable for e in got)
    assert all(e.terminated for e in got[:-1])
    assert got[-1].terminated == body.endswith(b"\n")
    assert all(isinstance(json.loads(e.data or ""), dict) for e in got)


@pytest.mark.parametrize("path", golden_params())
def test_each_ollama_capture_split_at_every_offset_gives_the_same_events(path: Path) -> None:
    body = path.read_bytes()
    whole = decode([body])
    for k in range(len(body) + 1):
        assert decode([body[:k], body[k:]]) == whole, k


@pytest.mark.parametrize("path", golden_params())
def test_each_ollama_capture_fed_byte_by_byte_gives_the_same_events(path: Path) -> None:
    body = path.read_bytes()
    assert decode([body[i : i + 1] for i in range(len(body))]) == decode([body])


def test_the_midstream_error_line_comes_through_as_an_event() -> None:
    path = SHARED_OLLAMA / "docs_generate_stream_midstream_error.ndjson"
    if not path.is_file():
        pytest.skip(f"{path} absent")
    got = decode([path.read_bytes()])
    assert json.loads(got[-1].data or "") == {
        "error": "an error was encountered while running the model"
    }


# -- split invariance (hypothesis) ---------------------------------------------------


@st.composite
def cut_into_pieces(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """`data` in non-empty pieces cut at drawn offsets."""
    cuts = draw(st.sets(st.integers(1, max(len(data) - 1, 1)), max_size=40))
    return [p for p in split_at(data, [c for c in cuts if c < len(data)]) if p]


_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_LINE = st.one_of(
    _JSON.map(lambda value: json.dumps(value, ensure_ascii=False).encode()),
    st.sampled_from([b"", b"  ", b"\t", b"\r", b"\xef\xbb\xbf{}", b"\xff\xfe", b'{"a":"\xe2\x82']),
)
_NDJSON_LIKE = st.lists(
    st.tuples(_LINE, st.sampled_from([b"\n", b"\r\n", b"\n\n"])), max_size=20
).map(lambda lines: b"".join(line + eol for line, eol in lines))


def _reference_events(body: bytes) -> list[SSEEvent]:
    """An independent reading of the same rules: split the whole body at LF, then interpret."""
    if body.startswith(b"\xef\xbb\xbf"):
        body = body[3:]
    *lines, tail = body.split(b"\n")
    out: list[SSEEvent] = []
    for raw, terminated in [*((line, True) for line in lines), (tail, False)]:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not raw.strip(b" \t\r"):
            continue
        try:
            out.append(SSEEvent(raw.decode("utf-8"), terminated=terminated))
        except UnicodeDecodeError:
            out.append(SSEEvent(terminated=terminated, undecodable=True))
    return out


@given(st.data(), _NDJSON_LIKE, st.booleans())
def test_any_split_of_a_stream_gives_the_same_events(
    data: st.DataObject, body: bytes, cut_tail: bool
) -> None:
    if cut_tail and body:
        body = body[: data.draw(st.integers(0, len(body) - 1))]  # an unterminated end too
    pieces = data.draw(cut_into_pieces(body))
    assert b"".join(pieces) == body
    assert decode(pieces) == decode([body]) == _reference_events(body)


@given(st.data(), st.lists(_JSON, max_size=10), st.sampled_from([b"\n", b"\r\n"]))
def test_a_valid_stream_in_any_pieces_gives_every_value_back(
    data: st.DataObject, values: list[Any], eol: bytes
) -> None:
    body = b"".join(json.dumps(v, ensure_ascii=False).encode() + eol for v in values)
    pieces = data.draw(cut_into_pieces(body))
    assert [json.loads(event.data or "") for event in decode(pieces)] == values


@given(st.data(), st.binary(max_size=300))
def test_any_bytes_in_any_pieces_give_the_same_events(data: st.DataObject, body: bytes) -> None:
    pieces = data.draw(cut_into_pieces(body))
    assert decode(pieces) == decode([body]) == _reference_events(body)


@given(st.data(), _NDJSON_LIKE, st.integers(0, 40))
def test_the_limit_is_split_invariant(data: st.DataObject, body: bytes, limit: int) -> None:
    pieces = data.draw(cut_into_pieces(body))
    seen, raised = outcome(pieces, limit)
    whole_seen, whole_raised = outcome([body], limit)
    assert raised == whole_raised
    assert seen == whole_seen
    stripped = body[3:] if body.startswith(b"\xef\xbb\xbf") else body
    longest = max(len(line) for line in stripped.split(b"\n"))
    assert raised == (longest > limit)
