"""Kafka's error codes, the one vocabulary of errors: the simulation, the Kafka wire, the
trigger bus and the HTTP service all answer with an :class:`ErrorCode` (public: ``from
purgatory.errors import ErrorCode``). The HTTP service's own refusals (its limits, routes
and access rules), which Kafka has no code for, are a vocabulary of their own:
:class:`purgatory.service.refusals.ServiceRefusal`."""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["ErrorCode"]


class ErrorCode(enum.StrEnum):
    """An error a request can end in, as Kafka's ``Errors`` has it: the value is Kafka's
    name for it (what the HTTP service's JSON answers carry), ``number`` its code on the
    Kafka wire (a test holds both to Kafka's own table, as kio generates it)."""

    number: int

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last: list[Any]) -> str:
        return name  # auto(): the value is the member's own name

    def __new__(cls, name: str, number: int) -> ErrorCode:
        member = str.__new__(cls, name)
        member._value_ = name
        member.number = number
        return member

    UNKNOWN_SERVER_ERROR = enum.auto(), -1
    NONE = enum.auto(), 0
    OFFSET_OUT_OF_RANGE = enum.auto(), 1
    CORRUPT_MESSAGE = enum.auto(), 2
    UNKNOWN_TOPIC_OR_PARTITION = enum.auto(), 3
    LEADER_NOT_AVAILABLE = enum.auto(), 5
    NOT_LEADER_OR_FOLLOWER = enum.auto(), 6
    REQUEST_TIMED_OUT = enum.auto(), 7
    BROKER_NOT_AVAILABLE = enum.auto(), 8
    REPLICA_NOT_AVAILABLE = enum.auto(), 9
    MESSAGE_TOO_LARGE = enum.auto(), 10
    COORDINATOR_LOAD_IN_PROGRESS = enum.auto(), 14
    COORDINATOR_NOT_AVAILABLE = enum.auto(), 15
    NOT_COORDINATOR = enum.auto(), 16
    INVALID_TOPIC_EXCEPTION = enum.auto(), 17
    NOT_ENOUGH_REPLICAS = enum.auto(), 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = enum.auto(), 20
    INVALID_REQUIRED_ACKS = enum.auto(), 21
    ILLEGAL_GENERATION = enum.auto(), 22
    INCONSISTENT_GROUP_PROTOCOL = enum.auto(), 23
    INVALID_GROUP_ID = enum.auto(), 24
    UNKNOWN_MEMBER_ID = enum.auto(), 25
    INVALID_SESSION_TIMEOUT = enum.auto(), 26
    REBALANCE_IN_PROGRESS = enum.auto(), 27
    TOPIC_AUTHORIZATION_FAILED = enum.auto(), 29
    GROUP_AUTHORIZATION_FAILED = enum.auto(), 30
    CLUSTER_AUTHORIZATION_FAILED = enum.auto(), 31
    INVALID_TIMESTAMP = enum.auto(), 32
    UNSUPPORTED_SASL_MECHANISM = enum.auto(), 33
    ILLEGAL_SASL_STATE = enum.auto(), 34
    UNSUPPORTED_VERSION = enum.auto(), 35
    TOPIC_ALREADY_EXISTS = enum.auto(), 36
    INVALID_PARTITIONS = enum.auto(), 37
    INVALID_REPLICATION_FACTOR = enum.auto(), 38
    INVALID_REPLICA_ASSIGNMENT = enum.auto(), 39
    INVALID_CONFIG = enum.auto(), 40
    INVALID_REQUEST = enum.auto(), 42
    OUT_OF_ORDER_SEQUENCE_NUMBER = enum.auto(), 45
    INVALID_PRODUCER_EPOCH = enum.auto(), 47
    INVALID_TXN_STATE = enum.auto(), 48
    INVALID_PRODUCER_ID_MAPPING = enum.auto(), 49
    INVALID_TRANSACTION_TIMEOUT = enum.auto(), 50
    CONCURRENT_TRANSACTIONS = enum.auto(), 51
    TRANSACTION_COORDINATOR_FENCED = enum.auto(), 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = enum.auto(), 53
    SECURITY_DISABLED = enum.auto(), 54
    OPERATION_NOT_ATTEMPTED = enum.auto(), 55
    KAFKA_STORAGE_ERROR = enum.auto(), 56
    LOG_DIR_NOT_FOUND = enum.auto(), 57
    SASL_AUTHENTICATION_FAILED = enum.auto(), 58
    NON_EMPTY_GROUP = enum.auto(), 68
    GROUP_ID_NOT_FOUND = enum.auto(), 69
    FETCH_SESSION_ID_NOT_FOUND = enum.auto(), 70
    FENCED_LEADER_EPOCH = enum.auto(), 74
    UNKNOWN_LEADER_EPOCH = enum.auto(), 75
    UNSUPPORTED_COMPRESSION_TYPE = enum.auto(), 76
    MEMBER_ID_REQUIRED = enum.auto(), 79
    PREFERRED_LEADER_NOT_AVAILABLE = enum.auto(), 80
    GROUP_MAX_SIZE_REACHED = enum.auto(), 81
    FENCED_INSTANCE_ID = enum.auto(), 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = enum.auto(), 83
    ELECTION_NOT_NEEDED = enum.auto(), 84
    NO_REASSIGNMENT_IN_PROGRESS = enum.auto(), 85
    GROUP_SUBSCRIBED_TO_TOPIC = enum.auto(), 86
    INVALID_RECORD = enum.auto(), 87
    UNSTABLE_OFFSET_COMMIT = enum.auto(), 88
    THROTTLING_QUOTA_EXCEEDED = enum.auto(), 89
    PRODUCER_FENCED = enum.auto(), 90
    RESOURCE_NOT_FOUND = enum.auto(), 91
    DUPLICATE_RESOURCE = enum.auto(), 92
    UNACCEPTABLE_CREDENTIAL = enum.auto(), 93
    INVALID_UPDATE_VERSION = enum.auto(), 95
    UNKNOWN_TOPIC_ID = enum.auto(), 100
    TRANSACTIONAL_ID_NOT_FOUND = enum.auto(), 105
    FENCED_MEMBER_EPOCH = enum.auto(), 110
    UNSUPPORTED_ASSIGNOR = enum.auto(), 112
    STALE_MEMBER_EPOCH = enum.auto(), 113
    MISMATCHED_ENDPOINT_TYPE = enum.auto(), 114
    UNSUPPORTED_ENDPOINT_TYPE = enum.auto(), 115
    UNKNOWN_SUBSCRIPTION_ID = enum.auto(), 117
    TELEMETRY_TOO_LARGE = enum.auto(), 118
    TRANSACTION_ABORTABLE = enum.auto(), 120
    INVALID_RECORD_STATE = enum.auto(), 121
    SHARE_SESSION_NOT_FOUND = enum.auto(), 122
    INVALID_SHARE_SESSION_EPOCH = enum.auto(), 123
    FENCED_STATE_EPOCH = enum.auto(), 124
    INVALID_REGULAR_EXPRESSION = enum.auto(), 128
    SHARE_SESSION_LIMIT_REACHED = enum.auto(), 133
