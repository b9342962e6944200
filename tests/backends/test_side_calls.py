"""The shared internals a subclass's own HTTP calls use, and typed backend options.

`_probe_json_array` (with `_probe_json`, its object twin) is one bounded GET at
the server root that never raises; `_decode_json_body` reads bytes as the
completion paths do. `CommonOptions` makes a misspelt keyword a `mypy --strict`
error and, at run time, a `TypeError` naming it.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.backends.gemini import Gemini
from llmchat.backends.ollama import Ollama
from llmchat.backends.openrouter import OpenRouter
from llmchat.backends.responses import OpenAIResponses
from llmchat.testing import Reply, ScriptedServer, Stall

from ..support.paths import REPO_ROOT

ROOT = REPO_ROOT


def backend(server: ScriptedServer, **kwargs: Any) -> OpenAICommon:
    return OpenAICommon(server.url, **kwargs)


# -- _probe_json_array -----------------------------------------------------------


def test_probe_json_array_reads_an_array_at_the_server_root(server: ScriptedServer) -> None:
    server.push(Reply.json([{"id": "a"}, {"id": "b"}]))
    items, note = backend(server)._probe_json_array("/models/list")
    assert (items, note) == ([{"id": "a"}, {"id": "b"}], None)
    assert server.requests[0].method == "GET"
    assert server.requests[0].path == "/models/list"  # the root, not /v1


@pytest.mark.parametrize(
    ("reply", "note"),
    [
        (Reply.json({"data": []}), "GET /x did not answer a JSON array"),
        (Reply.text("[not json"), "GET /x did not answer a JSON array"),
        (Reply.error(404, "File Not Found"), "GET /x answered HTTP 404"),
        (Reply(before_headers=[Stall()]), "GET /x failed"),
    ],
)
def test_probe_json_array_never_raises(server: ScriptedServer, reply: Reply, note: str) -> None:
    server.push(reply)
    items, got = backend(server, server_probe_timeout=0.3)._probe_json_array("/x")
    assert items is None and got is not None and note in got


def test_probe_json_array_is_bounded_in_size(server: ScriptedServer) -> None:
    server.push(Reply.json(list(range(20_000))))
    items, note = backend(server, max_response_bytes=1000)._probe_json_array("/x")
    assert items is None and note is not None and "larger than max_response_bytes" in note


def test_probe_json_array_against_a_dead_server_never_raises() -> None:
    with ScriptedServer() as url:
        pass  # the port is closed again
    items, note = OpenAICommon(url, server_probe_timeout=0.5)._probe_json_array("/x")
    assert items is None and note is not None and "GET /x failed" in note


def test_probe_json_still_wants_an_object(server: ScriptedServer) -> None:
    server.push(Reply.json([1, 2]))
    payload, note = backend(server)._probe_json("/x")
    assert payload is None and note == "GET /x did not answer a JSON object"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'\xef\xbb\xbf{"a": [1]}', {"a": [1]}),
        (b"[1, 2]", [1, 2]),
        (b"not json", None),
        (b'{"a": "\xff"}', None),  # not UTF-8: not guessed at, as on the completion paths
    ],
)
def test_decode_json_body_reads_as_the_completion_paths_do(data: bytes, expected: Any) -> None:
    assert OpenAICommon._decode_json_body(data) == expected


# -- static differences are class attributes ----------------------------------------


def test_defaults_come_from_class_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "g-key")
    monkeypatch.setenv("OPENAI_API_KEY", "o-key")
    gemini = Gemini(model="gemini-2.5-flash")
    assert gemini.api_url == Gemini.default_api_url and gemini.api_key == "g-key"
    responses = OpenAIResponses()
    assert responses.api_url == "https://api.openai.com/v1" and responses.api_key == "o-key"
    assert OpenAIResponses(api_key="given").api_key == "given"
    assert Ollama().api_url == "http://127.0.0.1:11434"


def test_a_subclass_with_only_a_server_and_a_key_needs_no_init(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Gateway(OpenAICommon):
        default_api_url = "http://gateway.invalid/v1"
        api_key_env = ("GATEWAY_KEY",)

    monkeypatch.setenv("GATEWAY_KEY", "k")
    gateway = Gateway(model="m")
    assert (gateway.api_url, gateway.api_key, gateway.model) == (
        "http://gateway.invalid/v1",
        "k",
        "m",
    )
    assert gateway.clone(model="n").api_url == "http://gateway.invalid/v1"
    monkeypatch.setenv("GATEWAY_KEY", "bad\nkey")
    with pytest.raises(ValueError, match="GATEWAY_KEY"):
        Gateway()


def test_no_api_url_and_no_default_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="OpenAICommon\\(\\) needs api_url"):
        OpenAICommon()


# -- typed options -------------------------------------------------------------------


@pytest.mark.parametrize("cls", [Ollama, OpenRouter, Gemini, OpenAICommon])
def test_a_misspelt_keyword_is_a_type_error_naming_it(cls: type[OpenAICommon]) -> None:
    with pytest.raises(TypeError, match="conect_timeout"):
        cls("http://127.0.0.1:9/v1", conect_timeout=5)  # type: ignore[call-arg]


def test_mypy_strict_rejects_a_misspelt_keyword(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]' brings it)")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from llmchat.backends.ollama import Ollama\n"
        "from llmchat.backends.koboldcpp import KoboldCpp\n"
        "Ollama(connect_timeout=5, keep_raw=True)\n"
        "KoboldCpp(headers_timeout=None, pool_size=2)\n"
        "Ollama(conect_timeout=5)\n"
        "KoboldCpp(keep_raw='yes')\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "--python-version",
            "3.10",
            str(snippet),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(lines) == 2, result.stdout + result.stderr
    assert "snippet.py:5:" in lines[0] and '"conect_timeout"' in lines[0]
    assert "snippet.py:6:" in lines[1] and "keep_raw" in lines[1]


def test_the_option_types_name_exactly_the_constructors_arguments() -> None:
    # A TypedDict that drifts from OpenAICommon.__init__ would let mypy pass a
    # keyword the constructor refuses (or refuse one it takes).
    import inspect

    from llmchat.backends import BackendOptions, CommonOptions

    params = set(inspect.signature(OpenAICommon.__init__).parameters) - {"self", "api_url"}
    assert set(_all_keys(BackendOptions)) == params
    assert set(_all_keys(CommonOptions)) == params - {"api_key", "model", "settings"}


def _all_keys(typed: Any) -> frozenset[str]:
    return frozenset(typed.__optional_keys__) | frozenset(typed.__required_keys__)
