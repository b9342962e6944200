"""Subclass OpenAICommon for your own gateway: a header and a body field, one hook each.

python examples/custom_gateway.py
"""

from __future__ import annotations

from typing import Any

from _server import server_url

from llmchat import OpenAICommon


class TeamGateway(OpenAICommon):
    def _get_api_headers(self) -> dict[str, str]:
        return {**super()._get_api_headers(), "X-Team": "search"}

    def _finalize_request_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "priority": "fast" if len(body.get("messages", [])) < 10 else "batch"}


with server_url() as url:
    gateway = TeamGateway(url, model="gateway-model")
    request = gateway.prepare_chat_request([{"role": "user", "content": "Hi"}])
    print("headers:", dict(request.headers))
    print("body:   ", request.data.decode())
    print("answer: ", gateway.chat_completion([{"role": "user", "content": "Hi"}]).msg)
    gateway.close()
