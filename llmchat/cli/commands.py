"""The `llmchat` command line: `demo`, `chat`, `probe`, `wire`, `proxy` and `usage`.

`demo`, `chat` and `probe` talk to ``LLMCHAT_API_URL`` (key from
``LLMCHAT_API_KEY``, model from ``LLMCHAT_MODEL``) or ``--api-url``; with no
server configured, `demo` starts the embedded loopback server in-process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from ..backends.openai_common import OpenAICommon
from ..errors import LLMChatError
from ..settings import Settings
from ..usage_report import add_parser as add_usage_parser
from .env import env_key
from .proxy_command import add_parser as add_proxy_parser

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

    demo = commands.add_parser(
        "demo",
        help="a real round trip: against LLMCHAT_API_URL, else the embedded loopback server",
    )
    _add_server_options(demo)
    demo.set_defaults(run=_run_demo)

    chat = commands.add_parser("chat", help="send one chat completion and print the answer")
    chat.add_argument("message", nargs="*", help="the user message (default: read stdin)")
    _add_server_options(chat)
    chat.add_argument("--system", help="a system message to put first")
    chat.add_argument("--max-tokens", type=int, help="most tokens to generate")
    chat.add_argument("--temperature", type=float, help="sampling temperature")
    chat.add_argument(
        "--normalize",
        choices=("none", "alternate-roles"),
        default="none",
        help="message normalization (default: none)",
    )
    chat.add_argument("--json", action="store_true", help="print the whole outcome as JSON")
    chat.add_argument("--stream", action="store_true", help="print the answer as it arrives")
    chat.set_defaults(run=_run_chat)

    probe = commands.add_parser("probe", help="ask the server for its context size and slots")
    _add_server_options(probe)
    probe.set_defaults(run=_run_probe)

    add_proxy_parser(commands)
    add_usage_parser(commands)
    return parser


def _add_server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api-url",
        default=os.environ.get("LLMCHAT_API_URL"),
        help="OpenAI-compatible base URL (default: $LLMCHAT_API_URL)",
    )
    parser.add_argument(
        "--model", default=os.environ.get("LLMCHAT_MODEL"), help="model (default: $LLMCHAT_MODEL)"
    )
    parser.add_argument(
        "--api-key-env",
        default="LLMCHAT_API_KEY",
        help="environment variable holding the API key (default: LLMCHAT_API_KEY); "
        "keys are never taken on the command line, where other users could read them",
    )


def _backend(args: argparse.Namespace, **options: Any) -> OpenAICommon:
    if not args.api_url:
        raise LLMChatError("no server: pass --api-url or set LLMCHAT_API_URL")
    return OpenAICommon(
        args.api_url, api_key=env_key(args.api_key_env), model=args.model, **options
    )


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


@contextlib.contextmanager
def _demo_server(args: argparse.Namespace) -> Iterator[str]:
    """The configured server, or the embedded loopback server for the demo's length."""
    if args.api_url:
        yield args.api_url
        return
    from ..testing import ChatResponder, ScriptedServer  # only the demo needs it

    answer = '{"evidence":"Part 2 of the report.","change":"Ship the second part."}'
    with ScriptedServer(ChatResponder(answer, model="loopback")) as url:
        print(f"(no LLMCHAT_API_URL set: started the embedded loopback server at {url})\n")
        yield url


def _run_demo(args: argparse.Namespace) -> int:
    with _demo_server(args) as url:
        args.api_url = url
        backend = _backend(args, message_normalization="alternate-roles")
        parts = _request_parts(_DEMO_REQUEST)
        settings = Settings(**parts["settings"])
        request = backend.prepare_chat_request(parts["messages"], settings=settings)
        print("1. The request, exactly as posted (split user turns merged, the later system")
        print("   message folded into user text, 'evidence' before 'change' as required says):\n")
        print(f"   {request.method} {request.url}")
        print(f"   {request.data.decode()}\n")
        response = backend.chat_completion(parts["messages"], settings=settings)
        print("2. The outcome, a settled Response:\n")
        for line in _describe(response):
            print(f"   {line}")
        print("\n3. The same request streamed: chunks as they arrive, then the settled state:\n")
        streamed = backend.chat_completion_stream(parts["messages"], settings=settings)
        print("   " + " | ".join(repr(text) for text in streamed.iter_text()))
        for line in _describe(streamed):
            print(f"   {line}")
        backend.close()
    return 0 if response.is_success and streamed.is_success else 1


def _describe(response: Any) -> list[str]:
    lines = [
        f"is_success={response.is_success} finish_reason={response.finish_reason!r} "
        f"error_class={response.error_class!r}",
        f"msg={response.msg!r}",
        f"model={response.model!r} prompt_tokens={response.prompt_tokens} "
        f"completion_tokens={response.completion_tokens} cached_tokens={response.cached_tokens}",
        f"total_seconds={response.timing.total_seconds:.4f}",
    ]
    if response.err:
        lines.insert(1, f"err={response.err!r}")
    return lines


def _chat_messages(args: argparse.Namespace) -> list[Any]:
    if args.message:
        messages: list[Any] = [{"role": "user", "content": " ".join(args.message)}]
    else:
        text = sys.stdin.read()
        document = None
        with contextlib.suppress(json.JSONDecodeError):
            document = json.loads(text)
        messages = document if isinstance(document, list) else [{"role": "user", "content": text}]
    if args.system:
        messages.insert(0, {"role": "system", "content": args.system})
    return messages


def _run_chat(args: argparse.Namespace) -> int:
    backend = _backend(args, message_normalization=args.normalize)
    settings = Settings(max_tokens=args.max_tokens, temperature=args.temperature)
    if args.stream and not args.json:
        return _stream_chat(backend, _chat_messages(args), settings)
    response = backend.chat_completion(_chat_messages(args), settings=settings)
    backend.close()
    if args.json:
        print(json.dumps(_outcome(response), ensure_ascii=False, indent=2))
    elif response.is_success:
        print(response.msg)
    else:
        if response.msg:
            print(response.msg)
        print(f"llmchat chat: {response.error_class}: {response.err}", file=sys.stderr)
    return 0 if response.is_success else 1


def _stream_chat(backend: OpenAICommon, messages: list[Any], settings: Settings) -> int:
    # Ctrl-C leaves the with-block, which cancels the stream and hangs up on the server.
    with backend.chat_completion_stream(messages, settings=settings) as response:
        for text in response.iter_text():
            sys.stdout.write(text)
            sys.stdout.flush()
    sys.stdout.write("\n")
    backend.close()
    if not response.is_success:
        print(f"llmchat chat: {response.error_class}: {response.err}", file=sys.stderr)
    return 0 if response.is_success else 1


def _outcome(response: Any) -> dict[str, Any]:
    return {
        "is_success": response.is_success,
        "msg": response.msg,
        "reasoning_text": response.reasoning_text,
        "tool_calls": [call.to_openai() for call in response.tool_calls],
        "finish_reason": response.finish_reason,
        "error_class": response.error_class,
        "error_status": response.error_status,
        "err": response.err,
        "model": response.model,
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
        "cached_tokens": response.cached_tokens,
    }


def _run_probe(args: argparse.Namespace) -> int:
    backend = _backend(args)
    print(json.dumps(backend.probe_server_limits()))
    backend.close()
    return 0
