"""The subclass surface: `response_class`, `_on_complete`, `abort_path`, and `clone()`.

Completions run over real sockets against the loopback server.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from llmchat import KoboldCpp, OpenAICommon, OpenRouter, Settings
from llmchat.backends.openai_common import KEEP
from llmchat.backends.openrouter import OpenRouterResponse, with_openrouter_members
from llmchat.response import Response
from llmchat.testing import ChatResponder, Reply, ScriptedServer, Stall, Write

KEY = "sk-subclass-SECRET-7777"
TOKEN = "tok-own-SECRET-8888"
HI = [{"role": "user", "content": "Hi there"}]


# The `server` fixture (tests/conftest.py) runs this script, fresh for each test.
SERVER_SCRIPT = functools.partial(ChatResponder, "Hello back.")


def live_stream() -> Reply:
    """A stream that sends one content event, then stalls until the client hangs up."""
    event = {"choices": [{"index": 0, "delta": {"content": "so far"}, "finish_reason": None}]}
    return Reply(
        headers={"Content-Type": "text/event-stream"},
        framing="close",
        steps=[Write(f"data: {json.dumps(event)}\n\n"), Stall()],
    )


class Tagged(Response):
    """A Response subclass with one provider field."""

    def __init__(self, request: Mapping[str, Any] | None = None, *, secrets: tuple[str, ...] = ()):
        super().__init__(request, secrets=secrets)
        self.tag: str | None = None


class Counting(OpenAICommon):
    """New-style: one class attribute and one completion hook."""

    response_class = Tagged

    def __init__(self, api_url: str, **common: Any) -> None:
        super().__init__(api_url, **common)
        self.completed: list[tuple[bool, str]] = []

    def _on_complete(self, response: Response) -> None:
        super()._on_complete(response)
        self.completed.append((response.is_done, response.msg))
        if isinstance(response, Tagged):
            response.tag = "seen"


# -- response_class ----------------------------------------------------------------


def test_response_class_is_used_in_both_modes(server: ScriptedServer) -> None:
    backend = Counting(server.url)
    blocking = backend.chat_completion(HI)
    streamed = backend.chat_completion_stream(HI).wait(10)
    for response in (blocking, streamed):
        assert type(response) is Tagged and response.is_success
        assert response.tag == "seen" and response.msg == "Hello back."
    assert type(backend.make_response({})) is Tagged
    assert type(backend.make_stream_response({})) is Tagged


def test_default_response_class_is_response() -> None:
    backend = OpenAICommon("http://127.0.0.1:9/v1")
    assert OpenAICommon.response_class is Response
    assert type(backend.make_response({})) is Response
    assert type(backend.make_stream_response({})) is Response


def test_openrouter_sets_response_class_and_overrides_no_factory() -> None:
    assert OpenRouter.response_class is OpenRouterResponse
    assert "make_response" not in vars(OpenRouter)
    assert "make_stream_response" not in vars(OpenRouter)
    assert type(OpenRouter().make_stream_response({})) is OpenRouterResponse


def test_an_old_style_factory_override_still_wins(server: ScriptedServer) -> None:
    class Old(OpenAICommon):
        def make_stream_response(self, request: Mapping[str, Any]) -> Response:
            return Tagged(request, secrets=self._secrets())

    assert type(Old(server.url).chat_completion_stream(HI).wait(10)) is Tagged
    assert type(Old(server.url).chat_completion(HI)) is Response


def test_factories_do_not_change_the_request() -> None:
    backend = KoboldCpp("http://127.0.0.1:9/v1")  # its factories add the abort hook
    body = backend.prepare_chat_request(HI, settings=Settings(max_tokens=3)).body
    snapshot = copy.deepcopy(body)
    for factory in (backend.make_response, backend.make_stream_response):
        response = factory(body)
        assert response.request is body and not response.is_done
    assert body == snapshot


# -- _on_complete ------------------------------------------------------------------


def test_on_complete_runs_once_per_success_in_both_modes(server: ScriptedServer) -> None:
    backend = Counting(server.url)
    assert backend.chat_completion(HI).is_success
    assert backend.completed == [(False, "Hello back.")]  # before the Response is done
    assert backend.chat_completion_stream(HI).wait(10).is_success
    assert backend.completed == [(False, "Hello back.")] * 2


def test_on_complete_runs_once_when_a_stream_gets_a_whole_body(server: ScriptedServer) -> None:
    body = {
        "choices": [{"index": 0, "message": {"content": "whole"}, "finish_reason": "stop"}],
    }
    server.push(Reply.json(body))  # a server that ignored "stream": true
    backend = Counting(server.url)
    assert backend.chat_completion_stream(HI).wait(10).is_success
    assert backend.completed == [(False, "whole")]


@pytest.mark.parametrize(
    "reply",
    [
        Reply.error(500, "boom"),
        Reply.json(
            {"choices": [{"index": 0, "message": {"content": "x"}, "finish_reason": "length"}]}
        ),
    ],
    ids=["http-500", "length"],
)
def test_on_complete_does_not_run_on_failure(server: ScriptedServer, reply: Reply) -> None:
    backend = Counting(server.url)
    server.push(reply)
    assert not backend.chat_completion(HI).is_success
    server.push(reply)
    assert not backend.chat_completion_stream(HI).wait(10).is_success
    assert backend.completed == []


def test_on_complete_does_not_run_on_cancel(server: ScriptedServer) -> None:
    backend = Counting(server.url)
    server.push(live_stream())
    streamed = backend.chat_completion_stream(HI)
    assert server.wait_for_requests(1, timeout=5)
    streamed.cancel()
    assert streamed.wait(5).is_cancelled

    server.push(Reply(before_headers=[Stall()]))
    made: list[Response] = []
    created = threading.Event()

    class Recording(Counting):
        def make_response(self, request: Mapping[str, Any]) -> Response:
            made.append(super().make_response(request))
            created.set()
            return made[0]

    recording = Recording(server.url)
    worker = threading.Thread(target=recording.chat_completion, args=(HI,))
    worker.start()
    assert created.wait(5) and server.wait_for_requests(2, timeout=5)
    made[0].cancel()
    worker.join(5)
    assert not worker.is_alive() and made[0].is_cancelled
    assert backend.completed == [] and recording.completed == []


def test_on_complete_that_raises_fails_the_response_in_both_modes(
    server: ScriptedServer,
) -> None:
    class Broken(OpenAICommon):
        def _on_complete(self, response: Response) -> None:
            raise KeyError("cost")

    for response in (
        Broken(server.url).chat_completion(HI),
        Broken(server.url).chat_completion_stream(HI).wait(10),
    ):
        assert response.error_class == "unknown" and "KeyError" in (response.err or "")
        assert response.msg == "Hello back."


def test_an_old_style_on_stream_complete_override_still_runs(server: ScriptedServer) -> None:
    seen: list[str] = []

    class Old(OpenAICommon):  # overrides the per-mode name, without super()
        def _on_stream_complete(self, response: Response) -> None:
            seen.append("stream")

        def _on_complete(self, response: Response) -> None:
            seen.append("complete")

    assert Old(server.url).chat_completion_stream(HI).wait(10).is_success
    assert seen == ["stream"]  # its override replaced the default, as before
    assert Old(server.url).chat_completion(HI).is_success
    assert seen == ["stream", "complete"]


def test_per_mode_overrides_that_call_super_keep_on_complete(server: ScriptedServer) -> None:
    seen: list[str] = []

    class Both(OpenAICommon):
        def _on_blocking_complete(self, response: Response) -> None:
            super()._on_blocking_complete(response)
            seen.append("blocking")

        def _on_stream_complete(self, response: Response) -> None:
            super()._on_stream_complete(response)
            seen.append("stream")

        def _on_complete(self, response: Response) -> None:
            super()._on_complete(response)
            seen.append("complete")

    Both(server.url).chat_completion(HI)
    Both(server.url).chat_completion_stream(HI).wait(10)
    assert seen == ["complete", "blocking", "complete", "stream"]


def test_on_complete_does_not_change_the_request(server: ScriptedServer) -> None:
    for backend in (Counting(server.url), OpenRouter(KEY, api_url=server.url)):
        body = backend.prepare_chat_request(HI).body
        snapshot = copy.deepcopy(body)
        response = backend.make_response(body)
        response._add_text("done")
        backend._on_complete(response)
        assert body == snapshot and response.request is body
    assert server.requests == []  # no generation id: OpenRouter looked nothing up


def test_openrouter_looks_up_the_generation_from_on_complete(server: ScriptedServer) -> None:
    assert "_on_blocking_complete" not in vars(OpenRouter)
    assert "_on_stream_complete" not in vars(OpenRouter)
    backend = OpenRouter(KEY, api_url=server.url)
    response = backend.chat_completion_stream(HI).wait(10)
    assert response.is_success  # ChatResponder's id is the generation id; no such route
    assert [seen.path.split("?")[0] for seen in server.requests] == [
        "/v1/chat/completions",
        "/v1/generation",
    ]


# -- abort_path --------------------------------------------------------------------


def test_abort_path_is_posted_after_a_cancel(server: ScriptedServer) -> None:
    class Webui(OpenAICommon):
        abort_path = "/v1/internal/stop-generation"

    server.push(live_stream())
    response = Webui(server.url).chat_completion_stream(HI)
    assert server.wait_for_requests(1, timeout=5)
    response.cancel()
    assert server.wait_for_requests(2, timeout=5)
    assert server.requests[1].method == "POST"
    assert server.requests[1].path == "/v1/internal/stop-generation"


def test_no_abort_path_posts_nothing(server: ScriptedServer) -> None:
    server.push(live_stream())
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    assert server.wait_for_requests(1, timeout=5)
    response.cancel()
    assert response.wait(5).is_cancelled
    assert OpenAICommon(server.url).chat_completion(HI).is_success  # the next request
    assert [seen.path for seen in server.requests] == ["/v1/chat/completions"] * 2


# -- clone -------------------------------------------------------------------------


class Team(OpenAICommon):
    """A subclass with its own positional and keyword arguments, no `_init_kwargs`."""

    def __init__(
        self,
        api_url: str,
        team: str | None,
        region: str | None = "eu",
        *,
        priority: int | None = 1,
        token: str | None = None,
        **common: Any,
    ) -> None:
        super().__init__(api_url, **common)
        self._team = team  # stored under another name: clone must not depend on it
        self.region = region
        self.priority = priority
        self._token = token

    def _secrets(self) -> tuple[str, ...]:
        return (*super()._secrets(), *((self._token,) if self._token else ()))


def own(backend: Team) -> tuple[Any, ...]:
    return (backend._team, backend.region, backend.priority, backend._token)


def test_clone_round_trips_a_subclasss_own_arguments() -> None:
    positional = Team("http://h/v1", "search", "us", priority=3, token=TOKEN, model="m")
    keyword = Team(api_url="http://h/v1", team="search", region="us", priority=3, token=TOKEN)
    defaults = Team("http://h/v1", "search")
    for backend in (positional, keyword):
        twin = backend.clone()
        assert type(twin) is Team and own(twin) == ("search", "us", 3, TOKEN)
    assert positional.clone().model == "m"
    assert own(defaults.clone()) == ("search", "eu", 1, None)


def test_clone_changes_own_and_base_arguments() -> None:
    backend = Team("http://h/v1", "search", "us", api_key=KEY, request_timeout=5.0)
    twin = backend.clone(region="ap", priority=KEEP, model="n", request_timeout=None)
    assert own(twin) == ("search", "ap", 1, None)
    assert (twin.model, twin.api_key, twin.timeouts.request) == ("n", KEY, None)
    assert own(backend) == ("search", "us", 1, None) and backend.timeouts.request == 5.0


def test_clone_with_none_sets_none() -> None:
    backend = Team("http://h/v1", "search", "us", priority=3)
    twin = backend.clone(team=None, region=None, priority=None)
    assert own(twin) == (None, None, None, None)


def test_clone_with_an_unknown_name_raises() -> None:
    with pytest.raises(TypeError, match=r"unknown argument.*colour"):
        Team("http://h/v1", "search").clone(colour="red")


def test_clone_keeps_the_live_base_state() -> None:
    backend = Team("http://h/v1", "search", model="m")
    backend.model = "changed"
    assert backend.clone().model == "changed"


def test_clone_of_a_subclass_of_a_subclass_records_the_outermost_call() -> None:
    class Squad(Team):
        def __init__(self, squad: str, *, api_url: str = "http://h/v1", **rest: Any) -> None:
            super().__init__(api_url, f"team-of-{squad}", **rest)
            self.squad = squad

    backend = Squad("red", region="us")
    twin = backend.clone(squad="blue")
    assert (twin.squad, twin._team, twin.region) == ("blue", "team-of-blue", "us")


def test_clone_of_a_subclass_without_kwargs_passes_only_what_it_takes() -> None:
    class Fixed(OpenAICommon):
        def __init__(self, team: str = "search") -> None:
            super().__init__("http://fixed/v1", model="fixed")
            self.team = team

    twin = Fixed("ops").clone()
    assert (twin.team, twin.api_url, twin.model) == ("ops", "http://fixed/v1", "fixed")
    with pytest.raises(TypeError, match=r"unknown argument.*model"):
        Fixed().clone(model="other")


def test_clone_of_a_subclass_without_init_is_unchanged() -> None:
    class Plain(OpenAICommon):
        pass

    twin = Plain("http://h/v1", model="m").clone(model="n")
    assert type(twin) is Plain and twin.model == "n"


def test_an_init_kwargs_override_still_wins() -> None:
    class Counter(Team):
        def _init_kwargs(self) -> dict[str, Any]:
            return {**super()._init_kwargs(), "priority": self.priority + 1}

    backend = Counter("http://h/v1", "search")
    assert backend.clone().priority == 2 and backend.clone().clone().priority == 3


def test_constructor_errors_are_unchanged() -> None:
    with pytest.raises(TypeError, match="team"):
        Team("http://h/v1")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="api_url"):
        Team("localhost", "search")


def test_recorded_arguments_never_show_a_secret() -> None:
    backend = Team("http://h/v1", "search", api_key=KEY, token=TOKEN)
    recorded = vars(backend)["_constructor_args"]
    texts = [repr(recorded), str(recorded), repr(backend), repr(backend.clone())]
    assert all(KEY not in text and TOKEN not in text for text in texts)
    assert "token" in repr(recorded) and "api_key" in repr(recorded)  # names only


def test_openrouter_clone_keeps_its_extras_and_the_resolved_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    backend = OpenRouter(
        model="m",
        x_title="App",
        provider={"order": ["OpenAI"]},
        models=["a/b"],
        cache_breakpoints=False,
        api_url="http://127.0.0.1:9/v1",
    )
    monkeypatch.delenv("OPENROUTER_API_KEY")
    twin = backend.clone(models=None)
    assert type(twin) is OpenRouter and twin.api_key == KEY and twin.x_title == "App"
    assert (twin.provider, twin.models, twin.cache_breakpoints) == (
        {"order": ["OpenAI"]},
        None,
        False,
    )
    assert twin.api_url == "http://127.0.0.1:9/v1"


def test_koboldcpp_clone_keeps_its_defaults_and_changes() -> None:
    default = KoboldCpp()
    assert default.clone().timeouts.headers is None
    assert default.clone().api_url == "http://localhost:5001/v1"
    given = KoboldCpp("http://k:5001/v1", headers_timeout=5.0, keep_raw=True)
    twin = given.clone(model="x")
    assert (twin.api_url, twin.timeouts.headers, twin.keep_raw, twin.model) == (
        "http://k:5001/v1",
        5.0,
        True,
        "x",
    )


# -- hook purity of what OpenRouter moved --------------------------------------------


@pytest.mark.parametrize("text", [False, True], ids=["chat", "text"])
def test_openrouter_finalize_leaves_its_input_unchanged(text: bool) -> None:
    backend = OpenRouter(provider={"sort": "price"}, models=["a/b"], transforms=["middle-out"])
    body: dict[str, Any] = {
        "model": "m",
        "reasoning_effort": "low",
        "reasoning": {"exclude": True},
        **({"prompt": "Hi"} if text else {"messages": [{"role": "user", "content": "Hi"}] * 2}),
    }
    snapshot = copy.deepcopy(body)
    finished = backend._finalize_request_body(body)
    assert body == snapshot
    assert finished["reasoning"] == {"effort": "low", "exclude": True}
    assert "reasoning_effort" not in finished
    assert finished["provider"] == {"sort": "price"} and finished["models"] == ["a/b"]
    finished["provider"]["sort"] = "changed"
    assert backend.provider == {"sort": "price"}


def test_with_openrouter_members_is_pure_and_body_wins() -> None:
    body = {"reasoning_effort": "high", "reasoning": "custom", "provider": {"sort": "latency"}}
    routing = {"provider": {"sort": "price"}, "models": ["a/b"]}
    snapshots = copy.deepcopy((body, routing))
    new = with_openrouter_members(body, routing)
    assert (body, routing) == snapshots
    assert new == {"reasoning": "custom", "provider": {"sort": "latency"}, "models": ["a/b"]}


# -- one screen per provider -------------------------------------------------------


def overridden(cls: type[OpenAICommon]) -> list[str]:
    """Methods of OpenAICommon that `cls` itself redefines (the constructor and dunders
    aside); class attributes, `response_class` included, are free."""
    # Every name OpenAICommon has, its mixins' included (probe_server_limits is a side request).
    base = {name for klass in OpenAICommon.__mro__[:-1] for name in vars(klass)}
    return sorted(
        name
        for name, value in vars(cls).items()
        if name in base and not name.startswith("__") and _is_method(value)
    )


def _is_method(value: Any) -> bool:
    return inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod, property))


def test_providers_override_few_hooks() -> None:
    assert overridden(OpenRouter) == [
        "_finalize_request_body",
        "_get_api_headers",
        "_lift_usage",
        "_on_complete",
    ]
    assert overridden(KoboldCpp) == [
        "_get_api_settings",
        "_reconcile_finish_reason",
        "probe_server_limits",
    ]
    assert len(overridden(OpenRouter)) <= 4 and len(overridden(KoboldCpp)) <= 3
