"""The `llmchat` command line: `wire` (offline) and `demo`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from .backends.openai_common import OpenAICommon
from .errors import LLMChatError
from .settings import Settings

__all__ = ["main"]

_OFFLINE_URL = "http://127.0.0.1:8080/v1"

_DEMO_REQUEST: dict[str, Any] = {
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Part 1 of the report."},
        {"role": "user", "content": "Part 2 of the report."},
        {"role": "assistant", "content": "Noted."},
        {"role": "system", "content": "Answer in JSON."},
        {"role": "user", "content": "Which change does the report justify?"},
    ],
    "settings": {
        "max_tokens": 128,
        "temperature": 0,
        "json_schema": {
            "type": "object",
            "properties": {
                "change": {"type": "string"},
                "evidence": {"type": "string", "description": "verbatim quote"},
                "note": {"type": "string"},
            },
            "required": ["evidence", "change"],
        },
    },
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with `argv` (default: the process arguments); return the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except (LLMChatError, OSError, json.JSONDecodeError) as exc:
        print(f"llmchat {args.command}: error: {exc}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmchat", description="Exact client toolkit for OpenAI-compatible chat servers."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    wire = commands.add_parser(
        "wire",
        help="print the exact bytes llmchat would POST for a conversation (offline)",
        description=(
            "Read a JSON file holding a list of messages, or an object with "
            "'messages' and optional 'settings', 'tools', 'tool_choice' and 'model', "
            "and print the exact request body llmchat would post. Nothing is sent."
        ),
    )
    wire.add_argument("file", help="JSON file to read, or - for standard input")
    wire.add_argument(
        "--normalize",
        choices=("none", "alternate-roles"),
        default="none",
        help="message normalization to apply (default: none)",
    )
    wire.add_argument(
        "--system-message-mode",
        choices=("as-is", "leading"),
        default="as-is",
        help="'leading' lifts every system message to the front first",
    )
    wire.add_argument("--model", help="model name to put in the body")
    wire.add_argument("--stream", action="store_true", help="show the streaming request body")
    wire.add_argument("--api-url", default=_OFFLINE_URL, help="base URL shown in the summary")
    wire.add_argument(
        "--show-request",
        action="store_true",
        help="print the method, URL and (redacted) headers to stderr as well",
    )
    wire.set_defaults(run=_run_wire)

    demo = commands.add_parser("demo", help="show what llmchat does with a sample conversation")
    demo.set_defaults(run=_run_demo)
    return parser


def _load(path: str) -> Any:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    return json.loads(text)


def _request_parts(document: Any) -> dict[str, Any]:
    if isinstance(document, list):
        return {"messages": document}
    if isinstance(document, dict) and "messages" in document:
        unknown = sorted(set(document) - {"messages", "settings", "tools", "tool_choice", "model"})
        if unknown:
            raise LLMChatError(f"unknown top-level key(s) in the input: {', '.join(unknown)}")
        return document
    raise LLMChatError("the input must be a list of messages or an object with 'messages'")


def _wire_bytes(document: Any, backend: OpenAICommon, *, stream: bool) -> tuple[Any, bytes]:
    parts = _request_parts(document)
    settings = Settings(**parts.get("settings") or {})
    if parts.get("model") and backend.model is None:
        backend = backend.clone(model=parts["model"])
    request = backend.prepare_chat_request(
        parts["messages"],
        tools=parts.get("tools"),
        tool_choice=parts.get("tool_choice"),
        settings=settings,
        stream=stream,
    )
    return request, request.data


def _write(out: BinaryIO, data: bytes) -> None:
    out.write(data)
    if sys.stdout.isatty():
        out.write(b"\n")  # for the eye only; piped output stays byte-exact
    out.flush()


def _run_wire(args: argparse.Namespace) -> int:
    backend = OpenAICommon(
        args.api_url,
        model=args.model,
        message_normalization=args.normalize,
        system_message_mode=args.system_message_mode,
    )
    request, data = _wire_bytes(_load(args.file), backend, stream=args.stream)
    if args.show_request:
        print(repr(request), file=sys.stderr)
    _write(sys.stdout.buffer, data)
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    backend = OpenAICommon(_OFFLINE_URL, model="demo", message_normalization="alternate-roles")
    request, data = _wire_bytes(_DEMO_REQUEST, backend, stream=False)
    print("A conversation with split user turns, a mid-conversation system message and")
    print("a JSON Schema answer, as llmchat would POST it (nothing is sent yet):\n")
    print(f"{request.method} {request.url}")
    sys.stdout.flush()
    _write(sys.stdout.buffer, data)
    print("\n\nThe user turns are merged, the system message is folded into user text, and")
    print("'evidence' comes before 'change' because the schema's required array says so.")
    return 0
