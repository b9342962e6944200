"""Shared test helpers: where the golden vectors and captures live."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from llmchat import fastjson
from llmchat.testing import ScriptedServer

# No per-example deadline: a loaded CI machine must not turn speed into failures.
# `json_parser` below is function-scoped and autouse; it sets the parser once per
# test, which is right for every example of a hypothesis test too.
settings.register_profile(
    "llmchat", deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
settings.load_profile("llmchat")


def pytest_report_header(config: object) -> str:
    """Say up front whether the real llama-server tests (tests/real) will run."""
    from .real.server import find_binary

    path, why = find_binary()
    if path is None:
        return f"real llama-server tests: SKIPPED ({why})"
    return f"real llama-server tests: RUN with {path} ({why})"


# The parser and dialect tests run once with each JSON parser (`llmchat.fastjson`):
# orjson (the `fast` extra, installed by the `test` extra) and the stdlib.
_BOTH_PARSERS_FILES = ("test_sse.py", "test_accumulate.py", "test_blocking.py", "test_ndjson.py")
_BOTH_PARSERS_PREFIXES = ("test_dialect_", "test_captures_", "test_equivalence")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    name = metafunc.definition.path.name
    if name in _BOTH_PARSERS_FILES or name.startswith(_BOTH_PARSERS_PREFIXES):
        metafunc.parametrize("json_parser", ["orjson", "stdlib"], indirect=True)


@pytest.fixture(autouse=True)
def json_parser(request: pytest.FixtureRequest) -> Iterator[str]:
    """The JSON parser a test runs with: its parameter, else the one llmchat chose."""
    name: str | None = getattr(request, "param", None)
    if name is None:
        yield fastjson.active()
        return
    if name == "orjson" and not fastjson.available():
        pytest.skip("orjson is not installed (pip install -e '.[fast]')")
    before = fastjson.active()
    fastjson.use(name)
    try:
        yield name
    finally:
        fastjson.use(before)


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[ScriptedServer]:
    """A loopback `ScriptedServer` for one test, stopped after it.

    Its script is the test module's `SERVER_SCRIPT()` when the module names one (a
    factory, so each test starts from a fresh responder); else it has none and the
    test pushes its replies. A module that needs more defines its own `server`.
    """
    factory = getattr(request.module, "SERVER_SCRIPT", None)
    srv = ScriptedServer() if factory is None else ScriptedServer(factory())
    with srv:
        yield srv
