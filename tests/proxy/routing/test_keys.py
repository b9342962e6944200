"""Client keys: `KeyRing` alone (resolution, identification, policies, no secret shown), then
in the app over a loopback upstream (the accepted key's name as `key_id`, a reload's swap).
"""

from __future__ import annotations

import hmac
import queue
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
import requests

from llmchat.proxy import make_app
from llmchat.proxy.routing import ConfigError, KeyPolicy, KeyRing, allows
from llmchat.proxy.routing.keys import KEY_POLICY
from llmchat.testing import ChatResponder

from ...support.proxy import proxy_over

ALICE = KeyPolicy("alice", "ALICE_KEY", ("local-coder", "claude-*"))
CI = KeyPolicy("ci", "CI_KEY")
ENV = {"ALICE_KEY": "sk-alice-SECRET", "CI_KEY": "sk-ci-SECRET"}
WAIT = 10.0


def ring() -> KeyRing:
    return KeyRing([ALICE, CI], ENV)


# -- identify ---------------------------------------------------------------------


def test_each_key_is_identified() -> None:
    keys = ring()
    assert keys.identify("sk-alice-SECRET") is ALICE
    assert keys.identify("sk-ci-SECRET") is CI
    assert len(keys) == 2 and keys.policies == (ALICE, CI)


@pytest.mark.parametrize(
    "presented",
    [None, "", "sk-alice", "sk-alice-SECRET ", "SK-ALICE-SECRET", "sk-alice-SECRETx", "é\ud800"],
)
def test_anything_else_is_nobody(presented: str | None) -> None:
    assert ring().identify(presented) is None


def test_every_key_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[bytes] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append(b)
        return real(a, b)

    keys = ring()
    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert keys.identify("sk-alice-SECRET") is ALICE  # the first matches; the rest still run
    assert compared == [b"sk-alice-SECRET", b"sk-ci-SECRET"]


def test_the_environment_is_read_once() -> None:
    env = dict(ENV)
    keys = KeyRing([ALICE], env)
    env["ALICE_KEY"] = "sk-rotated"
    assert keys.identify("sk-alice-SECRET") is ALICE and keys.identify("sk-rotated") is None


# -- what cannot resolve is a config error, all at once, never quoting a key -------------


def test_unset_empty_malformed_and_shared_keys_are_refused_together() -> None:
    policies = [
        KeyPolicy("a", "A_KEY"),
        KeyPolicy("b", "B_KEY"),
        KeyPolicy("c", "C_KEY"),
        KeyPolicy("d", "D_KEY"),
        KeyPolicy("e", "E_KEY"),
    ]
    env = {"B_KEY": "", "C_KEY": "sk-c-SECRET\n", "D_KEY": "sk-d-SECRET", "E_KEY": "sk-d-SECRET"}
    with pytest.raises(ConfigError) as info:
        KeyRing(policies, env)
    errors = info.value.errors
    assert errors[0] == "keys[0].key_env: A_KEY is not set"
    assert errors[1] == "keys[1].key_env: B_KEY is not set"
    assert errors[2].startswith("keys[2].key_env: C_KEY contains a control character")
    assert errors[3] == "keys[4].key_env: E_KEY holds the same key as keys[3]"
    assert len(errors) == 4
    assert "SECRET" not in str(info.value)


def test_no_secret_in_repr_or_str() -> None:
    keys = ring()
    for text in (repr(keys), str(keys), repr(keys.policies)):
        assert "SECRET" not in text
    assert repr(keys) == "KeyRing(alice, ci)"


def test_an_empty_ring_knows_nobody() -> None:
    keys = KeyRing([], ENV)
    assert len(keys) == 0 and keys.identify("sk-alice-SECRET") is None


# -- policies -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "model", "allowed"),
    [
        (ALICE, "local-coder", True),
        (ALICE, "claude-sonnet-4-5", True),
        (ALICE, "claude-", True),
        (ALICE, "Claude-sonnet", False),  # case-sensitive, on every platform
        (ALICE, "local-coder-2", False),
        (ALICE, "gpt-4", False),
        (ALICE, "", False),
        (CI, "anything at all", True),
        (KeyPolicy("none", "N", ()), "local-coder", False),
        (KeyPolicy("q", "Q", ("gpt-?", "[ab]*")), "gpt-5", True),
        (KeyPolicy("q", "Q", ("gpt-?", "[ab]*")), "gpt-55", False),
        (KeyPolicy("q", "Q", ("gpt-?", "[ab]*")), "beta", True),
    ],
)
def test_allows(policy: KeyPolicy, model: str, allowed: bool) -> None:
    assert allows(policy, model) is allowed
    assert KeyRing.allows(policy, model) is allowed
    assert ring().allows(policy, model) is allowed


def test_key_id_is_the_name() -> None:
    assert ring().key_id(ALICE) == "alice"


# -- in the app -----------------------------------------------------------------------


def test_the_app_accepts_each_named_key_and_records_its_name() -> None:
    # The usage event is emitted as the answer's body closes, after the client has it:
    # waited for, never read at once.
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    body = {"model": "local-coder", "messages": [{"role": "user", "content": "hi"}]}
    options: dict[str, Any] = {"keys": ring(), "usage_log": events.put}
    with proxy_over(ChatResponder("hello"), **options) as (url, _):
        for key, name in (("sk-alice-SECRET", "alice"), ("sk-ci-SECRET", "ci")):
            answer = requests.post(
                url + "/v1/chat/completions", json=body, timeout=WAIT, headers={"x-api-key": key}
            )
            assert answer.status_code == 200
            assert events.get(timeout=WAIT)["key_id"] == name
        bearer = {"Authorization": "Bearer sk-ci-SECRET"}
        assert requests.get(url + "/api/tags", timeout=WAIT, headers=bearer).status_code == 200
        assert events.get(timeout=WAIT)["key_id"] == "ci"
        for headers in ({}, {"x-api-key": "sk-wrong"}, {"Authorization": "Bearer sk-alice"}):
            answer = requests.post(
                url + "/v1/chat/completions", json=body, timeout=WAIT, headers=headers
            )
            assert answer.status_code == 401
            assert events.get(timeout=WAIT)["key_id"] is None
        assert requests.get(url + "/health", timeout=WAIT).status_code == 200


def test_named_keys_replace_the_single_key_and_can_be_swapped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = make_app(_Backend(), api_key="sk-single-SECRET", keys=ring())
    assert _status(app, "sk-single-SECRET") == 401
    environ = _environ("sk-alice-SECRET")
    assert _status(app, environ=environ) == 404  # past the key check
    assert environ[KEY_POLICY] is ALICE
    app.keys = KeyRing([KeyPolicy("bob", "BOB_KEY")], {"BOB_KEY": "sk-bob-SECRET"})
    assert _status(app, "sk-alice-SECRET") == 401 and _status(app, "sk-bob-SECRET") == 404
    app.keys = None  # a config without keys: the single key applies again
    assert _status(app, "sk-single-SECRET") == 404 and _status(app, "sk-bob-SECRET") == 401
    assert "SECRET" not in repr(app) + caplog.text


def test_the_app_refuses_a_keys_that_is_not_a_ring() -> None:
    with pytest.raises(TypeError, match="KeyRing"):
        make_app(_Backend(), keys={"alice": "sk"})  # type: ignore[typeddict-item]


class _Backend:
    """Enough of a backend for the app's routing of a request that never reaches it."""

    def chat_completion_stream(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not reached")


def _environ(key: str) -> dict[str, Any]:
    environ: dict[str, Any] = {"PATH_INFO": "/nowhere", "HTTP_X_API_KEY": key}
    setup_testing_defaults(environ)
    return environ


def _status(app: Any, key: str = "", environ: dict[str, Any] | None = None) -> int:
    statuses: list[str] = []
    b"".join(app(environ or _environ(key), lambda status, headers: statuses.append(status)))
    return int(statuses[0].split()[0])


def test_refusal() -> None:
    from llmchat.proxy.routing.keys import refusal

    assert refusal(None, "anything") is None
    assert refusal(ALICE, "claude-opus") is None
    assert refusal(ALICE, "gpt-4") == "The key 'alice' may not use model 'gpt-4'"
