"""The HTTP service's own refusals: its limits, its routes and its access rules, which
Kafka has no error code for. JSON answers name them as they name Kafka's codes (the
``error`` field), so a client reads both the same way; the Kafka wire never carries them."""

from __future__ import annotations

import enum


class ServiceRefusal(enum.StrEnum):
    """Why the HTTP service refused a request before it reached the cluster."""

    NOT_FOUND = "NOT_FOUND"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    INVALID_HOST = "INVALID_HOST"
    UNAUTHORIZED = "UNAUTHORIZED"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    REQUEST_TIMEOUT = "REQUEST_TIMEOUT"
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    TOO_MANY_TOPICS = "TOO_MANY_TOPICS"
    TOO_MANY_CONNECTIONS = "TOO_MANY_CONNECTIONS"
    TOO_MANY_PENDING_REQUESTS = "TOO_MANY_PENDING_REQUESTS"
    TOO_MANY_BYTES_IN_FLIGHT = "TOO_MANY_BYTES_IN_FLIGHT"
