"""DescribeClientQuotas and AlterClientQuotas over the Kafka protocol: quotas stored and
reported with Kafka's validation and filters, at every version and over a socket with kio
(none of the Python admin clients has these calls); tests/kafka_wire/test_quotas.py
watches them throttle."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode as KioError
from kio_wire import read_response, round_trip

from purgatory.kafka.front_door import KafkaFrontDoor
from purgatory.kafka.handlers.client_quotas import ClientQuotaHandlers
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import build, request_type, versions

D_LOW, D_HIGH = versions(ApiKey.DESCRIBE_CLIENT_QUOTAS)
A_LOW, A_HIGH = versions(ApiKey.ALTER_CLIENT_QUOTAS)

Ops = list[tuple[str, float, bool]]


def _alter(
    version: int, entries: list[tuple[list[tuple[str, str | None]], Ops]], validate: bool = False
) -> Any:
    return build(
        request_type(ApiKey.ALTER_CLIENT_QUOTAS, version),
        {
            "entries": [
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "ops": [{"key": k, "value": v, "remove": r} for k, v, r in ops],
                }
                for entity, ops in entries
            ],
            "validate_only": validate,
        },
    )


def _describe(
    version: int, components: list[tuple[str, int, str | None]], strict: bool = False
) -> Any:
    return build(
        request_type(ApiKey.DESCRIBE_CLIENT_QUOTAS, version),
        {
            "components": [
                {"entity_type": t, "match_type": m, "match": s} for t, m, s in components
            ],
            "strict": strict,
        },
    )


def _entries(answer: Any) -> list[tuple[tuple[tuple[str, str | None], ...], dict[str, float]]]:
    return [
        (
            tuple((e.entity_type, e.entity_name) for e in entry.entity),
            {v.key: v.value for v in entry.values},
        )
        for entry in answer.entries
    ]


def _results(answer: Any) -> list[tuple[int, str | None]]:
    return [(e.error_code, e.error_message) for e in answer.entries]


@pytest.mark.parametrize("version", range(A_LOW, A_HIGH + 1))
def test_quotas_are_stored_and_described_with_kafkas_filters(version: int) -> None:
    handlers = ClientQuotaHandlers()
    alter = handlers.alter_client_quotas
    describe = handlers.describe_client_quotas
    a_header = RequestHeader(ApiKey.ALTER_CLIENT_QUOTAS, version, 1, "c")
    d_header = RequestHeader(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, 1, "c")
    empty = describe(d_header, _describe(version, []))
    assert (empty.error_code, empty.error_message, empty.entries) == (KioError.none, None, ())

    answer = alter(
        a_header,
        _alter(
            version,
            [
                ([("user", "alice")], [("producer_byte_rate", 1024.0, False)]),
                ([("user", "alice"), ("client-id", "app")], [("request_percentage", 12.5, False)]),
                ([("user", None)], [("consumer_byte_rate", 2048.0, False)]),
                ([("ip", "10.0.0.1")], [("connection_creation_rate", 5.0, False)]),
            ],
        ),
    )
    assert _results(answer) == [(KioError.none, None)] * 4
    everything = describe(d_header, _describe(version, []))
    assert len(everything.entries) == 4
    assert _entries(describe(d_header, _describe(version, [("user", 0, "alice")]))) == [
        ((("user", "alice"),), {"producer_byte_rate": 1024.0}),
        ((("user", "alice"), ("client-id", "app")), {"request_percentage": 12.5}),
    ]
    strict = describe(d_header, _describe(version, [("user", 0, "alice")], strict=True))
    assert _entries(strict) == [((("user", "alice"),), {"producer_byte_rate": 1024.0})]
    assert _entries(describe(d_header, _describe(version, [("user", 1, None)]))) == [
        ((("user", None),), {"consumer_byte_rate": 2048.0})
    ]
    assert [
        e[0] for e in _entries(describe(d_header, _describe(version, [("client-id", 2, None)])))
    ] == [(("user", "alice"), ("client-id", "app"))]
    # a removal, and validate_only changing nothing
    alter(a_header, _alter(version, [([("user", "alice")], [("producer_byte_rate", 0.0, True)])]))
    checked = alter(
        a_header, _alter(version, [([("user", "bob")], [("producer_byte_rate", 1.0, False)])], True)
    )
    assert _results(checked) == [(KioError.none, None)]
    assert [
        e[0] for e in _entries(describe(d_header, _describe(version, [("user", 2, None)])))
    ] == [
        (("user", "alice"), ("client-id", "app")),
        (("user", None),),
    ]


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ([], [("producer_byte_rate", 1.0, False)], "Invalid empty client quota entity"),
        ([("group", "g")], [], "Unhandled client quota entity type: group"),
        ([("user", "")], [], "Empty user not supported"),
        (
            [("ip", "10.0.0.1"), ("user", "u")],
            [],
            "Invalid quota entity combination, IP entity shouldnot be combined with User or "
            "ClientId",
        ),
        ([("ip", "no.such.host")], [], "no.such.host is not a valid IP or resolvable host."),
        (
            [("user", "u")],
            [("connection_creation_rate", 1.0, False)],
            "Invalid configuration key connection_creation_rate",
        ),
        (
            [("user", "u")],
            [("producer_byte_rate", 0.0, False)],
            "Quota producer_byte_rate must be greater than 0",
        ),
        (
            [("user", "u")],
            [("producer_byte_rate", 1.5, False)],
            "producer_byte_rate cannot be a fractional value.",
        ),
        (
            [("ip", "::1")],
            [("connection_creation_rate", 2.0**31, False)],
            "Proposed value for connection_creation_rate is too large for an INT.",
        ),
        (
            [("user", "u")],
            [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2.0, False)],
            "Ignoring duplicate entity ClientQuotaEntity(entries={user=u})",
        ),
    ],
)
def test_kafkas_refusals_of_an_alteration(
    entity: list[tuple[str, str | None]], ops: Ops, message: str
) -> None:
    handlers = ClientQuotaHandlers()
    header = RequestHeader(ApiKey.ALTER_CLIENT_QUOTAS, A_HIGH, 1, "c")
    answer = handlers.alter_client_quotas(header, _alter(A_HIGH, [(entity, ops)]))
    assert _results(answer) == [(KioError.invalid_request, message)]
    assert handlers.quotas == {}


def test_an_entity_given_twice_is_answered_once() -> None:
    handlers = ClientQuotaHandlers()
    header = RequestHeader(ApiKey.ALTER_CLIENT_QUOTAS, A_HIGH, 1, "c")
    twice = [([("user", "u")], [("producer_byte_rate", 1.0, False)])] * 2
    answer = handlers.alter_client_quotas(header, _alter(A_HIGH, twice))
    assert _results(answer) == [
        (KioError.invalid_request, "Ignoring duplicate entity ClientQuotaEntity(entries={user=u})")
    ]


@pytest.mark.parametrize(
    ("components", "error", "message"),
    [
        ([("", 0, "x")], KioError.invalid_request, "Invalid empty entity type."),
        (
            [("user", 2, None), ("user", 0, "a")],
            KioError.invalid_request,
            "Entity type user cannot appear more than once in the filter.",
        ),
        ([("group", 2, None)], KioError.unsupported_version, "Unsupported entity type group"),
        (
            [("user", 0, None)],
            KioError.invalid_request,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (
            [("user", 1, "a")],
            KioError.invalid_request,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        ([("user", 7, None)], KioError.invalid_request, "Unknown match type 7"),
        (
            [("ip", 2, None), ("client-id", 2, None)],
            KioError.invalid_request,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        ),
    ],
)
def test_kafkas_refusals_of_a_filter(
    components: list[tuple[str, int, str | None]], error: KioError, message: str
) -> None:
    header = RequestHeader(ApiKey.DESCRIBE_CLIENT_QUOTAS, D_HIGH, 1, "c")
    answer = ClientQuotaHandlers().describe_client_quotas(header, _describe(D_HIGH, components))
    assert (answer.error_code, answer.error_message, answer.entries) == (error, message, None)


@pytest.mark.asyncio
async def test_over_a_socket_with_kio_any_broker_sees_the_same_quotas(door: KafkaFrontDoor) -> None:
    request = _alter(A_HIGH, [([("client-id", "app")], [("consumer_byte_rate", 4096.0, False)])])
    frame = await round_trip(door.addresses[0], request)
    altered = read_response(frame, ApiKey.ALTER_CLIENT_QUOTAS, A_HIGH)
    assert altered.header_size + altered.body_size == len(frame)
    assert _results(altered.body) == [(KioError.none, None)]
    frame = await round_trip(door.addresses[2], _describe(D_HIGH, [("client-id", 0, "app")]))
    described = read_response(frame, ApiKey.DESCRIBE_CLIENT_QUOTAS, D_HIGH)
    assert described.header_size + described.body_size == len(frame)
    assert _entries(described.body) == [((("client-id", "app"),), {"consumer_byte_rate": 4096.0})]
