"""Usage records of the proxy: one event per request, its sinks and its stores.

`event` (`UsageEvent`, the one shape every sink takes; `key_id_of`),
`fields` (what each field may hold, for the writer and the reader), `sinks`
(`UsageLog`: a JSON-lines file, a callback, a store; the probe budget),
`money` (costs as exact integer nano-units), `prices` (an event's cost,
computed in decimal), `store` (the `UsageStore` protocol and its exact
`Total`), `sql` (the schema and SQL both stores share), `sqlite` and
`postgres` (the two stores), `backend` (`open_store` / `store_of`: which
store a ``usage_db`` names, the backend imported only when chosen) and
`budgets`.

The rule of this layer: it imports the standard library, psycopg (only in
`postgres`), and from llmchat only `errors`, `redact` and `wire_json`; never
the proxy's server, app or faces. Within it, imports run one way: event,
money → prices, store → sql → sqlite/postgres, and backend on top (no circle).
tests/test_proxy_layers.py checks the first part.
"""

from __future__ import annotations

from .event import CLIENT_ABORT_STATUS, UsageEvent
from .sinks import UsageLog

__all__ = ["CLIENT_ABORT_STATUS", "UsageEvent", "UsageLog"]
