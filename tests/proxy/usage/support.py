"""The usage events the report tests read back: three events over two days, two models."""

from __future__ import annotations

import datetime

from ...support.usage import event

DAY1 = datetime.datetime(2026, 5, 1, 8, 0, tzinfo=datetime.timezone.utc).timestamp()
DAY2 = datetime.datetime(2026, 5, 2, 20, 0, tzinfo=datetime.timezone.utc).timestamp()

EVENTS = [
    event("a", model="m1", input_tokens=4, output_tokens=6, content_bytes=30,
          duration_ms=1500.0, started_at=DAY1, key_id="key_aaa"),
    event("b", model="m1", ok=False, status=502, error_type="http", duration_ms=250.0,
          started_at=DAY2, key_id="key_aaa"),
    event("c", model="m2", input_tokens=1, output_tokens=2, content_bytes=7,
          duration_ms=500.0, started_at=DAY2),
]  # fmt: skip
