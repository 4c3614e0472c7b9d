"""CRC-32C (Castagnoli), the checksum of Kafka record batches v2.

The standard library's ``zlib.crc32`` uses the other polynomial. The ``crc32c`` package
(hardware-accelerated C, in the ``service`` extra) is used when installed; otherwise a
table-driven pure-Python fallback computes the same value, about 100x slower.
"""

from __future__ import annotations

from typing import Final


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


try:
    from crc32c import crc32c as _accelerated
except ImportError:  # pragma: no cover - the fallback is tested directly
    crc32c = crc32c_python
else:

    def crc32c(data: bytes | bytearray | memoryview) -> int:
        return int(_accelerated(data))
