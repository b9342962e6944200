"""Gemini CLI end to end: ``gemini -p`` through the proxy's Gemini face, on its defaults.

The real agent (tests/js, pinned) runs headless against the proxy, which
serves a loopback OpenAI-compatible `GeminiCliUpstream`: on the first turn
the upstream calls one of the CLI's own tools (``write_file`` or
``run_shell_command``), and answers with text once the tool's result comes
back as a ``functionResponse``. Each run asserts the exit code, the file the
tool wrote in the run's working directory, the tool's result reaching the
upstream as a tool message answering the call's id, and the final text the
CLI printed. How the CLI is pointed at the proxy is in gemini_cli.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from llmchat.testing import ScriptedServer

from ..support.proxy_servers import SERVERS, serve_proxy
from .gemini_cli import CLASSIFIER_ANSWER, GeminiCliUpstream, assert_task_done, run_gemini

KEY = "gemini-proxy-test-key"
LOCAL = "qwen3-coder-local"
ONE_WORKER = ("--workers", "1", "--threads", "4")
STREAM_ROUTE = "/v1beta/models/{model}:streamGenerateContent"
WHOLE_ROUTE = "/v1beta/models/{model}:generateContent"


@pytest.fixture
def upstream(request: pytest.FixtureRequest) -> Iterator[tuple[ScriptedServer, GeminiCliUpstream]]:
    agent = GeminiCliUpstream(getattr(request, "param", "write_file"))
    server = ScriptedServer(agent)
    with server:  # started here, stopped after the test
        yield server, agent


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize(
    ("upstream", "model"),
    [
        pytest.param("write_file", None, id="default-model-write_file"),
        pytest.param("run_shell_command", LOCAL, id="local-name-shell"),
    ],
    indirect=["upstream"],
)
def test_gemini_cli_runs_its_own_tool_through_the_proxy(upstream, tmp_path, server, model):
    scripted, agent = upstream
    with serve_proxy(server, scripted.url, tmp_path, api_key=KEY, gunicorn_args=ONE_WORKER) as p:
        run = run_gemini(p.url, tmp_path, key=KEY, model=model)
        turns = p.usage.wait(len(agent.chat_requests), route=STREAM_ROUTE)
        routed = p.usage.wait(len(agent.classifier_requests), route=WHOLE_ROUTE)
    assert_task_done(run, agent)
    first, last = agent.chat_requests[0], agent.chat_requests[-1]
    # Every declaration reached the upstream as a function tool, once each, with its schema.
    tools = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert len(tools) == len(first["tools"]) and {"write_file", "run_shell_command"} <= set(tools)
    assert tools[agent.tool]["parameters"]["type"] == "object"
    # The CLI names the call (Gemini sends no id); the result answers that call upstream.
    [calling] = [m for m in last["messages"] if m.get("tool_calls")]
    [result] = [m for m in last["messages"] if m.get("role") == "tool"]
    assert calling["tool_calls"][0]["id"] == result["tool_call_id"]
    assert calling["tool_calls"][0]["function"]["name"] == agent.tool
    if model is None:
        # "auto": the router asked for its JSON once and got it, so no retries;
        # the score picked a Gemini model for both turns.
        [classifier] = agent.classifier_requests
        assert classifier["response_format"]["type"] == "json_schema", classifier
        schema = classifier["response_format"]["json_schema"]["schema"]
        assert set(schema["properties"]) == set(CLASSIFIER_ANSWER)
        assert "flash-lite" in classifier["model"]
        assert first["model"].startswith("gemini-") and last["model"] == first["model"]
    else:
        assert not agent.classifier_requests
        assert {body["model"] for body in agent.chat_requests} == {model}
    # One usage event per model call, on the route pattern (the model is not in it).
    events = turns + routed
    assert [(e["face"], e["status"]) for e in events] == [("gemini", 200)] * len(events), events


@pytest.mark.parametrize("upstream", ["write_file"], indirect=True)
def test_gemini_cli_counts_the_upstreams_tokens(upstream, tmp_path):
    """usageMetadata in Gemini's terms, as the CLI's own stats add them up over two turns:
    thoughts apart from candidates, cached tokens as cached content."""
    scripted, agent = upstream
    agent.reasoning = "The user wants a file; write_file writes it."
    agent.usage = {
        "prompt_tokens": 900,
        "completion_tokens": 30,
        "prompt_tokens_details": {"cached_tokens": 640},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    with serve_proxy("embedded", scripted.url, tmp_path, api_key=KEY) as proxy:
        run = run_gemini(proxy.url, tmp_path, "--output-format", "json", key=KEY, model=LOCAL)
    assert_task_done(run, agent)
    said = json.loads(run.stdout)
    assert said["response"] == agent.final
    [(_, stats)] = said["stats"]["models"].items()  # keyed by the answers' modelVersion
    tokens = stats["tokens"]
    assert tokens["prompt"] == 2 * 900 and tokens["cached"] == 2 * 640, tokens
    assert tokens["thoughts"] == 2 * 12 and tokens["candidates"] == 2 * (30 - 12), tokens
    assert tokens["total"] == 2 * (900 + 30), tokens
    assert said["stats"]["tools"]["byName"]["write_file"]["success"] == 1


@pytest.mark.parametrize("model", [None, LOCAL])
def test_a_wrong_key_is_refused_in_geminis_words(upstream, tmp_path, model):
    """A bad key is Google's 400 (API_KEY_INVALID), which the CLI prints and does not retry."""
    scripted, agent = upstream
    with serve_proxy("embedded", scripted.url, tmp_path, api_key=KEY) as proxy:
        run = run_gemini(proxy.url, tmp_path, key="wrong-key", model=model)
        refused = proxy.usage.wait(1)
    assert run.returncode != 0, run.explain()
    assert "API key not valid. Please pass a valid API key." in run.stderr, run.explain()
    assert '"status":"INVALID_ARGUMENT"' in run.stderr, run.explain()
    assert refused and all(event["status"] == 400 for event in refused), refused
    assert not agent.chat_requests and not agent.classifier_requests
    assert not (run.cwd / "out.txt").exists()
