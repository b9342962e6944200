"""Time `llmchat.wire_json.encode` against the C encoder and what openai / litellm do.

Every request llmchat sends goes through `encode`, so its cost is paid per call.
The body is a realistic large chat request (200 messages, 20 tools with nested
JSON Schemas), built deterministically so every run times the same bytes. The
floor is `json.dumps(sort_keys=True)` in C: `encode` does the same job plus
the schema ``properties`` ordering and path-naming validation, and should stay
within 3x of it.

    python bench/bench_wire_json.py [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import pstats
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _report import (
    BENCHMARKS_MD,
    NOT_INSTALLED,
    best_of,
    best_of_interleaved,
    calls_for,
    stamp,
    table,
    write_section,
)

SECTION = "wire_json.encode: request-body serialization"
TARGET_RATIO = 3.0

# -- a realistic body ---------------------------------------------------------

_WORDS = (
    "the model should return a short answer with the relevant context and cite each "
    "source when the user asks for details about the deployment configuration of "
    "services running in the cluster including memory limits retries timeouts and "
    "logs please summarise explain compare function result error value request "
    "response token stream schema field array object string number boolean null"
).split()
_NON_ASCII = [
    "café",
    "naïve",
    "Straße",
    "über",
    "São Paulo",
    "Zürich",
    "résumé",
    "français",
    "日本語のテキスト",
    "東京",
    "中文内容",
    "你好世界",
    "Привет",
    "мир",
    "Ελληνικά",
    "עברית",
    "العربية",
    "हिन्दी",
    "한국어",
    "🙂",
    "🚀",
    "—",
    "…",
    "€42",
    "±3 °C",
]


def _text(rng: random.Random, length: int, non_ascii: float = 0.04) -> str:
    """About `length` characters of prose, with some non-ASCII words mixed in."""
    words: list[str] = []
    size = 0
    while size < length:
        word = rng.choice(_NON_ASCII) if rng.random() < non_ascii else rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    text = " ".join(words)[:length].rstrip()
    return text[0].upper() + text[1:] + "."


def _message_length(rng: random.Random) -> int:
    """Chat message lengths: mostly short, a long tail up to 2,000 characters."""
    return min(2000, max(20, int(rng.lognormvariate(5.5, 1.0))))


_TYPES = ["string", "integer", "number", "boolean"]


def _leaf_schema(rng: random.Random, name: str) -> dict[str, Any]:
    kind = rng.choice(_TYPES)
    schema: dict[str, Any] = {"type": kind, "description": _text(rng, rng.randint(20, 90))}
    if kind == "string" and rng.random() < 0.35:
        schema["enum"] = [f"{name}_{i}" for i in range(rng.randint(2, 6))]
    elif kind == "string" and rng.random() < 0.3:
        schema["format"] = rng.choice(["date-time", "uri", "email"])
    elif kind in ("integer", "number"):
        schema["minimum"] = 0
        schema["maximum"] = rng.choice([10, 100, 1000, 65535])
        if rng.random() < 0.3:
            schema["default"] = 1
    return schema


def _object_schema(rng: random.Random, depth: int, prefix: str) -> dict[str, Any]:
    """An object schema of 5-12 properties; `required` lists a subset in shuffled order.

    At the top level one or two properties are nested objects and an array may
    hold objects; below that, only leaves, arrays of leaves and ``anyOf``s. A
    tool comes out at a few KB, like the function schemas agents really send.
    """
    count = rng.randint(5, 12) if depth == 0 else rng.randint(5, 7)
    names = [f"{prefix}{rng.choice(_WORDS)}_{i}" for i in range(count)]
    properties: dict[str, Any] = {}
    for index, name in enumerate(names):
        roll = rng.random()
        if depth == 0 and (index == 0 or roll < 0.08):
            properties[name] = _object_schema(rng, depth + 1, f"{name[:3]}_")
        elif roll < 0.3:
            item = (
                _object_schema(rng, depth + 1, "it_")
                if depth == 0 and rng.random() < 0.3
                else _leaf_schema(rng, name)
            )
            properties[name] = {
                "type": "array",
                "description": _text(rng, rng.randint(20, 60)),
                "items": item,
                "maxItems": rng.randint(5, 50),
            }
        elif roll < 0.4:
            properties[name] = {
                "description": _text(rng, 30),
                "anyOf": [_leaf_schema(rng, name), {"type": "null"}],
            }
        else:
            properties[name] = _leaf_schema(rng, name)
    required = rng.sample(names, rng.randint(2, count))  # random order: not alphabetical
    return {
        "type": "object",
        "description": _text(rng, rng.randint(20, 80)),
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _tool(rng: random.Random, index: int) -> dict[str, Any]:
    parameters = _object_schema(rng, 0, "")
    parameters["$defs"] = {
        "Money": {
            "type": "object",
            "properties": {
                "currency": {"type": "string", "enum": ["EUR", "USD", "JPY", "GBP"]},
                "amount": {"type": "number"},
            },
            "required": ["currency", "amount"],
        },
    }
    parameters["properties"]["billing"] = {"$ref": "#/$defs/Money"}
    return {
        "type": "function",
        "function": {
            "name": f"tool_{index}_{rng.choice(_WORDS)}",
            "description": _text(rng, rng.randint(60, 300)),
            "parameters": parameters,
            "strict": True,
        },
    }


def build_body(messages: int = 200, tools: int = 20) -> dict[str, Any]:
    """The benchmark body: the same dict on every call and in every process."""
    rng = random.Random(0)
    out: list[dict[str, Any]] = [{"role": "system", "content": _text(rng, 1500)}]
    call = 0
    while len(out) < messages:
        roll = rng.random()
        if roll < 0.08 and out[-1]["role"] == "user":
            calls = []
            for _ in range(rng.randint(1, 2)):
                call += 1
                arguments = {"query": _text(rng, rng.randint(20, 120)), "limit": rng.randint(1, 50)}
                calls.append(
                    {
                        "id": f"call_{call:04d}",
                        "type": "function",
                        "function": {
                            "name": f"tool_{rng.randrange(tools)}",
                            "arguments": json.dumps(arguments, ensure_ascii=False),
                        },
                    }
                )
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
            for entry in calls:
                result = {"ok": True, "rows": [_text(rng, 60) for _ in range(rng.randint(1, 5))]}
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": entry["id"],
                        "content": json.dumps(result, ensure_ascii=False),
                    }
                )
        else:
            role = "assistant" if out[-1]["role"] == "user" else "user"
            if roll > 0.9:
                role = out[-1]["role"] if out[-1]["role"] in ("user", "assistant") else "user"
            out.append({"role": role, "content": _text(rng, _message_length(rng), 0.06)})
    return {
        "model": "qwen2.5-72b-instruct",
        "max_tokens": 1024,
        "temperature": 0.7,
        "stream": False,
        "messages": out[:messages],
        "tools": [_tool(rng, i) for i in range(tools)],
    }


# -- the contenders -------------------------------------------------------------


def _floor(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _openai_encoder() -> tuple[Callable[[Any], bytes] | None, str]:
    """The function openai-python turns a request body into bytes with, and its name."""
    try:
        import openai
    except ImportError:
        return None, NOT_INSTALLED
    version = openai.__version__
    try:  # recent openai: BaseClient._build_request calls openapi_dumps(json_data) itself
        from openai._utils._json import openapi_dumps
    except ImportError:  # older: the dict goes to httpx as json=, which calls encode_json
        from httpx._content import encode_json

        def via_httpx(body: Any) -> bytes:
            return b"".join(encode_json(body)[1])

        return via_httpx, f"openai {version}: `httpx._content.encode_json` (httpx `json=`)"
    return openapi_dumps, f"openai {version}: `openai._utils._json.openapi_dumps`"


def _openai_create_prep() -> tuple[Callable[[Any], bytes] | None, str]:
    """What `client.chat.completions.create()` does to the body before sending it."""
    try:
        import openai
        from openai._utils import maybe_transform
        from openai._utils._json import openapi_dumps
        from openai.types.chat import completion_create_params
    except ImportError:
        return None, ""
    params = completion_create_params.CompletionCreateParamsNonStreaming

    def prep(body: Any) -> bytes:
        return openapi_dumps(maybe_transform(body, params))

    name = f"openai {openai.__version__}: `maybe_transform` + `openapi_dumps` (`create()` path)"
    return prep, name


def _litellm_encoder() -> tuple[Callable[[Any], bytes] | None, str]:
    """The JSON step litellm's own HTTP handler performs (``hosted_vllm/`` and similar)."""
    try:
        import litellm.llms.custom_httpx.llm_http_handler as handler
    except ImportError:
        return None, NOT_INSTALLED
    from importlib.metadata import version

    # BaseLLMHTTPHandler._make_common_sync_call posts data=json.dumps(data); httpx then
    # encodes the str as UTF-8. Default json.dumps: ASCII escapes, ", " and ": ".
    dumps = handler.json.dumps

    def encode(body: Any) -> bytes:
        return dumps(body).encode("utf-8")

    name = (
        f"litellm {version('litellm')}: `json.dumps(data)` in "
        "`BaseLLMHTTPHandler._make_common_sync_call` (`hosted_vllm/`)"
    )
    return encode, name


# -- the run --------------------------------------------------------------------


def _profile(fn: Callable[[], Any], calls: int = 20, top: int = 6) -> list[list[str]]:
    """The `top` functions by own time under cProfile, per call of `fn`.

    cProfile adds a cost to every Python call, so it overstates the share of the
    Python-level walk; read it for the ranking, not the milliseconds.
    """
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    ranked = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
    rows = []
    for (filename, line, function), (_prim, ncalls, own, cumulative, _callers) in ranked:
        where = f"{Path(filename).name}:{line}" if line else "built-in"
        rows.append(
            [
                f"`{function}` ({where})",
                f"{ncalls / calls:,.0f}",
                f"{own / calls * 1e3:.2f}",
                f"{cumulative / calls * 1e3:.2f}",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    """Time every contender on one body in one run; print and record the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="print a cProfile of encode()")
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)

    from llmchat import wire_json

    body = build_body()
    encoded = wire_json.encode(body)
    floor_bytes = _floor(body)
    assert encoded == wire_json.encode(build_body()), "encode() is not deterministic"
    assert json.loads(encoded) == body, "encode() does not round-trip the body"
    digest = hashlib.sha256(encoded).hexdigest()

    # Everything that is compared is timed in the same interleaved rounds.
    repeat, number = 15, 10
    halves = {key: {key: body[key]} for key in ("messages", "tools")}
    contenders: dict[str, Callable[[], Any]] = {
        "encode": lambda: wire_json.encode(body),
        "floor": lambda: _floor(body),
    }
    check = getattr(wire_json, "_check", None)  # private: may move; then the row is left out
    if check is not None:
        contenders["check"] = lambda: check(body)
    for key, half in halves.items():
        contenders[f"{key} encode"] = lambda half=half: wire_json.encode(half)
        contenders[f"{key} floor"] = lambda half=half: _floor(half)
    openai_fn, openai_name = _openai_encoder()
    if openai_fn is not None:
        contenders["openai"] = lambda: openai_fn(body)
    litellm_fn, litellm_name = _litellm_encoder()
    if litellm_fn is not None:
        contenders["litellm"] = lambda: litellm_fn(body)
    times = best_of_interleaved(contenders, repeat, number)
    floor, mine = times["floor"], times["encode"]

    rows: list[tuple[str, float | None, int | None]] = [
        ("`llmchat.wire_json.encode(body)`", mine, len(encoded))
    ]
    if "check" in times:
        rows.append(("of which: validation, `wire_json._check(body)`", times["check"], None))
    rows.append(
        (
            'raw floor: `json.dumps(sort_keys=True, separators=(",",":"), '
            "ensure_ascii=False).encode()`",
            floor,
            len(floor_bytes),
        )
    )
    notes: list[str] = []
    if openai_fn is None:
        rows.append((f"openai: {openai_name}", None, None))
    else:
        rows.append((openai_name, times["openai"], len(openai_fn(body))))
        prep, prep_name = _openai_create_prep()
        if prep is not None:
            slow = calls_for(lambda: prep(body))  # tens of times the floor: fewer calls
            rows.append((prep_name, best_of(lambda: prep(body), 5, slow), None))
            notes.append(
                "The `create()` row is not a JSON encoder: it adds the SDK's `maybe_transform` "
                "pass, which `client.chat.completions.create()` runs on every body before "
                "`openapi_dumps`; it is timed separately (5 runs), after the interleaved rounds."
            )
    if litellm_fn is None:
        rows.append((f"litellm: {litellm_name}", None, None))
    else:
        rows.append((litellm_name, times["litellm"], len(litellm_fn(body))))
        if openai_fn is not None:
            rows.append(
                (
                    "litellm `openai/` provider: delegates to the openai SDK's `client.post`"
                    " (same as the openai row)",
                    times["openai"],
                    None,
                )
            )
        notes.append(
            "litellm has two paths to an OpenAI-compatible server: the `openai/` provider "
            "hands the dict to `OpenAI.post()`, skipping `maybe_transform`, so its encoding "
            "is openai's `openapi_dumps` (figure repeated from that row); `hosted_vllm/` and "
            "other `BaseLLMHTTPHandler` providers call plain `json.dumps(data)`."
        )

    # Where encode's time goes: the same contest on each half of the body.
    parts = [
        [
            f"`{key}` only ({len(_floor(half)):,} bytes)",
            f"{times[f'{key} encode'] * 1e6:,.0f}",
            f"{times[f'{key} floor'] * 1e6:,.0f}",
            f"{times[f'{key} encode'] / times[f'{key} floor']:.2f}x",
        ]
        for key, half in halves.items()
    ]

    ratio = mine / floor
    lines = [f"{'contender':<100} {'µs/call':>10} {'x floor':>8} {'bytes':>8}"]
    md_rows: list[list[str]] = []
    for name, seconds, size in rows:
        micros = "—" if seconds is None else f"{seconds * 1e6:,.0f}"
        times = "—" if seconds is None else f"{seconds / floor:.2f}x"
        size_text = "" if size is None else f"{size:,}"
        lines.append(f"{name:<100} {micros:>10} {times:>8} {size_text:>8}")
        md_rows.append([name, micros, times, size_text])
    print("\n".join(lines))
    verdict = "within" if ratio <= TARGET_RATIO else "ABOVE"
    print(f"encode / floor = {ratio:.2f}x ({verdict} the {TARGET_RATIO:g}x target)")
    print(f"body: {len(encoded):,} bytes, sha256 {digest}")
    for cells in parts:
        print(f"  {cells[0]}: encode {cells[1]} µs, floor {cells[2]} µs, {cells[3]}")

    profile: list[list[str]] = []
    profile_header = ["function", "calls / encode", "own ms", "cumulative ms"]
    if args.profile or ratio > TARGET_RATIO:
        profile = _profile(lambda: wire_json.encode(body))
        print("cProfile of encode(), per call:")
        for cells in [profile_header, *profile]:
            print(f"  {cells[0]:<60} {cells[1]:>14} {cells[2]:>8} {cells[3]:>14}")

    messages = body["messages"]
    markdown = [
        stamp(),
        "",
        f"Body: {len(messages)} messages ({sum(m['role'] == 'tool' for m in messages)} tool "
        f"results, {sum('tool_calls' in m for m in messages)} assistant tool-call turns, "
        "some non-ASCII text) and "
        f"{len(body['tools'])} tools with nested JSON Schemas; built by `build_body()` "
        f"from `random.Random(0)`. Encoded: **{len(encoded):,} bytes**, SHA-256 "
        f"`{digest}` (the same in every run and process: `encode` is deterministic).",
        "",
        table(["what is timed", "µs / call", "x floor", "bytes"], md_rows),
        "",
        f"**encode / floor = {ratio:.2f}x** ({verdict} the {TARGET_RATIO:g}x target). "
        f"Best of {repeat} interleaved runs of {number} calls each.",
        "",
        "Where the time goes: the same two encoders on each half of the body "
        "(messages are data, written by the C encoder in one call; tools carry the "
        "schemas that `encode` walks in Python):",
        "",
        table(["body part", "encode µs", "floor µs", "x floor"], parts),
        "",
        "The floor sorts every object's members; `encode` additionally orders each "
        "schema's `properties` by its `required` array and validates the whole body "
        "(naming the path of a bad value) before the C encoder writes the data subtrees. "
        "openai and litellm do not sort members at all, so their bytes depend on dict "
        "insertion order; litellm's `json.dumps` default also escapes non-ASCII "
        "(hence more bytes).",
    ]
    for note in notes:
        markdown += ["", note]
    if profile and ratio > TARGET_RATIO:
        markdown += [
            "",
            "Above target, so a cProfile of `encode` (per call; the profiler inflates "
            "Python-level calls, read the ranking):",
            "",
            table(profile_header, profile),
        ]
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, "\n".join(markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
