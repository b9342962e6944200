"""think_tags: the inline think-tag filter — tags split anywhere, the start rule, flush, hold-back.

The real text is DeepSeek-R1's answer in the shared Ollama capture
``obl_generate_nonstream_deepseek_r1.json`` (``<think>\\n…\\n</think>\\n\\n…``),
split at every offset; when the folder is absent that test shows as a skip.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat.errors import InvalidArgumentError
from llmchat.pipeline import ThinkTagFilter

from ..support.paths import CAPTURES_DIR

R1_CAPTURE = CAPTURES_DIR / "ollama" / "obl_generate_nonstream_deepseek_r1.json"


def run(
    pieces: Sequence[str],
    open_tag: str = "<think>",
    close_tag: str = "</think>",
    starts_inside: bool | None = None,
) -> tuple[str, str]:
    """Feed `pieces` to a fresh filter, flush, and join each side."""
    tags = ThinkTagFilter(open_tag, close_tag, starts_inside=starts_inside)
    content: list[str] = []
    thinking: list[str] = []
    for piece in [*pieces, None]:
        got = tags.feed(piece) if piece is not None else tags.flush()
        content.append(got[0])
        thinking.append(got[1])
    return "".join(content), "".join(thinking)


def steps(
    pieces: Sequence[str],
    open_tag: str = "<think>",
    close_tag: str = "</think>",
    starts_inside: bool | None = None,
) -> list[tuple[str, str]]:
    """What each `feed`, then the `flush`, returned."""
    tags = ThinkTagFilter(open_tag, close_tag, starts_inside=starts_inside)
    return [tags.feed(piece) for piece in pieces] + [tags.flush()]


# -- tags split across pieces --------------------------------------------------------


def test_a_tag_split_over_three_pieces() -> None:
    assert steps(["<th", "in", "k>why"]) == [("", ""), ("", ""), ("", "why"), ("", "")]
    assert steps(["a</", "thi", "nk>b"], starts_inside=True) == [
        ("", "a"),
        ("", ""),
        ("b", ""),
        ("", ""),
    ]


def test_thi_then_nk() -> None:
    assert steps(["ok <thi", "nk>hm</think>done"], starts_inside=False) == [
        ("ok ", ""),  # only the possible tag start is held back
        ("done", "hm"),
        ("", ""),
    ]


def test_a_lone_angle_bracket_is_released_once_it_cannot_start_a_tag() -> None:
    assert steps(["a <", " b"], starts_inside=False) == [("a ", ""), ("< b", ""), ("", "")]
    assert steps(["x<", "<", "x"], starts_inside=False) == [
        ("x", ""),
        ("<", ""),  # the second "<" may still start the tag, the first no longer
        ("<x", ""),
        ("", ""),
    ]
    assert run(["if a < b and c <= d: <b>bold</b>"]) == ("if a < b and c <= d: <b>bold</b>", "")


def test_a_tag_cut_off_at_the_end_is_text_of_its_side() -> None:
    assert steps(["answer <thi"], starts_inside=False) == [("answer ", ""), ("<thi", "")]
    assert steps(["<think>hm </thi"]) == [("", "hm "), ("", "</thi")]


# -- blocks ---------------------------------------------------------------------


def test_an_open_tag_first_makes_the_text_before_it_content() -> None:
    assert run(["Sure. <think>check</think>Yes."]) == ("Sure. Yes.", "check")


def test_an_unclosed_block_at_the_end_was_thinking_to_the_end() -> None:
    assert run(["<think>step one", "\nstep two"]) == ("", "step one\nstep two")
    assert steps(["<think>a", "b"]) == [("", "a"), ("", "b"), ("", "")]  # streams once open


def test_several_blocks_all_go_to_thinking() -> None:
    text = "<think>a</think>one <think>b</think>two<think>c</think>"
    assert run([text]) == ("one two", "abc")


def test_blocks_do_not_nest_and_a_stray_close_tag_in_the_answer_is_kept() -> None:
    assert run(["<think>a <think> b</think>c"]) == ("c", "a <think> b")
    assert run(["<think>a</think>b</think>c"]) == ("b</think>c", "a")


def test_the_thinking_is_kept_verbatim() -> None:
    assert run(["<think>\n  plan\n\n</think>x"]) == ("x", "\n  plan\n\n")


# -- newlines after the close tag -------------------------------------------------


def test_newlines_right_after_the_close_tag_leave_the_content() -> None:
    assert run(["<think>r</think>\n\nAnswer\n\nmore\n"]) == ("Answer\n\nmore\n", "r")
    assert run(["<think>r</think>\r\n\r\nAnswer"]) == ("Answer", "r")


def test_newlines_after_the_close_tag_split_over_pieces() -> None:
    assert steps(["<think>r</think>", "\n", "\n", "A\n"]) == [
        ("", "r"),
        ("", ""),
        ("", ""),
        ("A\n", ""),
        ("", ""),
    ]


def test_only_newlines_are_stripped_and_only_there() -> None:
    assert run(["<think>r</think> \nA"]) == (" \nA", "r")
    assert run(["\n\nHi <think>r</think>\n\nA"]) == ("\n\nHi A", "r")
    assert run(["<think>r</think>\n\n"]) == ("", "r")


# -- where the output starts --------------------------------------------------------


def test_a_close_tag_with_no_open_tag_means_all_text_so_far_was_thinking() -> None:
    # DeepSeek-R1 templates put <think> in the prompt: the output starts inside.
    assert run(["Okay, the user", " wants X.\n</think>\n\nX is ..."]) == (
        "X is ...",
        "Okay, the user wants X.\n",
    )


def test_the_first_tag_decides_even_when_the_other_comes_later() -> None:
    assert run(["r</think>a<think>b</think>c"]) == ("ac", "rb")
    assert run(["a<think>b</think>c</think>d"]) == ("ac</think>d", "b")


def test_undecided_text_is_held_until_the_first_tag() -> None:
    assert steps(["Okay, ", "so</th", "ink>\n\nHi"]) == [
        ("", ""),
        ("", ""),
        ("Hi", "Okay, so"),
        ("", ""),
    ]


def test_without_any_tag_the_answer_comes_out_at_flush() -> None:
    assert steps(["Plain ", "answer."]) == [("", ""), ("", ""), ("Plain answer.", "")]


def test_starts_inside_false_streams_content_at_once() -> None:
    assert steps(["Plain ", "answer."], starts_inside=False) == [
        ("Plain ", ""),
        ("answer.", ""),
        ("", ""),
    ]
    # The answer side was asserted: a leading close tag is then content.
    assert run(["r</think>a"], starts_inside=False) == ("r</think>a", "")


def test_starts_inside_true_streams_thinking_at_once() -> None:
    assert steps(["Okay", ", so</think>\n\nHi"], starts_inside=True) == [
        ("", "Okay"),
        ("Hi", ", so"),
        ("", ""),
    ]
    assert run(["never closed"], starts_inside=True) == ("", "never closed")


def test_flushing_again_returns_nothing() -> None:
    tags = ThinkTagFilter()
    tags.feed("<think>a</thi")
    assert tags.flush() == ("", "</thi")
    assert tags.flush() == ("", "")


# -- the fast path ------------------------------------------------------------------


def test_a_piece_with_no_tag_start_is_handed_back_as_it_is() -> None:
    tags = ThinkTagFilter(starts_inside=False)
    piece = "a frame of answer text with no angle bracket"
    content, thinking = tags.feed(piece)
    assert content is piece and thinking == ""
    inside = ThinkTagFilter(starts_inside=True)
    content, thinking = inside.feed(piece)
    assert thinking is piece and content == ""


# -- configurable tags --------------------------------------------------------------


def test_other_tags() -> None:
    assert run(["[THINK]a[/THI", "NK]b"], "[THINK]", "[/THINK]") == ("b", "a")
    assert run(["<think>not mine</think>", "◁think▷x◁/think▷y"], "◁think▷", "◁/think▷") == (
        "<think>not mine</think>y",
        "x",
    )


def test_a_tag_whose_start_repeats_inside_it() -> None:
    # "<<t>": after "<<<" only the last two may start it.
    assert steps(["a<<<", "t>b"], "<<t>", "<</t>", starts_inside=False) == [
        ("a<", ""),
        ("", "b"),
        ("", ""),
    ]


@pytest.mark.parametrize(
    ("open_tag", "close_tag", "words"),
    [
        ("", "</think>", "open_tag must be a non-empty str"),
        ("<think>", "", "close_tag must be a non-empty str"),
        (None, "</think>", "open_tag must be a non-empty str, got None"),
        ("<think>", b"</think>", "close_tag must be a non-empty str"),
        ("<t>", "<t>", "both '<t>'"),
        ("<t>", "<t>>", "contains the other"),
        ("</think>", "think", "contains the other"),
    ],
)
def test_bad_tags_are_refused_naming_think_tags(
    open_tag: object, close_tag: object, words: str
) -> None:
    with pytest.raises(ValueError, match="think_tags") as caught:
        ThinkTagFilter(open_tag, close_tag)  # type: ignore[arg-type]
    assert words in str(caught.value)
    assert isinstance(caught.value, InvalidArgumentError)


# -- a real answer -----------------------------------------------------------------


def test_deepseek_r1_answer_split_at_every_offset() -> None:
    if not R1_CAPTURE.is_file():
        pytest.skip(f"{R1_CAPTURE} absent")
    text = json.loads(R1_CAPTURE.read_text(encoding="utf-8"))["response"]
    head, _, answer = text.partition("</think>")
    want = (answer.lstrip("\n"), head.removeprefix("<think>"))
    assert want[0].startswith("Rabbits are") and want[1].startswith("\nAlright")
    for k in range(len(text) + 1):
        assert run([text[:k], text[k:]]) == want, k
        assert run([text[:k], text[k:]], starts_inside=False) == want, k


# -- split invariance (hypothesis) ---------------------------------------------------


def reference(
    text: str, open_tag: str, close_tag: str, starts_inside: bool | None
) -> tuple[str, str]:
    """An independent reading of the rules on the whole text at once."""
    content: list[str] = []
    thinking: list[str] = []
    inside = bool(starts_inside)
    after_close = False
    if starts_inside is None:
        opened, closed = text.find(open_tag), text.find(close_tag)
        if opened < 0 and closed < 0:
            return text, ""
        if closed < 0 or 0 <= opened < closed:
            content.append(text[:opened])
            text, inside = text[opened + len(open_tag) :], True
        else:
            thinking.append(text[:closed])
            text, after_close = text[closed + len(close_tag) :], True
    while True:
        tag = close_tag if inside else open_tag
        segment, found, text = text.partition(tag)
        if inside:
            thinking.append(segment)
        else:
            content.append(segment.lstrip("\r\n") if after_close else segment)
        if not found:
            return "".join(content), "".join(thinking)
        after_close = inside
        inside = not inside


TAG_PAIRS = [("<think>", "</think>"), ("[THINK]", "[/THINK]"), ("<<t>", "<</t>")]
_TOKEN = st.sampled_from(
    [
        "a",
        "word",
        " ",
        "\n",
        "\r\n",
        "<",
        ">",
        "/",
        "<b>",
        "[",
        "]",
        "<think>",
        "</think>",
        "<thi",
        "nk>",
        "</",
        "[THINK]",
        "[/THINK]",
        "[/TH",
        "<<t>",
        "<</t>",
        "<<",
        "t>",
        "é😀",
    ]
)
_TEXT = st.lists(_TOKEN, max_size=30).map("".join)


@st.composite
def cut_into_pieces(draw: st.DrawFn, text: str) -> list[str]:
    """`text` in pieces (empty ones too) cut at drawn offsets."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=30)))
    return [text[a:b] for a, b in pairwise([0, *cuts, len(text)])]


@given(st.data(), _TEXT, st.sampled_from(TAG_PAIRS), st.sampled_from([None, False, True]))
def test_every_split_gives_what_one_piece_gives(
    data: st.DataObject, text: str, tags: tuple[str, str], starts_inside: bool | None
) -> None:
    pieces = data.draw(cut_into_pieces(text))
    whole = run([text], *tags, starts_inside)
    assert run(pieces, *tags, starts_inside) == whole == reference(text, *tags, starts_inside)


@given(st.data(), _TEXT, st.sampled_from(TAG_PAIRS), st.booleans())
def test_only_a_possible_tag_start_is_ever_held_back(
    data: st.DataObject, text: str, tags: tuple[str, str], starts_inside: bool
) -> None:
    """Once the side is known, after each piece the unreleased text is a proper prefix of a tag."""
    pieces = data.draw(cut_into_pieces(text))
    tag_filter = ThinkTagFilter(*tags, starts_inside=starts_inside)
    fed = ""
    for piece in pieces:
        tag_filter.feed(piece)
        fed += piece
        held = "".join(copy.deepcopy(tag_filter).flush())
        assert fed.endswith(held)
        assert held == "" or any(tag.startswith(held) and held != tag for tag in tags)
