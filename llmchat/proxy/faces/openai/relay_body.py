"""The OpenAI face's relayed answer: the upstream's own 2xx body, passed on as it arrives.

Only whole SSE frames cross (`relay_end.FrameGate`), scrubbed of the
backend's key; a body the upstream breaks off ends with an error frame and a
cut, never as a clean end. Accounted for in `close()` like every body
(`bodies.AccountedBody`).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator

from ...bodies import AccountedBody
from ...client_exchange import ClientExchange
from ...error_shapes import StreamCut
from ...failures import log_upstream_failure
from ...relay import Relay, RelayBroken
from ...server.hangup import HangupWatch
from .relay_end import FrameGate, error_frame
from .relay_meter import RelayMeter

__all__ = ["RelayBody"]


class RelayBody(AccountedBody):
    """The OpenAI face's relayed 2xx body, scrubbed of the backend's key; like
    `StreamBody`, accounted for in `close()`."""

    def __init__(
        self,
        exchange: ClientExchange,
        relay: Relay,
        meter: RelayMeter,
        watch: HangupWatch,
    ) -> None:
        super().__init__(exchange, watch)
        self._relay = relay
        self._meter = meter

    def _pieces(self) -> Iterator[bytes]:
        meter, relay = self._meter, self._relay
        # The backend's key is taken out of every form it could take, even split
        # across reads; only a tail that could start one is held back. An event
        # stream passes whole frames only, so a failure never leaves half of one.
        scrubber = relay.redactor.stream()
        gate = FrameGate() if meter.event_stream else None
        broken: RelayBroken | None = None
        try:
            for data in relay.chunks():
                data = scrubber.feed(data)
                try:
                    meter.feed(data)  # before the gate: the meter bounds a frame's size
                except RelayBroken:
                    if gate is not None:  # the whole frames the read held before the big one
                        before = gate.feed_within(data, meter.max_event_bytes)
                        if before:
                            yield before
                    raise
                if gate is not None:
                    data = gate.feed(data)
                if data:
                    yield data
                    # The client has the whole answer once [DONE] is written: the
                    # OpenAI SDKs close there, before the upstream's body ends, and
                    # that hang-up is no abort.
                    self._completed = self._completed or meter.done
        except RelayBroken as exc:
            broken = exc
            relay.broke(exc.error_class)  # the meter's too: a stream that only pings is silent
        if broken is not None and self._completed:
            return  # after [DONE]: the client has its whole answer, and nothing is cut
        if broken is not None:
            # A held tail (half a frame, or bytes that might start the key) is dropped.
            detail = relay.redactor.text(str(broken))
            yield from self._failed(broken.error_class, detail, gate)
            return
        if self._watch.hung_up.is_set() or relay.exchange.aborted == "cancel":
            return  # nobody is reading; close() records the abort
        tail = scrubber.flush()
        meter.feed(tail)
        if gate is not None:
            tail = gate.feed(tail) + gate.flush()
        if tail:
            yield tail
        meter.close()
        if meter.event_stream and not meter.finished:
            # The body ended cleanly but the answer did not: no [DONE], no finish reason.
            yield from self._failed("response", "no [DONE] and no finish reason", gate)
            return
        self._completed = True

    def _failed(self, error_class: str, detail: str, gate: FrameGate | None) -> Iterator[bytes]:
        """End a relayed body the upstream broke off: an error frame (a stream), then a cut."""
        event = self._event
        event.ok = False
        event.error_type = event.error_type or error_class
        log_upstream_failure(error_class, None, f"the relayed answer broke off: {detail}")
        if gate is not None:
            gate.drop()
            yield error_frame(error_class)
        raise StreamCut(errno.ECONNRESET, f"the upstream broke off the answer ({error_class})")

    def _release(self) -> None:
        self._relay.cancel()
        self._relay.close()
        event, meter = self._event, self._meter
        event.input_tokens = meter.input_tokens
        event.output_tokens = meter.output_tokens
        event.cached_tokens = meter.cached_tokens
        event.reasoning_tokens = meter.reasoning_tokens
        event.content_bytes = meter.content_bytes
        if meter.model and not event.model:
            event.model = meter.model
