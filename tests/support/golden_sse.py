"""The golden llama-server transcripts the SSE tests read: where they are, and each one
decoded whole and split at every offset (cached: test_sse and test_stream_parser share it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from llmchat.sse import SSEDecoder, SSEEvent

from .paths import CAPTURES_DIR
from .paths import FIXTURES_DIR as SUPPORT_FIXTURES

FIXTURES_DIR = SUPPORT_FIXTURES / "llamacpp"
SHARED_LLAMACPP = CAPTURES_DIR / "llamacpp"

# Splitting a transcript at every offset is quadratic in its length. Up to this
# size each split feeds the whole file in two pieces; above it (the two 18 KB
# tool transcripts would take ~10 s each) each split feeds the event holding
# the split together with its neighbouring events — see `split_outcomes`.
LITERAL_LIMIT = 8 * 1024


def golden_transcripts() -> list[Path]:
    """The fixture copies, then every shared capture not already among them."""
    paths = sorted(FIXTURES_DIR.glob("*.sse.txt"))
    names = {path.name for path in paths}
    if SHARED_LLAMACPP.is_dir():
        paths += [p for p in sorted(SHARED_LLAMACPP.glob("*.sse.txt")) if p.name not in names]
    return paths


def golden_params() -> list[Any]:
    """A `pytest.param` per transcript, plus a visible skip when the shared folder is absent."""
    params: list[Any] = [
        pytest.param(path, id=f"{path.parent.parent.name}/{path.name}")
        for path in golden_transcripts()
    ]
    if not SHARED_LLAMACPP.is_dir():
        params.append(
            pytest.param(
                None,
                id="shared-captures",
                marks=pytest.mark.skip(
                    reason=f"{SHARED_LLAMACPP} absent: only the fixture copies were checked"
                ),
            )
        )
    return params


@cache
def read_golden(path: Path) -> bytes:
    return path.read_bytes()


def decode(pieces: Sequence[bytes]) -> list[SSEEvent]:
    """Feed `pieces` in order to a fresh decoder, then flush."""
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for piece in pieces:
        events += decoder.feed(piece)
    return events + decoder.flush()


def split_at(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    """`data` cut at the given offsets (duplicates and ends allowed)."""
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in pairwise(bounds)]


@cache
def split_outcomes(path: Path) -> dict[tuple[SSEEvent, ...], list[int]]:
    """Each distinct event sequence that reading `path` in two pieces gave, with its cut offsets.

    Every offset `k` from 0 to the length is tried. Up to `LITERAL_LIMIT`
    bytes the pieces are ``data[:k]`` and ``data[k:]``. Above it the transcript
    must be LF-only ``\\n\\n``-terminated events (the captures are; asserted):
    then the pieces are the event holding `k` plus one event of context on each
    side, cut at `k`, and the events outside that window are the ones the whole
    file gives (after ``\\n\\n`` the decoder holds no state). A correct
    decoder gives one sequence for every offset. Cached so that
    `test_stream_parser` can run its parser over every distinct outcome
    without decoding the transcript thousands of times again.
    """
    data = read_golden(path)
    whole = decode([data])
    same: list[int] = []
    outcomes: dict[tuple[SSEEvent, ...], list[int]] = {tuple(whole): same}
    if len(data) <= LITERAL_LIMIT:
        for k in range(len(data) + 1):
            events = decode([data[:k], data[k:]])
            if events == whole:
                same.append(k)
            else:
                outcomes.setdefault(tuple(events), []).append(k)
        return outcomes
    assert b"\r" not in data, f"{path.name}: the windowed split needs LF-only events"
    bounds = [0] + [m.end() for m in re.finditer(rb"\n\n", data)]
    if bounds[-1] != len(data):
        bounds.append(len(data))
    before = [len(decode([data[:b]])) for b in bounds]  # events wholly before each bound
    for i in range(len(bounds) - 1):
        lo, hi = max(i - 1, 0), min(i + 2, len(bounds) - 1)
        start, stop = before[lo], before[hi]
        window, want = data[bounds[lo] : bounds[hi]], whole[start:stop]
        for k in range(bounds[i], bounds[i + 1]):
            got = decode([window[: k - bounds[lo]], window[k - bounds[lo] :]])
            if got == want:
                same.append(k)
            else:
                outcomes.setdefault((*whole[:start], *got, *whole[stop:]), []).append(k)
    same.append(len(data))
    return outcomes


# -- line endings ------------------------------------------------------------------
