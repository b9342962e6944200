"""The proxy records usage into a store: real requests through the proxy's own server
to the scripted upstream, then the rows read back by a second store on the same database.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.proxy import make_app
from llmchat.proxy.usage.backend import open_store
from llmchat.proxy.usage.event import key_id_of
from llmchat.testing import ChatResponder, ScriptedServer

from ...support.proxy import UsageSink, running_proxy
from ...support.usage import NotifyingStore

TEXT = "Counted once per request, in one row."
KEY = "proxy-client-key-0123456789"
WAIT = 10.0


@pytest.fixture
def backend() -> Any:
    with ScriptedServer(ChatResponder(TEXT, chunk_size=6)) as url, OpenAICommon(url) as b:
        yield b


def _chat(url: str, *, stream: bool, key: str | None = KEY) -> requests.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"model": "qwen3", "messages": [{"role": "user", "content": "two words"}]}
    return requests.post(
        f"{url}/api/chat", json={**body, "stream": stream}, headers=headers, timeout=WAIT
    )


def test_requests_through_the_proxy_land_in_the_store(target: str, backend: Any) -> None:
    store = NotifyingStore(open_store(target))
    sink = UsageSink()
    try:
        with running_proxy(backend, usage_db=store, usage_log=sink, api_key=KEY) as url:
            assert _chat(url, stream=False).status_code == 200
            streamed = _chat(url, stream=True)
            assert streamed.status_code == 200
            lines = [json.loads(line) for line in streamed.text.splitlines()]
            assert "".join(line["message"]["content"] for line in lines) == TEXT
            assert _chat(url, stream=False, key="wrong").status_code == 401
            store.wait(3)
    finally:
        store.store.close()
    events = sink.wait(3)
    reader = open_store(target)  # a second store: the rows are in the database, not memory
    try:
        by_key = reader.totals("key_id")
        by_model = reader.totals("model")
    finally:
        reader.close()
    key_id = key_id_of(KEY)
    assert {e["key_id"] for e in events} == {key_id, None}
    assert [(t.key, t.requests, t.ok, t.failed) for t in by_key] == [
        (key_id, 2, 2, 0),
        (None, 1, 0, 1),  # the wrong key: no key id, and the route was never reached
    ]
    [model] = [t for t in by_model if t.key == "qwen3"]
    assert model.requests == 2
    assert model.content_bytes == 2 * len(TEXT.encode())
    assert model.input_tokens == sum(e["input_tokens"] or 0 for e in events)
    assert model.output_tokens == sum(e["output_tokens"] or 0 for e in events) > 0
    assert KEY not in repr(events)


def test_make_app_opens_a_path_and_closes_it(tmp_path: Path, backend: Any) -> None:
    path = tmp_path / "usage.db"
    app = make_app(backend, usage_db=str(path))
    assert path.exists()  # opened with its schema at once, so a bad path fails at startup
    store = app.usage.store
    assert store is not None
    app.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.record(None)  # type: ignore[arg-type]


def test_make_app_leaves_a_passed_store_open(tmp_path: Path, backend: Any) -> None:
    store = open_store(tmp_path / "usage.db")
    make_app(backend, usage_db=store).close()
    assert store.totals("model") == []  # still usable: it is the caller's to close
    store.close()


def test_make_app_refuses_a_bad_usage_db_before_any_io(tmp_path: Path, backend: Any) -> None:
    with pytest.raises(TypeError, match="usage_db must be"):
        make_app(backend, usage_db=42)
    with pytest.raises(ValueError, match="usage_db must be a file path or a postgresql"):
        make_app(backend, usage_db="sqlite://x")
    with pytest.raises(ValueError, match="max_body_bytes"):
        make_app(backend, usage_db=str(tmp_path / "never.db"), max_body_bytes=0)
    assert not (tmp_path / "never.db").exists()  # the other arguments are checked first


def test_a_failing_store_never_fails_the_request(
    backend: Any, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        def record(self, event: Any) -> None:
            raise ConnectionError("database gone, password=hunter2")

        def describe_error(self, exc: BaseException) -> str:
            return str(exc).replace("hunter2", "[redacted]")

    sink = UsageSink()
    with (
        caplog.at_level("WARNING", logger="llmchat.proxy"),
        running_proxy(backend, usage_db=Broken(), usage_log=sink) as url,
    ):
        assert _chat(url, stream=False, key=None).status_code == 200
        sink.wait(1)
    warnings = [r.getMessage() for r in caplog.records if "not stored" in r.getMessage()]
    assert warnings and "database gone" in warnings[0]
    assert all("hunter2" not in r.getMessage() for r in caplog.records)


def test_cli_proxy_refuses_a_bad_usage_db_before_serving(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from llmchat.cli import main

    assert main(["proxy", "--upstream", "http://127.0.0.1:9/v1", "--usage-db", "mysql://x"]) == 2
    err = capsys.readouterr().err
    assert "usage_db must be a file path or a postgresql:// URL" in err
    assert "serving" not in err
