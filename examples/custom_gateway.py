"""Subclass OpenAICommon for your own gateway: one hook per concern, each calling super().

python examples/custom_gateway.py
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from _server import server_url

from llmchat import OpenAICommon, Response

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

    from llmchat.backends import BackendOptions


class GatewayResponse(Response):
    """A Response with the one field this gateway adds."""

    def __init__(self, request: Any = None, *, secrets: tuple[str, ...] = ()) -> None:
        super().__init__(request, secrets=secrets)
        self.words: int | None = None


class TeamGateway(OpenAICommon):
    response_class = GatewayResponse  # static differences are class attributes
    default_api_url = "https://llm.corp.example/v1"  # used when no api_url is given
    api_key_env = ("CORP_LLM_KEY",)  # the key's environment variables, in order

    def __init__(
        self, api_url: str | None = None, team: str = "search", **common: Unpack[BackendOptions]
    ) -> None:
        super().__init__(api_url, **common)
        self.team = team  # clone() keeps it: no _init_kwargs override needed

    def _get_api_headers(self) -> dict[str, str]:
        return {**super()._get_api_headers(), "X-Team": self.team}

    def _finalize_request_body(self, body: dict[str, Any]) -> dict[str, Any]:
        body = super()._finalize_request_body(body)
        return {**body, "priority": "fast" if len(body.get("messages", [])) < 10 else "batch"}

    def _on_complete(self, response: Response) -> None:  # both modes, on success only
        super()._on_complete(response)
        if isinstance(response, GatewayResponse):
            response.words = len(response.msg.split())


with server_url() as url:
    gateway = TeamGateway(url, team="search", model="gateway-model")
    request = gateway.prepare_chat_request([{"role": "user", "content": "Hi"}])
    print("headers:", dict(request.headers))
    print("body:   ", request.data.decode())
    answer = gateway.chat_completion([{"role": "user", "content": "Hi"}])
    print("answer: ", answer.msg, f"({getattr(answer, 'words', None)} words)")
    ops = gateway.clone(team="ops")
    print("clone:  ", ops.team, ops.prepare_chat_request([]).headers["X-Team"])
    ops.close()
    gateway.close()
