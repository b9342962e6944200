"""The JavaScript client matrix: each real client, on every face it speaks, through the proxy.

One node process per client runs its case list (tests/js/cases/<client>.mjs)
against the real proxy over a `CaseUpstream`: stream and non-stream; text; a
tool round trip in the client's own format (the call reaches the client with
its arguments, the result reaches the upstream); reasoning where the client
shows it; a length stop as the client names it; an upstream failure
mid-stream, which must raise or report an error, never a success; and an
abort, after which the upstream connection must close. No case may crash the
Node process (an uncaught exception or unhandled rejection).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .js_cases import FINAL, REASONING, TEXT, WAIT, case_proxy, run_cases
from .support import package_dir

# client -> (its npm packages, face -> the stop reason it shows for a length stop)
CLIENTS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "openai": (("openai",), {"chat": "length", "responses": "max_output_tokens"}),
    "anthropic": (("@anthropic-ai/sdk",), {"messages": "max_tokens"}),
    "ollama": (("ollama",), {"chat": "length", "generate": "length"}),
    "aisdk": (
        ("ai", "@ai-sdk/openai-compatible", "@ai-sdk/openai", "@ai-sdk/anthropic"),
        {"compat": "length", "openai-chat": "length", "anthropic": "length"},
    ),
}
KINDS = ("text", "tool", "reasoning", "length")
NO_TOOLS = {("ollama", "generate")}  # /api/generate has no tools
# A failed stream some clients report rather than raise: the stop reason they show then.
FAILED = {"failed", "error"}

_OPENAI_CHAT_NO_REASONING = (
    "@ai-sdk/openai 3.0.141's .chat() model never reads reasoning_content (OpenAI's own chat "
    "API sends no reasoning text), so it shows no reasoning from any OpenAI-compatible server; "
    "@ai-sdk/openai-compatible shows the same relayed bytes as reasoningText"
)
KNOWN_CLIENT_BUGS: dict[tuple[str, str], str] = {
    ("aisdk", "openai-chat.reasoning"): _OPENAI_CHAT_NO_REASONING,
    ("aisdk", "openai-chat.reasoning.stream"): _OPENAI_CHAT_NO_REASONING,
}
"""(client, case) -> the client's own bug or limit (client, version, behaviour): those cases
xfail, strictly, so a client release that fixes it shows up."""


def _cases() -> list[tuple[str, str]]:
    out = []
    for client, (_, faces) in CLIENTS.items():
        for face in faces:
            for kind in KINDS:
                if kind == "tool" and (client, face) in NO_TOOLS:
                    continue
                out += [(client, f"{face}.{kind}"), (client, f"{face}.{kind}.stream")]
            out += [(client, f"{face}.fail.stream"), (client, f"{face}.abort.stream")]
    return out


class Ran:
    """One client's node run: its report, and what the upstream saw."""

    def __init__(self, client: str) -> None:
        for package in CLIENTS[client][0]:
            package_dir(package)
        with case_proxy() as (url, upstream):
            self.report = run_cases(client, url)
            # Waited on while the proxy still runs: its close is what the upstream sees.
            self.aborts_closed = upstream.all_aborts_closed(WAIT)
            self.tool_results = upstream.tool_results_seen()


_RUNS: dict[str, Ran | BaseException] = {}


def _ran(client: str) -> Ran:
    """The client's one run; a run that failed or skipped fails or skips each case the same
    way, without running node again."""
    if client not in _RUNS:
        try:
            _RUNS[client] = Ran(client)
        except BaseException as exc:  # pytest's skip and failure outcomes are BaseExceptions
            _RUNS[client] = exc
    ran = _RUNS[client]
    if isinstance(ran, BaseException):
        raise ran
    return ran


@pytest.mark.parametrize(("client", "case"), _cases(), ids=[f"{c}-{k}" for c, k in _cases()])
def test_client_case(client: str, case: str) -> None:
    ran = _ran(client)
    if (client, case) in KNOWN_CLIENT_BUGS:
        with pytest.raises(AssertionError):
            _check(client, case, ran)
        pytest.xfail(KNOWN_CLIENT_BUGS[client, case])
    _check(client, case, ran)


def _check(client: str, case: str, ran: Ran) -> None:
    result = ran.report.get(case)
    assert result is not None, f"{case} did not run: {sorted(ran.report)}"
    face, kind = case.split(".")[:2]
    if kind == "fail":
        # Raised, or reported as a failed end; never the partial text as a success.
        value = result.get("value") or {}
        assert "error" in result or value.get("finish") in FAILED, result
        return
    assert "error" not in result, result
    value: dict[str, Any] = result["value"]
    if kind == "text":
        assert value["text"] == TEXT
    elif kind == "tool":
        assert value["call"]["name"] == "get_weather"
        assert json.loads(value["call"]["arguments"]) == {"city": "Oslo"}
        assert value["final"] == FINAL
    elif kind == "reasoning":
        assert value["text"] == TEXT
        assert REASONING in (value["reasoning"] or ""), value
    elif kind == "length":
        assert value["finish"] == CLIENTS[client][1][face]
    elif kind == "abort":
        assert value["pieces"] == 1 and value["aborted"] is True, value
        assert ran.aborts_closed, "an aborted stream's upstream connection stayed open"


@pytest.mark.parametrize("client", list(CLIENTS))
def test_tool_results_reach_the_upstream_and_nothing_crashed(client: str) -> None:
    ran = _ran(client)
    faces = [f for f in CLIENTS[client][1] if (client, f) not in NO_TOOLS]
    assert ran.tool_results == [["rain in Oslo"]] * 2 * len(faces)
    assert ran.report["crashes"] == []
