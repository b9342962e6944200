"""One reply, two modes: a blocking body and its SSE stream must give the same Response.

Each example generates one reply, serves it over real sockets (the loopback
`ScriptedServer`) once as a blocking body (``chat.completion`` or
``text_completion``) and once as the equivalent stream (``chat.completion.chunk``
deltas or ``choices[0].text`` pieces, then a ``choices: []`` usage event, then
``[DONE]``), and compares everything a caller reads. Only the public API is
used, so the file runs unchanged against any core.

What "equivalent" means, by the spec (``/work/shared/specs/llm-chat-openaicommon.txt``:
STREAM TERMINATION CONTRACT, "Correcting a provider's finish reason"):

- The blocking message holds the whole reply: text, reasoning (in the same
  spelling the stream uses: ``reasoning_content``, ``reasoning``, or a list
  ``content`` of ``thinking`` and ``text`` parts), refusal, and every tool call
  whole in ``message.tool_calls``; the stream carries the same pieces as deltas,
  tool calls in one of the assembly styles the library accepts (by index, by id
  without index, by position, whole in one delta), arguments cut anywhere.
- Top-level ``citations`` are on the body; in the stream on every event, on the
  first, or on the finish event (never only after it: after the finish chunk
  only usage and model count).
- The usage block is on the body; in the stream it is the ``choices: []`` event
  after the finish chunk, as ``stream_options.include_usage`` sends it.
- An in-band ``error`` object is on the body (top level or on the choice); in
  the stream it is an event of its own after the content and before the finish
  chunk. Such replies carry no tool calls (where a failed stream's half-made
  calls should go is not what this file tests).

Chunks are compared as a caller who iterates reads them (`chunk_view`): the
text, reasoning and refusal they add up to, every tool call (each lands whole on
exactly one chunk), the finish reason they carry, and the last usage and
citations any chunk carried. A stream cannot hold its usage on the chunk that
carries the finish reason (the usage frame comes after it, and that chunk is
published when it arrives), so "the final Chunk's usage" is read as the last
usage a chunk carried. Chunks are not compared for replies with an in-band error:
whether a failed blocking body publishes its one chunk is not settled by the spec.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat.testing import ScriptedServer

from .equivalence_cases import Case, cases
from .equivalence_support import assert_equivalent, serve_both


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    with srv:
        yield srv


# -- the properties ----------------------------------------------------------------------

CHAT_FAMILIES: Final = {
    # Text pieces, reasoning_content / reasoning, refusal, every finish reason and
    # usage, over every framing: what the old core already agrees on.
    "prose": frozenset({"reasoning", "refusal", "wire"}),
    "list-content": frozenset({"list"}),
    "tool-calls": frozenset({"tools", "wire"}),
    "citations": frozenset({"citations"}),
    "in-band-errors": frozenset({"errors", "reasoning"}),
    "eos-reconciled": frozenset({"eos_map", "tools"}),
}


@pytest.mark.parametrize("family", list(CHAT_FAMILIES))
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_chat_family_agrees_in_both_modes(
    server: ScriptedServer, family: str, data: st.DataObject
) -> None:
    case = data.draw(cases("chat", CHAT_FAMILIES[family]), label="case")
    assert_equivalent(case, *serve_both(server, case))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases("chat"))
def test_any_chat_reply_agrees_in_both_modes(server: ScriptedServer, case: Case) -> None:
    assert_equivalent(case, *serve_both(server, case))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases("text"))
def test_any_text_reply_agrees_in_both_modes(server: ScriptedServer, case: Case) -> None:
    assert_equivalent(case, *serve_both(server, case))
