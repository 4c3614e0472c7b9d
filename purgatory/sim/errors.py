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
    INVALID_TOPIC_EXCEPTION = "INVALID_TOPIC_EXCEPTION"
    INVALID_REPLICA_ASSIGNMENT = "INVALID_REPLICA_ASSIGNMENT"
    ELIGIBLE_LEADERS_NOT_AVAILABLE = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    ELECTION_NOT_NEEDED = "ELECTION_NOT_NEEDED"
    PREFERRED_LEADER_NOT_AVAILABLE = "PREFERRED_LEADER_NOT_AVAILABLE"
    KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"


class SimulationError(ValueError):
    """A request the cluster refuses outright, as Kafka would answer it: ``code`` is the
    :class:`ErrorCode` (a value: nobody parses the text), ``message`` says why.

    A ``ValueError``, so code that catches bad input in general still catches it."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
