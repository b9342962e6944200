"""Content-Encoding for scripted replies: each `Write` compressed and flushed on its own.

A compressed reply is still frozen data: its steps are encoded once, when the
`Reply` is built, so every request it answers gets the same bytes. Each
`Write` becomes the compressor's output for it plus a flush (gzip/deflate
``Z_SYNC_FLUSH``, brotli ``flush()``, zstd ``FLUSH_BLOCK``), so a client can
decode it as soon as it arrives; the compressed stream's end follows the
last step.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, TypeAlias

__all__ = ["ENCODINGS", "ContentEncoding", "compress_writes"]

ContentEncoding: TypeAlias = Literal["gzip", "deflate", "br", "zstd"]
ENCODINGS: Final = ("gzip", "deflate", "br", "zstd")

# (bytes of one write -> flushed output, () -> the stream's end)
_Encoder: TypeAlias = tuple[Callable[[bytes], bytes], Callable[[], bytes]]


def compress_writes(
    pieces: Sequence[bytes], encoding: ContentEncoding
) -> tuple[list[bytes], bytes]:
    """Return each piece compressed and flushed (empty stays empty), and the stream's end."""
    step, end = _encoder(encoding)
    return [step(piece) if piece else b"" for piece in pieces], end()


def _encoder(encoding: str) -> _Encoder:
    if encoding in ("gzip", "deflate"):
        # HTTP's "deflate" is the zlib format (RFC 9110 §8.4.1.2); gzip is wbits 16 + 15.
        z = zlib.compressobj(wbits=31 if encoding == "gzip" else 15)
        return (lambda data: z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)), z.flush
    if encoding == "br":
        brotli = _import("brotli", "br")
        b = brotli.Compressor()
        return (lambda data: b.process(data) + b.flush()), b.finish
    if encoding == "zstd":
        zstd = _zstd()
        c = zstd.ZstdCompressor()
        return (
            (lambda data: c.compress(data, zstd.ZstdCompressor.FLUSH_BLOCK)),
            lambda: c.flush(zstd.ZstdCompressor.FLUSH_FRAME),
        )
    raise ValueError(
        f"Reply(content_encoding) must be one of {ENCODINGS} or None, got {encoding!r}"
    )


def _zstd() -> Any:
    try:
        from compression import zstd  # type: ignore[import-not-found]  # Python 3.14+
    except ImportError:
        return _import("backports.zstd", "zstd")
    return zstd


def _import(module: str, encoding: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(
            f"Reply(content_encoding={encoding!r}) needs the {module} package "
            "(pip install 'llmchat[compression]')"
        ) from None
