"""Ask KoboldCpp for JSON whose fields come back in the schema's `required` order.

    python examples/koboldcpp_json_schema.py
    LLMCHAT_API_URL=http://localhost:5001/v1 python examples/koboldcpp_json_schema.py

KoboldCpp compiles a top-level `json_schema` into a sampling grammar that
writes an object's fields in the order the schema lists them. llmchat sends
`properties` in `required` order, so the evidence comes before the verdict.
The embedded server only plays a canned answer; a real KoboldCpp generates it.
"""

from __future__ import annotations

import json

from _server import server_url

from llmchat import Settings
from llmchat.backends.koboldcpp import KoboldCpp

SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["true", "false"]},
        "evidence": {"type": "string"},
    },
    "required": ["evidence", "verdict"],  # the evidence first, then the verdict it supports
}
CANNED = '{"evidence":"Paris has been the seat of government since 987.","verdict":"true"}'
MESSAGES = [{"role": "user", "content": "Is Paris the capital of France? Answer in JSON."}]

with server_url(CANNED) as url:
    backend = KoboldCpp(url, settings=Settings(json_schema=SCHEMA, max_tokens=200))
    print("body:", backend.prepare_chat_request(MESSAGES).data.decode())
    response = backend.chat_completion(MESSAGES)
    if not response.is_success:
        print("failed:", response.err)
    else:
        print("answer:", response.msg)
        try:
            fields = list(json.loads(response.msg))
        except ValueError:
            fields = []
        print("fields in order:", ", ".join(fields) or "(not a JSON object)")
    backend.close()
