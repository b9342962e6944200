"""`Handoff`: the Anthropic body takes every chunk the pump queued in one go, in order."""

from __future__ import annotations

import threading

from llmchat.proxy.faces.anthropic.body import _EMPTY, _END, Handoff

WAIT = 10.0


def test_take_gives_every_queued_item_in_order_as_one_list() -> None:
    handoff = Handoff(8)
    for item in ("a", "b", "c"):
        assert handoff.put(item)
    assert handoff.take(WAIT) == ["a", "b", "c"]
    assert handoff.take(0.0) is _EMPTY  # nothing left: the wait ends at once


def test_the_end_marker_comes_in_the_batch_it_was_queued_with() -> None:
    handoff = Handoff(8)
    handoff.put("a")
    handoff.put(_END, last=True)
    assert handoff.take(WAIT) == ["a", _END]


def test_take_makes_room_for_a_pump_waiting_on_a_full_queue() -> None:
    handoff = Handoff(2)
    handoff.put(1)
    handoff.put(2)
    put_done = threading.Event()

    def pump() -> None:
        handoff.put(3)  # blocks until the queue has room
        put_done.set()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    assert handoff.take(WAIT) == [1, 2]
    assert put_done.wait(WAIT)
    assert handoff.take(WAIT) == [3]
    thread.join(WAIT)


def test_a_closed_handoff_ends_both_sides() -> None:
    handoff = Handoff(2)
    handoff.put(1)
    handoff.close()
    assert handoff.take(WAIT) is _END  # what was queued is dropped: nobody is reading
    assert handoff.put(2) is False


def test_put_all_adds_a_batch_whole_once_there_is_room() -> None:
    """The pump puts what one batch holds under one lock: it waits only while the
    queue is full, and then the whole batch goes in, past the bound if need be."""
    handoff = Handoff(2)
    assert handoff.put_all(["a", "b", "c"])  # room for one: all three go in
    put_done = threading.Event()

    def pump() -> None:
        handoff.put_all(["d", "e"])  # full: waits for the body to take
        put_done.set()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    assert handoff.take(WAIT) == ["a", "b", "c"]
    assert put_done.wait(WAIT)
    assert handoff.take(WAIT) == ["d", "e"]
    thread.join(WAIT)
    handoff.close()
    assert handoff.put_all(["f"]) is False
