"""Prompt templates: golden prompts of the built-ins, and Jinja2Template."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llmchat.errors import InvalidArgumentError
from llmchat.templates import (
    ChatML,
    Gemma2,
    Jinja2Template,
    Llama3,
    Llama4,
    MistralV7,
    Template,
)

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hel"},
]


def test_chatml_adds_the_generation_prompt() -> None:
    assert ChatML().render(MESSAGES[:2]) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_chatml_continuation_leaves_the_last_message_open() -> None:
    prompt = ChatML().render(MESSAGES, continuation=True)
    assert prompt.endswith("<|im_start|>assistant\nHel")


def test_render_does_not_touch_its_input() -> None:
    given = copy.deepcopy(MESSAGES)
    ChatML().render(given, continuation=True)
    assert given == MESSAGES


# --- golden prompts of the other built-ins ----------------------------------

L3_HEAD = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
L3_BODY = (
    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n"
)
L4_BODY = (
    "<|header_start|>user<|header_end|>\n\nHi<|eot|><|header_start|>assistant<|header_end|>\n\n"
)
GOLDEN: list[tuple[Template, str, str]] = [
    (
        Llama3(),
        L3_HEAD + "Be brief.<|eot_id|>" + L3_BODY,
        L3_HEAD + "Be brief.<|eot_id|>" + L3_BODY + "Hel",
    ),
    (
        Llama3(date_string="26 Jul 2024"),
        L3_HEAD + "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
        "Be brief.<|eot_id|>" + L3_BODY,
        L3_HEAD + "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
        "Be brief.<|eot_id|>" + L3_BODY + "Hel",
    ),
    (
        Llama4(),
        "<|begin_of_text|><|header_start|>system<|header_end|>\n\nBe brief.<|eot|>" + L4_BODY,
        "<|begin_of_text|><|header_start|>system<|header_end|>\n\nBe brief.<|eot|>"
        + L4_BODY
        + "Hel",
    ),
    (
        Gemma2(),
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n",
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHel",
    ),
    (
        MistralV7(),
        "<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi[/INST]",
        "<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi[/INST]Hel",
    ),
    (
        ChatML(),
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n",
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHel",
    ),
]


@pytest.mark.parametrize(("template", "prompt", "continued"), GOLDEN, ids=lambda v: repr(v)[:30])
def test_golden_prompts(template: Template, prompt: str, continued: str) -> None:
    given = copy.deepcopy(MESSAGES)
    assert template.render(given[:2]) == prompt
    assert template.render(given, continuation=True) == continued
    assert given == MESSAGES


def test_golden_multi_turn_with_closed_assistant_turns() -> None:
    turns = [
        *MESSAGES[:2],
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bye"},
    ]
    assert MistralV7().render(turns) == (
        "<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi[/INST]Hello.</s>[INST]Bye[/INST]"
    )
    assert Gemma2().render(turns) == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello.<end_of_turn>\n"
        "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
    )
    assert Llama4(bos_token="").render(turns[1:]) == (
        "<|header_start|>user<|header_end|>\n\nHi<|eot|>"
        "<|header_start|>assistant<|header_end|>\n\nHello.<|eot|>"
        "<|header_start|>user<|header_end|>\n\nBye<|eot|>"
        "<|header_start|>assistant<|header_end|>\n\n"
    )


def test_continuation_of_a_user_message_leaves_it_open() -> None:
    assert Llama3(bos_token="").render(MESSAGES[1:2], continuation=True) == (
        "<|start_header_id|>user<|end_header_id|>\n\nHi"
    )
    assert MistralV7().render(MESSAGES[1:2], continuation=True) == "<s>[INST]Hi"


def test_gemma2_system_alone_is_a_user_turn() -> None:
    assert Gemma2().render(MESSAGES[:1]) == (
        "<bos><start_of_turn>user\nBe brief.<end_of_turn>\n<start_of_turn>model\n"
    )


def test_every_template_renders_an_empty_conversation() -> None:
    for template, _, _ in GOLDEN:
        assert template.render([]).startswith(template.render([], continuation=True))


# --- Jinja2Template ----------------------------------------------------------

SIMPLE = (
    "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def test_jinja2_renders_with_generation_prompt_and_tokens() -> None:
    t = Jinja2Template(SIMPLE, bos_token="<s>")
    assert t.render(MESSAGES[:2]) == "<s><system>Be brief.</system><user>Hi</user><assistant>"


def test_jinja2_continuation_cuts_after_the_last_content() -> None:
    t = Jinja2Template(SIMPLE, bos_token="<s>")
    assert t.render(MESSAGES, continuation=True) == (
        "<s><system>Be brief.</system><user>Hi</user><assistant>Hel"
    )


def test_jinja2_continuation_finds_trimmed_content() -> None:
    t = Jinja2Template("{% for m in messages %}[{{ m.content | trim }}]{% endfor %}")
    assert t.render([{"role": "user", "content": " Hi \n"}], continuation=True) == "[Hi"


def test_jinja2_continuation_without_content_is_an_error() -> None:
    t = Jinja2Template(SIMPLE)
    with pytest.raises(InvalidArgumentError, match="continuation"):
        t.render([{"role": "assistant", "content": ""}], continuation=True)


def test_jinja2_template_options_match_transformers() -> None:
    source = (
        "{% for m in messages %}\n"
        "  {% if loop.index0 > 0 %}{% break %}{% endif %}\n"
        "  {{ m.content }}|\n"
        "{% endfor %}{{ {'é': 1} | tojson }}"
    )
    assert Jinja2Template(source).render(MESSAGES) == '  Be brief.|\n{"é": 1}'


def test_jinja2_raise_exception_is_a_value_error() -> None:
    t = Jinja2Template("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(ValueError, match="roles must alternate") as info:
        t.render(MESSAGES)
    assert isinstance(info.value, InvalidArgumentError)


def test_jinja2_strftime_now_is_available() -> None:
    assert Jinja2Template("{{ strftime_now('%Y') }}").render([]).isdigit()


def test_jinja2_is_sandboxed() -> None:
    from jinja2.exceptions import SecurityError

    given = copy.deepcopy(MESSAGES)
    with pytest.raises(SecurityError):
        Jinja2Template("{{ messages.append(1) }}").render(given)
    with pytest.raises(SecurityError):
        Jinja2Template("{{ ''.__class__.__mro__ }}").render([])
    assert given == MESSAGES


def test_jinja2_bad_source_is_an_invalid_argument() -> None:
    with pytest.raises(InvalidArgumentError, match="does not compile"):
        Jinja2Template("{% for %}")


def test_jinja2_tools_only_when_non_empty() -> None:
    source = "{% if tools is defined %}{{ tools | tojson }}{% else %}none{% endif %}"
    assert Jinja2Template(source).render([]) == "none"
    assert Jinja2Template(source, tools=[]).render([]) == "none"
    tool = {"type": "function", "function": {"name": "f"}}
    assert Jinja2Template(source, tools=[tool]).render([]) == (
        '[{"type": "function", "function": {"name": "f"}}]'
    )
    assert Jinja2Template(source).render([], tools=[tool]).startswith('[{"type"')


def test_jinja2_tool_call_arguments_are_dicts_and_input_is_untouched() -> None:
    source = (
        "{% for m in messages %}{% for c in m.tool_calls or [] %}"
        "{{ c.function.arguments.city }}{{ c.function.arguments | tojson }}"
        "{% endfor %}{% endfor %}"
    )
    call = {
        "id": "1",
        "type": "function",
        "function": {"name": "w", "arguments": '{"city": "Paris"}'},
    }
    given = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    kept = copy.deepcopy(given)
    assert Jinja2Template(source).render(given) == 'Paris{"city": "Paris"}'
    assert given == kept


def test_jinja2_compiles_once() -> None:
    t = Jinja2Template(SIMPLE)
    compiled = t._compiled
    t.render(MESSAGES)
    t.render(MESSAGES, continuation=True)
    assert t._compiled is compiled


def test_from_tokenizer_config_dict_with_named_templates() -> None:
    config: dict[str, Any] = {
        "chat_template": [
            {"name": "tool_use", "template": "tools"},
            {"name": "default", "template": SIMPLE},
        ],
        "bos_token": {"content": "<s>", "lstrip": False},
        "eos_token": "</s>",
    }
    t = Jinja2Template.from_tokenizer_config(config)
    assert (t.source, t.bos_token, t.eos_token) == (SIMPLE, "<s>", "</s>")


def test_from_tokenizer_config_path_and_directory(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": SIMPLE, "bos_token": "<s>"}), encoding="utf-8"
    )
    for where in (tmp_path, tmp_path / "tokenizer_config.json", str(tmp_path)):
        t = Jinja2Template.from_tokenizer_config(where)
        assert t.render(MESSAGES[1:2]) == "<s><user>Hi</user><assistant>"
        assert t.eos_token == ""


def test_from_tokenizer_config_without_template() -> None:
    with pytest.raises(InvalidArgumentError, match="chat_template"):
        Jinja2Template.from_tokenizer_config({"bos_token": "<s>"})


def test_importing_llmchat_does_not_import_jinja2() -> None:
    code = "import sys, llmchat, llmchat.templates; print('jinja2' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
