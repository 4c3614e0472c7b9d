"""What the wire raises on bytes it cannot read: :class:`DecodeError`, one exception type
for a truncated or garbage frame, header, request body or record batch, whichever
decoder meets it (the record-batch primitives of :mod:`purgatory.kafka.codec`, kio's
schemas, the compression codecs, the frame guard). The connection server answers it
with the API's error response or closes the connection, as Kafka does."""

from __future__ import annotations

__all__ = ["DecodeError"]


class DecodeError(ValueError):
    """The bytes do not decode as the expected Kafka structure."""
