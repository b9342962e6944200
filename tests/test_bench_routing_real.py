"""The real-llama-server routing bench's pure helpers: the stream reader, the cache sums,
the accounting of outcomes (no sockets, no clocks); and the bench's quick mode over real
llama-servers, which checks the accounting across a reload and two kills."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

from bench_routing_real import (  # noqa: E402
    Outcome,
    account,
    cache_figures,
    parse_sse,
    percentile,
    user_message,
)


def frames(*events: object) -> list[bytes]:
    lines: list[bytes] = []
    for event in events:
        payload = event if isinstance(event, bytes) else json.dumps(event).encode()
        lines += [b"data: " + payload, b""]
    return lines


def test_parse_sse_reads_text_timings_usage_and_done() -> None:
    outcome = Outcome(0, 0, status=200)
    parse_sse(
        frames(
            {"choices": [{"delta": {"role": "assistant"}}]},
            {"choices": [{"delta": {"content": "he"}}]},
            {"choices": [{"delta": {"content": "llo"}}]},
            {"choices": [], "usage": {"completion_tokens": 2}, "timings": {"cache_n": 5}},
            b"[DONE]",
        ),
        outcome,
    )
    assert (outcome.text, outcome.completion_tokens, outcome.done) == ("hello", 2, True)
    assert outcome.timings == {"cache_n": 5}
    assert outcome.kind == "answered"


def test_a_stream_cut_before_done_is_in_band_and_an_error_event_is_kept() -> None:
    outcome = Outcome(0, 0, status=200)
    parse_sse(
        frames({"choices": [{"delta": {"content": "x"}}]}, {"error": {"message": "gone"}}), outcome
    )
    assert outcome.kind == "in-band"
    assert "gone" in outcome.error


def test_account_sorts_every_outcome_into_one_kind() -> None:
    outcomes = [
        Outcome(0, 0, status=200, done=True),
        Outcome(0, 1, status=200),
        Outcome(1, 0, status=503),
        Outcome(1, 1),
    ]
    assert account(outcomes) == {"answered": 1, "in-band": 1, "refused": 1, "lost": 1}


def test_cache_figures_sum_llama_server_timings() -> None:
    outcomes = [
        Outcome(0, 0, timings={"cache_n": 30, "prompt_n": 10, "prompt_ms": 2.5}),
        Outcome(0, 1, timings={"cache_n": 10, "prompt_n": 50, "prompt_ms": 7.5}),
        Outcome(0, 2),
    ]
    assert cache_figures(outcomes) == {
        "cached": 40,
        "evaluated": 60,
        "share": 0.4,
        "prefill_ms": 10.0,
    }
    assert cache_figures([])["share"] == 0.0


def test_percentile_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) in (50.0, 51.0)
    assert percentile(values, 0.99) == 99.0
    assert percentile([3.0], 0.99) == 3.0


def test_user_messages_differ_by_conversation() -> None:
    first = user_message(random.Random(1), 1, 0)
    other = user_message(random.Random(1), 2, 0)
    assert first != other and first.startswith("Conversation 1, turn 0")


def test_quick_mode_accounts_for_every_request_across_a_reload_and_two_kills() -> None:
    """The bench itself, a few requests of each part, over 3 real llama-servers: every
    request of the reload, SIGTERM and SIGKILL runs ends as one kind, none lost, none
    served twice (skipped without the llama-server binary)."""
    import pytest

    from tests.real.server import find_binary

    binary, why = find_binary()
    if binary is None:
        pytest.skip(f"no llama-server: {why}")
    pytest.importorskip("gguf", reason="the tiny model's generator needs gguf")
    from bench_routing_real import run

    figures = run(["--quick"])
    runs = {one.label: one for one in figures["disruptions"]}
    assert sorted(runs) == ["SIGKILL", "SIGTERM", "reload"]
    for label, one in runs.items():
        counts = one.counts
        strays = [
            (o.node, o.status, round(o.ended - o.started, 3), o.error)
            for o in one.outcomes
            if o.kind != "answered"
        ]
        assert sum(counts.values()) == len(one.outcomes) == 16, (label, strays)
        # A stream on the SIGTERMed node that the node never ends (it pings instead)
        # is in-band after the node's read timeout, never lost (sse.KeepAliveWatch).
        assert counts["refused"] == counts["lost"] == 0, (label, counts, strays)
        assert one.served_twice == 0, (label, one.predicted, one.delivered)
    assert runs["reload"].counts["answered"] == 16  # streams in flight finish on n0
    assert "| lost (no status) | 0 | 0 | 0 |" in figures["markdown"]
