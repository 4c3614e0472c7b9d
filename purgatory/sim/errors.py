"""Kafka's error codes, by name, as the simulation reports them."""

from __future__ import annotations

import enum


class ErrorCode(enum.StrEnum):
    """A subset of Kafka's protocol errors; the value is Kafka's name for it."""

    NONE = "NONE"
    NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
    REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
    UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
    OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
    INVALID_REQUEST = "INVALID_REQUEST"
    INVALID_REQUIRED_ACKS = "INVALID_REQUIRED_ACKS"
    NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    LEADER_NOT_AVAILABLE = "LEADER_NOT_AVAILABLE"
    BROKER_NOT_AVAILABLE = "BROKER_NOT_AVAILABLE"
    TOPIC_ALREADY_EXISTS = "TOPIC_ALREADY_EXISTS"
    INVALID_REPLICATION_FACTOR = "INVALID_REPLICATION_FACTOR"
    INVALID_PARTITIONS = "INVALID_PARTITIONS"


class SimulationError(Exception):
    """A request the cluster rejects outright (bad arguments); carries an :class:`ErrorCode`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
