"""The redactor: every form a secret takes in text, taken out; the streaming scrubber."""

from __future__ import annotations

import json
import re
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmchat.errors import InvalidArgumentError, InvalidTypeError
from llmchat.redact import REDACTED, Redactor, StreamScrubber, check_secret, secret_forms

KEY = "sk-test/A+b=c_d"  # "/" and "+" so the escaped and encoded forms differ from the key
FORMS = {
    "exact": KEY,
    "repr": repr(KEY + "\n")[1:-1],
    "json": json.dumps(KEY)[1:-1],
    "json-slash": json.dumps(KEY)[1:-1].replace("/", "\\/"),
    "percent": quote(KEY, safe=""),
    "percent-lower": re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quote(KEY, safe="")),
    "plus": quote_plus(KEY, safe=""),
    "header-repr": repr(f"Bearer {KEY}\n"),
    "header-json": json.dumps(f"Bearer {KEY}"),
}


def test_forms_differ_for_this_key() -> None:
    forms = secret_forms(KEY)
    assert {KEY, KEY.replace("/", "\\/"), quote(KEY, safe=""), quote_plus(KEY)} <= forms


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_text_form_is_redacted(form: str) -> None:
    redactor = Redactor.of([KEY])
    out = redactor.text(f"before {form} after")
    assert REDACTED in out
    for secret_form in secret_forms(KEY):
        assert secret_form not in out
    assert out.startswith("before ") and out.endswith(" after")


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_bytes_form_is_redacted(form: str) -> None:
    out = Redactor.of([KEY]).data(f"<{form}>".encode())
    assert REDACTED.encode() in out
    assert not any(f in out for f in Redactor.of([KEY]).byte_forms)


def test_non_ascii_key_json_ensure_ascii_form() -> None:
    key = "clé-ü/1"
    redactor = Redactor.of([key])
    assert REDACTED in redactor.text(json.dumps({"k": key}))  # \u00e9 escapes
    assert REDACTED in redactor.text(json.dumps({"k": key}, ensure_ascii=False))


def test_header_form_takes_the_bearer_prefix_too() -> None:
    text = "Invalid header value: 'Bearer sk-test/A+b=c_d\\n'"
    assert Redactor.of([KEY]).text(text) == f"Invalid header value: '{REDACTED}\\n'"


def test_clean_data_is_the_same_object() -> None:
    data = b"data: {}\n\n"
    assert Redactor.of([KEY]).data(data) is data
    assert StreamScrubber(Redactor.of([KEY])).feed(data) is data


def test_no_secrets_is_a_no_op() -> None:
    redactor = Redactor.of([])
    assert not redactor
    data = b"anything sk-"
    assert redactor.data(data) is data and redactor.stream().feed(data) is data
    assert redactor.text("x") == "x"


def test_built_once_per_set_of_secrets() -> None:
    assert Redactor.of([KEY]) is Redactor.of((KEY, ""))
    assert Redactor.of([KEY]) is not Redactor.of(["other-key"])


def test_repr_never_shows_a_form() -> None:
    assert KEY not in repr(Redactor.of([KEY]))


def test_exception_text_is_scrubbed_with_its_traceback() -> None:
    try:
        raise ValueError(f"header 'Bearer {KEY}\\n'")
    except ValueError as exc:
        text = Redactor.of([KEY]).exception(exc)
    assert "Traceback" in text and "ValueError" in text and KEY not in text


def test_stream_holds_back_only_a_possible_start() -> None:
    scrubber = Redactor.of([KEY]).stream()
    assert scrubber.feed(b"hello sk-te") == b"hello "
    assert scrubber.feed(b"st/A+b=c_d bye") == REDACTED.encode() + b" bye"
    assert scrubber.feed(b"x s") == b"x "
    assert scrubber.feed(b"oup") == b"soup"
    assert scrubber.flush() == b""


def test_stream_flush_releases_a_tail_that_was_no_key() -> None:
    scrubber = Redactor.of([KEY]).stream()
    assert scrubber.feed(b"ends with sk-tes") == b"ends with "
    assert scrubber.flush() == b"sk-tes"


_PIECES = st.sampled_from(
    [b"data: ", b'{"e": "', b"\n\n", b"sk-", b"Bearer ", b"x", b"\\/", b"%2F", b"\xc3\xa9"]
    + [f.encode() for f in FORMS.values()]
    + [KEY.encode()[:n] for n in range(1, len(KEY))]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=12))
def test_stream_equals_whole_at_every_split_point(pieces: list[bytes]) -> None:
    redactor = Redactor.of([KEY])
    whole = b"".join(pieces)
    expected = redactor.data(whole)
    for cut in range(len(whole) + 1):
        scrubber = redactor.stream()
        out = scrubber.feed(whole[:cut]) + scrubber.feed(whole[cut:]) + scrubber.flush()
        assert out == expected, cut


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECES, max_size=10), st.data())
def test_stream_equals_whole_for_any_chunking(pieces: list[bytes], data: st.DataObject) -> None:
    redactor = Redactor.of([KEY, "second-key"])
    whole = b"".join(pieces)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(whole)), max_size=6)))
    scrubber = redactor.stream()
    out, start = [], 0
    for cut in [*cuts, len(whole)]:
        out.append(scrubber.feed(whole[start:cut]))
        start = cut
    out.append(scrubber.flush())
    joined = b"".join(out)
    assert joined == redactor.data(whole)
    assert not any(form in joined for form in redactor.byte_forms)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("sk-abc\n", "control character"),
        ("sk-\tabc", "control character"),
        ("sk-abc\r\n", "control character"),
        (" sk-abc", "whitespace"),
        ("sk-abc ", "whitespace"),
    ],
)
def test_check_secret_rejects_without_quoting(value: str, problem: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check_secret("api_key", value)
    message = str(info.value)
    assert "api_key" in message and problem in message
    assert value.strip() not in message
    assert isinstance(info.value, ValueError)


def test_check_secret_accepts_a_clean_key_and_none() -> None:
    assert check_secret("api_key", "sk-abc") == "sk-abc"
    assert check_secret("api_key", None) is None
    with pytest.raises(InvalidTypeError):
        check_secret("api_key", 3)  # type: ignore[arg-type]


def test_gemini_key_header_is_redacted() -> None:
    from llmchat.redact import redact_headers

    got = redact_headers({"X-Goog-Api-Key": "k-123", "Accept": "text/event-stream"})
    assert got == {"X-Goog-Api-Key": "[redacted]", "Accept": "text/event-stream"}


_TEXT_PIECES = st.sampled_from(
    ["the key ", "x", "s", "é", "Bearer ", "%2F", "\n"]
    + list(FORMS.values())
    + [KEY[:n] for n in range(1, len(KEY))]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXT_PIECES, max_size=12))
def test_text_stream_equals_whole_at_every_split_point(pieces: list[str]) -> None:
    """A streamed answer's text deltas: a key split across any of them is still caught."""
    redactor = Redactor.of([KEY])
    scrubber = redactor.text_stream()
    out = "".join(scrubber.feed(piece) for piece in pieces) + scrubber.flush()
    assert out == redactor.text("".join(pieces))
    assert not scrubber.holding


def test_text_stream_holds_back_only_a_possible_start() -> None:
    scrubber = Redactor.of([KEY]).text_stream()
    assert scrubber.feed("hello sk-te") == "hello "
    assert scrubber.holding
    assert scrubber.feed("st/A+b=c_d bye") == REDACTED + " bye"
    assert scrubber.feed("no tail") == "no tail" and not scrubber.holding
