"""TokenCounter: per-message counts, caching, overhead, and the server tokenizers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat import KoboldCpp, OpenAICommon
from llmchat.errors import InvalidArgumentError, LLMChatError
from llmchat.messages import Message
from llmchat.templates import ChatML
from llmchat.testing import RecordedRequest, Reply, ScriptedServer
from llmchat.tokens import ROLE_OVERHEAD, TokenCounter, TokenizerError


class CharTokenizer:
    """One token per character; counts its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, text: str) -> list[int]:
        self.calls.append(text)
        return [ord(c) for c in text]


HI = {"role": "user", "content": "hi"}
HELLO = Message(role="assistant", content="hello")
OVERHEAD = len("<|im_start|>assistant\n")


def chatml_len(role: str, content: str) -> int:
    return len(f"<|im_start|>{role}\n{content}<|im_end|>\n")


# -- without a template ---------------------------------------------------------


def test_message_without_template_is_text_plus_role_overhead() -> None:
    counter = TokenCounter(CharTokenizer())
    assert counter.count_message(HI) == 2 + ROLE_OVERHEAD
    assert counter.template_overhead() == 0
    assert counter.count_conversation([HI, HELLO]) == 7 + 2 * ROLE_OVERHEAD


def test_message_without_template_counts_tool_calls_json() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    counter = TokenCounter(CharTokenizer())
    m = Message(role="assistant", content=None, tool_calls=[call])
    assert counter.count_message(m) > ROLE_OVERHEAD


def test_whitespace_tokenizer() -> None:
    counter = TokenCounter(lambda s: [hash(w) & 0xFFFF for w in s.split()])
    assert counter.count_message({"role": "user", "content": "a b c"}) == 3 + ROLE_OVERHEAD


# -- with a template --------------------------------------------------------------


def test_overhead_is_the_empty_render() -> None:
    tok = CharTokenizer()
    counter = TokenCounter(tok, ChatML())
    assert counter.template_overhead() == OVERHEAD
    assert counter.template_overhead() == OVERHEAD
    assert len(tok.calls) == 1  # computed once


def test_message_with_template_is_what_it_adds_to_the_prompt() -> None:
    counter = TokenCounter(CharTokenizer(), ChatML())
    assert counter.count_message(HI) == chatml_len("user", "hi")
    assert counter.count_message(HELLO) == chatml_len("assistant", "hello")


def test_conversation_and_prompt_agree_for_chatml() -> None:
    counter = TokenCounter(CharTokenizer(), ChatML())
    conv = [{"role": "system", "content": "be brief"}, HI, HELLO]
    parts = [("system", "be brief"), ("user", "hi"), ("assistant", "hello")]
    expected = OVERHEAD + sum(chatml_len(role, text) for role, text in parts)
    assert counter.count_conversation(conv) == expected
    assert counter.count_prompt(conv) == len(ChatML().render(conv))
    assert counter.count_prompt(conv) == counter.count_conversation(conv)


def test_cache_hits_do_not_call_the_tokenizer() -> None:
    tok = CharTokenizer()
    counter = TokenCounter(tok, ChatML())
    counter.count_conversation([HI, HELLO])
    assert len(tok.calls) == 3  # overhead + two messages
    counter.count_conversation([HI, HELLO, {"role": "user", "content": "again"}])
    assert len(tok.calls) == 4  # only the new message
    counter.count_message(Message(role="user", content="hi"))  # equal content, new object
    assert len(tok.calls) == 4


def test_cache_key_is_the_whole_message() -> None:
    tok = CharTokenizer()
    counter = TokenCounter(tok)
    counter.count_message({"role": "user", "content": "x"})
    counter.count_message({"role": "user", "content": "x", "name": "bob"})
    assert len(tok.calls) == 2


def test_count_request_adds_the_tools_json() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    counter = TokenCounter(CharTokenizer(), ChatML())
    base = counter.count_conversation([HI])
    assert counter.count_request([HI]) == base
    assert counter.count_request([HI], tools=None) == base
    tools_len = len(json.dumps(tools, separators=(",", ":"), sort_keys=True))
    assert counter.count_request([HI], tools=tools) == base + tools_len


def test_count_prompt_needs_a_template() -> None:
    with pytest.raises(InvalidArgumentError, match="template"):
        TokenCounter(CharTokenizer()).count_prompt([HI])


def test_counting_never_mutates_messages() -> None:
    msgs = [dict(HI), {"role": "assistant", "content": [{"type": "text", "text": "yo"}]}]
    before = json.dumps(msgs)
    TokenCounter(CharTokenizer(), ChatML()).count_conversation(msgs)
    assert json.dumps(msgs) == before


# -- bad arguments ------------------------------------------------------------------


@pytest.mark.parametrize("bad", [None, 3, "tokenizer", ["a"]])
def test_bad_tokenize_is_a_type_error_naming_it(bad: Any) -> None:
    with pytest.raises(TypeError, match="tokenize"):
        TokenCounter(bad)


def test_bad_template_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match="template"):
        TokenCounter(CharTokenizer(), "chatml")  # type: ignore[arg-type]


def test_tokenizer_returning_a_non_list_raises() -> None:
    with pytest.raises(TokenizerError, match="list"):
        TokenCounter(lambda s: 3).count_text("x")  # type: ignore[arg-type,return-value]


def test_bad_message_is_rejected() -> None:
    with pytest.raises(ValueError, match="role"):
        TokenCounter(CharTokenizer()).count_message({"role": "wizard", "content": "x"})


# -- server tokenizers ----------------------------------------------------------------


def llama_script(request: RecordedRequest) -> Reply:
    if request.path == "/tokenize":
        text = json.loads(request.body)["content"]
        return Reply.json({"tokens": [ord(c) for c in text]})
    return Reply.error(404, f"no route {request.path}")


def kobold_script(request: RecordedRequest) -> Reply:
    if request.path == "/api/extra/tokencount":
        text = json.loads(request.body)["prompt"]
        return Reply.json({"value": len(text), "ids": [ord(c) for c in text]})
    return Reply.error(404, f"no route {request.path}")


def test_llamacpp_tokenizer_one_request_per_uncached_message() -> None:
    server = ScriptedServer(llama_script)
    with server as url:
        counter = TokenCounter(OpenAICommon(url), ChatML())
        assert counter.count_message(HI) == chatml_len("user", "hi")
        assert len(server.requests) == 2  # the overhead, then the message
        assert counter.count_conversation([HI, HELLO]) == OVERHEAD + chatml_len("user", "hi") + (
            chatml_len("assistant", "hello")
        )
        assert len(server.requests) == 3
        counter.count_conversation([HI, HELLO])
        assert len(server.requests) == 3  # all cached
    assert {(r.method, r.path) for r in server.requests} == {("POST", "/tokenize")}
    bodies = [json.loads(r.body)["content"] for r in server.requests]
    assert "<|im_start|>assistant\n" in bodies


def test_koboldcpp_tokenizer() -> None:
    server = ScriptedServer(kobold_script)
    with server as url:
        counter = TokenCounter(KoboldCpp(url))
        assert counter.count_message(HI) == 2 + ROLE_OVERHEAD
        assert counter.count_message(HI) == 2 + ROLE_OVERHEAD
    assert [(r.method, r.path) for r in server.requests] == [("POST", "/api/extra/tokencount")]
    assert json.loads(server.requests[0].body) == {"prompt": "hi"}


def test_koboldcpp_count_without_ids() -> None:
    with ScriptedServer(Reply.json({"value": 7})) as url:
        assert TokenCounter(KoboldCpp(url)).count_text("whatever") == 7


@pytest.mark.parametrize(
    "reply",
    [
        Reply.error(500, "tokenizer exploded"),
        Reply.json({"nope": 1}),
        Reply.json({"tokens": ["a", "b"]}),
        Reply.text("not json"),
    ],
)
def test_failing_llamacpp_tokenizer_raises(reply: Reply) -> None:
    with ScriptedServer(reply) as url:
        counter = TokenCounter(OpenAICommon(url))
        with pytest.raises(TokenizerError, match="/tokenize") as info:
            counter.count_message(HI)
    assert isinstance(info.value, LLMChatError)


def test_failing_tokenizer_is_not_cached() -> None:
    server = ScriptedServer([Reply.error(503, "busy"), Reply.json({"tokens": [1, 2]})])
    with server as url:
        counter = TokenCounter(OpenAICommon(url))
        with pytest.raises(TokenizerError, match="503"):
            counter.count_message(HI)
        assert counter.count_message(HI) == 2 + ROLE_OVERHEAD
