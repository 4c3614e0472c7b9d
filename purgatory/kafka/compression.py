"""Inflating the records of a compressed record batch, within a size bound; and
compressing them, for a topic whose ``compression.type`` names a codec.

Kafka's codecs: 1 gzip (the standard library), 2 snappy (raw, or in the xerial framing
Java clients write), 3 lz4 (frame format), 4 zstd; the last three through ``cramjam`` (in
the ``service`` extra). A batch is stored as the client compressed it; it is inflated only
to read its records for the simulation's log. At most MAX_INFLATED bytes come out of one
batch, whatever it claims: a small batch must not inflate into gigabytes.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, Final

from purgatory.kafka.wire_errors import DecodeError

GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4
MAX_INFLATED: Final = 64 * 1024 * 1024
# What most batches inflate within; a batch that inflates further is tried once more with
# the whole bound (a buffer of that size is not worth zeroing for every batch).
_FIRST_TRY_RATIO: Final = 64
_XERIAL: Final = b"\x82SNAPPY\x00"
_BLOCK_LENGTH: Final = struct.Struct(">i")


class UnsupportedCompression(DecodeError):
    """A codec we cannot inflate here (unknown, or cramjam missing)."""


def inflate(codec: int, data: memoryview) -> bytes:
    """The records section of a batch compressed with ``codec``; DecodeError if it does
    not decompress or would exceed MAX_INFLATED bytes."""
    if codec == GZIP:
        return _gunzip(data)
    if codec not in (SNAPPY, LZ4, ZSTD):
        raise UnsupportedCompression(f"compression codec {codec}")
    try:
        import cramjam
    except ImportError:
        raise UnsupportedCompression(f"compression codec {codec} needs cramjam") from None
    try:
        if codec == SNAPPY:
            return _unsnappy(cramjam, data)
        module = cramjam.lz4 if codec == LZ4 else cramjam.zstd
        return _bounded(module, data)
    except cramjam.DecompressionError as exc:
        raise DecodeError(f"codec {codec} batch does not decompress: {exc}") from None


#: the block size of xerial-framed snappy, as Kafka's Java clients write it
_XERIAL_BLOCK: Final = 32 * 1024


def deflate(codec: int, data: bytes) -> bytes:
    """``data`` (a batch's records section) compressed with ``codec`` as Kafka's Java
    clients write it: gzip, snappy in the xerial framing, an LZ4 frame, a zstd frame.
    UnsupportedCompression for another codec, or one needing cramjam without it."""
    if codec == GZIP:
        deflater = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        return deflater.compress(data) + deflater.flush()
    if codec not in (SNAPPY, LZ4, ZSTD):
        raise UnsupportedCompression(f"compression codec {codec}")
    try:
        import cramjam
    except ImportError:
        raise UnsupportedCompression(f"compression codec {codec} needs cramjam") from None
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    out = [_XERIAL, struct.pack(">ii", 1, 1)]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        out += [_BLOCK_LENGTH.pack(len(block)), block]
    return b"".join(out)


def _gunzip(data: memoryview) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, MAX_INFLATED)
    except zlib.error as exc:
        raise DecodeError(f"gzip batch does not decompress: {exc}") from None
    if inflater.unconsumed_tail:
        raise DecodeError(f"gzip batch inflates beyond {MAX_INFLATED} bytes")
    if not inflater.eof:
        raise DecodeError("gzip batch is cut short")
    return out


def _bounded(module: Any, data: memoryview) -> bytes:
    """Decompress into a fixed buffer, which cramjam refuses to overrun: first one of a
    size most batches fit, then, if that was too small (or the data is bad), the bound."""
    raw = bytes(data)
    size = min(MAX_INFLATED, _FIRST_TRY_RATIO * len(raw) + 4096)
    while True:
        out = bytearray(size)
        try:
            written = int(module.decompress_into(raw, out))
        except Exception as exc:
            if size == MAX_INFLATED:
                raise DecodeError(
                    f"batch does not inflate within {MAX_INFLATED} bytes: {exc}"
                ) from None
            size = MAX_INFLATED
            continue
        return bytes(memoryview(out)[:written])


def _unsnappy(cramjam: Any, data: memoryview) -> bytes:
    """Raw snappy, or xerial blocks (magic, version, compat, then length-prefixed raw
    snappy blocks); each block's inflated length is in its header, checked first."""
    raw = bytes(data)
    blocks = [raw]
    if raw.startswith(_XERIAL):
        blocks = []
        pos = len(_XERIAL) + 8
        while pos < len(raw):
            if pos + 4 > len(raw):
                raise DecodeError("xerial snappy block length cut short")
            (length,) = _BLOCK_LENGTH.unpack_from(raw, pos)
            if length < 0 or pos + 4 + length > len(raw):
                raise DecodeError(f"xerial snappy block of {length} bytes runs past the batch")
            blocks.append(raw[pos + 4 : pos + 4 + length])
            pos += 4 + length
    total = sum(int(cramjam.snappy.decompress_raw_len(block)) for block in blocks)
    if total > MAX_INFLATED:
        raise DecodeError(f"snappy batch inflates beyond {MAX_INFLATED} bytes")
    return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in blocks)
