"""Slots: indexes held in this process and in the workers' ledger, and `id_slot` pinning.

The ledger's locks are real flocks on real files (two routers sharing one
ledger stand for two workers: a flock conflicts between two opens even in one
process); a holder killed with SIGKILL is a real subprocess. `id_slot` is
checked in the bodies loopback nodes receive, through the OpenAI face's relay
and the Anthropic face's completion path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.slots import NodeSlots, SlotLedger, slot_order
from llmchat.proxy.routing.upstream import RoutedUpstream
from llmchat.testing import RecordedRequest, Reply

from ..support import CLIENTS
from .nodes_support import Node, chat, config, node_config, nodes, openai_client, routed_proxy

WAIT = 10.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the ledger needs flock")


@pytest.fixture()
def ledger(tmp_path: Path) -> Iterator[SlotLedger]:
    made = SlotLedger.create(str(tmp_path))
    try:
        yield made
    finally:
        made.remove()


# -- the ledger and a node's indexes ------------------------------------------------


def test_a_slot_held_in_the_ledger_is_refused_to_every_other_holder(ledger: SlotLedger) -> None:
    other = SlotLedger(ledger.directory)  # another worker's view of the same directory
    fd = ledger.hold("gpu-a", 0)
    assert fd is not None
    assert other.hold("gpu-a", 0) is None and ledger.hold("gpu-a", 0) is None
    second = other.hold("gpu-a", 1)  # another index, and another node's index 0, are free
    third = other.hold("gpu-b", 0)
    assert second is not None and third is not None
    ledger.let_go(fd)
    again = other.hold("gpu-a", 0)
    assert again is not None
    for held in (second, third, again):
        other.let_go(held)


def test_a_killed_holder_gives_its_slot_back(ledger: SlotLedger) -> None:
    script = (
        "import sys; from llmchat.proxy.routing.slots import SlotLedger\n"
        f"fd = SlotLedger({ledger.directory!r}).hold('gpu-a', 0)\n"
        "print('held' if fd is not None else 'refused', flush=True)\n"
        "sys.stdin.read()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    holder = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert ledger.hold("gpu-a", 0) is None
        holder.kill()  # SIGKILL: no clean-up of its own
        holder.wait(timeout=WAIT)
        fd = ledger.hold("gpu-a", 0)
        assert fd is not None  # the kernel dropped the dead process's lock
        ledger.let_go(fd)
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(timeout=WAIT)
        for stream in (holder.stdin, holder.stdout):
            if stream is not None:
                stream.close()


def test_only_the_creating_process_removes_the_directory(tmp_path: Path) -> None:
    made = SlotLedger.create(str(tmp_path))
    SlotLedger(made.directory).remove()  # a worker's copy: not the owner
    assert os.path.isdir(made.directory)
    made.remove()
    assert not os.path.exists(made.directory)


def test_indexes_are_taken_below_the_limit_and_a_key_keeps_its_own(ledger: SlotLedger) -> None:
    slots = NodeSlots("gpu-a", ledger)
    assert [slots.take(3), slots.take(3), slots.take(3), slots.take(3)] == [0, 1, 2, None]
    slots.give(1)
    slots.give(1)  # twice: ignored
    assert slots.held() == [0, 2] and slots.take(4) == 1 and slots.take(4) == 3
    for index in range(4):
        slots.give(index)
    key = 0x1234_5678_9ABC_DEF0
    first = slot_order(key, range(4))[0]
    assert slots.take(4, key) == first  # the key's first choice while free
    assert slots.take(4, key) == slot_order(key, [i for i in range(4) if i != first])[0]
    assert len(slots) == 2


def test_a_smaller_limit_after_a_reload_takes_only_the_indexes_below_it() -> None:
    slots = NodeSlots("gpu-a")  # no ledger: one process
    assert [slots.take(4) for _ in range(3)] == [0, 1, 2]
    assert slots.take(2) is None  # 0 and 1 held; 2 is past the new limit
    slots.give(0)
    assert slots.take(2) == 0


# -- two routers sharing a ledger (two workers) over a loopback node ------------------


class Held:
    """Per-message gates at a node: a chat whose text names a gate waits for it.

    `peak` counts chats inside at once (the node's own `peak` counts its probes too).
    """

    def __init__(self, node: Node) -> None:
        self.node = node
        self.gates: dict[str, threading.Event] = {}
        self.lock = threading.Lock()
        self.inside = 0
        self.peak = 0
        node.override = self._hold

    def _hold(self, request: RecordedRequest) -> Reply:
        with self.lock:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
        try:
            gate = self.gates.get(request.json()["messages"][-1]["content"])
            if gate is not None:
                gate.wait(WAIT)
            reply: Reply = self.node.responder(request)
            return reply
        finally:
            with self.lock:
                self.inside -= 1

    def gate(self, text: str) -> threading.Event:
        self.gates[text] = threading.Event()
        return self.gates[text]

    def open_all(self) -> None:
        for gate in self.gates.values():
            gate.set()


def _two_workers(node: Node, ledger: SlotLedger, wait_ms: int) -> list[RoutedUpstream]:
    routing = config(
        [node_config(node, max_conns=2)], {"m": [Tier("x", (node.name,))]}, wait_ms=wait_ms
    )
    return [RoutedUpstream(routing, ledger=ledger) for _ in range(2)]


def _send(client: Any, text: str, out: dict[str, Any]) -> threading.Thread:
    def run() -> None:
        try:
            out[text] = chat(client, "m", text).status_code
        except openai.APIStatusError as exc:
            out[text] = exc.status_code

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_two_workers_sharing_a_ledger_never_exceed_max_conns(ledger: SlotLedger) -> None:
    with nodes("a") as (a,):
        held = Held(a)
        first, second = _two_workers(a, ledger, wait_ms=0)
        with routed_proxy(first) as (url_1, _), routed_proxy(second) as (url_2, _):
            client_1, client_2 = openai_client(url_1), openai_client(url_2)
            out: dict[str, Any] = {}
            threads = []
            for text, client in (("r1", client_1), ("r2", client_2)):
                held.gate(text)
                threads.append(_send(client, text, out))
                assert a.entered.acquire(timeout=WAIT)
            # Each worker has one of its two slots free here, but the ledger has none.
            for text, client in (("r3", client_1), ("r4", client_2)):
                _send(client, text, out).join(WAIT)
                assert out[text] == 429
            held.open_all()
            for thread in threads:
                thread.join(WAIT)
        assert out == {"r1": 200, "r2": 200, "r3": 429, "r4": 429}
        assert held.peak == 2 and a.chats == 2


def test_a_release_in_another_worker_admits_a_waiting_request(ledger: SlotLedger) -> None:
    with nodes("a") as (a,):
        held = Held(a)
        first, second = _two_workers(a, ledger, wait_ms=int(WAIT * 1000))
        with routed_proxy(first) as (url_1, _), routed_proxy(second) as (url_2, _):
            client_1, client_2 = openai_client(url_1), openai_client(url_2)
            out: dict[str, Any] = {}
            gates = [held.gate("r1"), held.gate("r2")]
            threads = [_send(client_1, "r1", out)]
            assert a.entered.acquire(timeout=WAIT)
            threads.append(_send(client_2, "r2", out))
            assert a.entered.acquire(timeout=WAIT)
            waiting = _send(client_1, "r3", out)  # its worker has room; the ledger has none
            gates[1].set()  # the other worker's request ends: nothing notifies this one
            assert a.entered.acquire(timeout=WAIT)  # r3 found the slot by looking again
            threads[1].join(WAIT)
            assert held.peak == 2
            gates[0].set()
            for thread in (*threads, waiting):
                thread.join(WAIT)
        assert out == {"r1": 200, "r2": 200, "r3": 200}
        assert held.peak == 2 and a.chats == 3


# -- id_slot --------------------------------------------------------------------


class LlamaLike:
    """A loopback llama-server's probe routes: ``/health`` 200 (the rest: the responder)."""

    def __init__(self, responder: Any) -> None:
        self.responder = responder

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.method == "GET" and request.path == "/health":
            return Reply.json({"status": "ok"})
        reply: Reply = self.responder(request)
        return reply


def _llama(node: Node, total_slots: int) -> Node:
    node.responder.total_slots = total_slots
    node.responder = LlamaLike(node.responder)  # type: ignore[assignment]
    return node


def _conversation(turns: int, topic: str) -> Iterator[list[dict[str, str]]]:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": topic}]
    for turn in range(turns):
        yield list(messages)
        messages += [
            {"role": "assistant", "content": f"answer {turn}"},
            {"role": "user", "content": f"and then {turn}?"},
        ]


def _id_slots(node: Node) -> list[Any]:
    return [body.get("id_slot") for body in node.chat_bodies()]


def test_a_conversation_keeps_its_llama_server_slot_and_concurrent_ones_get_their_own() -> None:
    with nodes("llama") as (node,):
        _llama(node, total_slots=4)
        routing = config([node_config(node)], {"m": [Tier("x", ("llama",))]}, affinity="prefix")
        routed = RoutedUpstream(routing)
        assert routed.health.probe_now()["llama"].slots == 4
        with routed_proxy(routed) as (url, _):
            client = openai_client(url)
            for messages in _conversation(3, "tides"):  # the OpenAI face: the byte relay
                client.chat.completions.create(model="m", messages=messages)
            anthropic_client = anthropic.Anthropic(
                base_url=url, api_key="client-key", max_retries=0, timeout=WAIT
            )
            CLIENTS.append(anthropic_client)
            for messages in _conversation(3, "tides"):  # the Anthropic face: Completions
                anthropic_client.messages.create(
                    model="m",
                    max_tokens=16,
                    system=messages[0]["content"],
                    messages=messages[1:],  # type: ignore[arg-type]
                )
            pinned = _id_slots(node)
            assert len(pinned) == 6 and isinstance(pinned[0], int) and 0 <= pinned[0] < 4
            assert pinned[:3] == [pinned[0]] * 3  # every turn: the same slot
            assert pinned[3:] == [pinned[3]] * 3
            # Concurrent conversations hold different slots, each asked for by index.
            held = Held(node)
            node.entered = threading.Semaphore(0)  # the turns above each released it once
            out: dict[str, Any] = {}
            topics = ["tides", "storms", "gulls", "reefs"]
            threads = []
            for topic in topics:
                held.gate(topic)
                threads.append(_send(client, topic, out))
                assert node.entered.acquire(timeout=WAIT)
            report = routed.nodes["llama"].report()
            assert report["slots_held"] == [0, 1, 2, 3] and report["server_slots"] == 4
            held.open_all()
            for thread in threads:
                thread.join(WAIT)
        assert out == dict.fromkeys(topics, 200)
        assert routed.nodes["llama"].report()["slots_held"] == []
        concurrent = _id_slots(node)[6:]
        assert sorted(concurrent) == [0, 1, 2, 3]


def test_no_id_slot_for_a_node_that_is_not_a_llama_server_or_without_affinity() -> None:
    with nodes("plain", "llama") as (plain, llama):
        _llama(llama, total_slots=2)
        models = {"p": [Tier("x", ("plain",))], "l": [Tier("x", ("llama",))]}
        for affinity in ("prefix", "none"):
            routing = config([node_config(plain), node_config(llama)], models, affinity=affinity)
            routed = RoutedUpstream(routing)
            probed = routed.health.probe_now()
            assert probed["plain"].slots is None and probed["llama"].slots == 2
            with routed_proxy(routed) as (url, _):
                client = openai_client(url)
                chat(client, "p", "hello")
                chat(client, "l", "hello")
        # An OpenAI-compatible node without llama-server's /health and /props: never.
        assert _id_slots(plain) == [None, None]
        # A llama-server without affinity: the server's own choice (its longest
        # common prefix among idle slots) beats any index the proxy could name.
        assert isinstance(_id_slots(llama)[0], int) and _id_slots(llama)[1] is None


def test_a_llama_server_not_probed_yet_gets_no_id_slot() -> None:
    with nodes("llama") as (node,):
        _llama(node, total_slots=2)
        routing = config([node_config(node)], {"m": [Tier("x", ("llama",))]}, affinity="prefix")
        with routed_proxy(RoutedUpstream(routing)) as (url, _):
            chat(openai_client(url), "m")
        assert _id_slots(node) == [None]
