"""CRC-32C (Castagnoli), the checksum of Kafka record batches v2.

The standard library's ``zlib.crc32`` uses the other polynomial. The ``crc32c`` package
(hardware-accelerated C, in the ``service`` extra) is used when installed; otherwise a
table-driven pure-Python fallback computes the same value, about 100x slower.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal


def _table() -> tuple[int, ...]:
    poly = 0x82F63B78  # Castagnoli, reflected
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE: Final = _table()


def crc32c_python(data: bytes | bytearray | memoryview) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


#: the ``crc32c`` package's function, imported at the first checksum (None before; False
#: if the package is not installed): its import reads the package's own version from the
#: installed metadata, which scans ``sys.path``, about 10 ms that a cluster answering no
#: record batch need not pay at start
_accelerated: Callable[[bytes | bytearray | memoryview], int] | Literal[False] | None = None


def _load() -> Callable[[bytes | bytearray | memoryview], int] | Literal[False]:
    global _accelerated
    try:
        from crc32c import crc32c as accelerated
    except ImportError:  # pragma: no cover - the fallback is tested directly
        _accelerated = False
    else:
        _accelerated = accelerated
    return _accelerated


def crc32c(data: bytes | bytearray | memoryview) -> int:
    accelerated = _accelerated
    if accelerated is None:
        accelerated = _load()
    if accelerated is False:
        return crc32c_python(data)
    return int(accelerated(data))
