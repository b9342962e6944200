"""The OpenAI face: ``/v1/chat/completions``, ``/v1/models`` and ``/v1/embeddings`` relayed.

`routes` (the handlers, and `register`: how the app's router gets them),
`relay_body` (`RelayBody`: the upstream's 2xx body passed on as it arrives,
accounted for in ``close()``), `relay_end` (only whole SSE frames cross; a
broken-off stream ends with an error frame and a cut) and `relay_meter` (the
usage counts read from the relayed bytes).

Imports the proxy's shared modules and the rest of llmchat, never another
face (see `llmchat.proxy.faces`).
"""

from .routes import register

__all__ = ["register"]
