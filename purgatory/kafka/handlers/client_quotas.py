"""DescribeClientQuotas (API key 48, versions 0-1) and AlterClientQuotas (49, versions
0-1): client quotas (KIP-546) stored and reported as Kafka's controller keeps them. Each
change is handed at once to ``on_change`` with the whole store: the front door's
:class:`~purgatory.kafka.quotas.ClientQuotas` enforce them (:mod:`purgatory.kafka.throttling`).

Alter validates each entity as Kafka's ``ClientQuotaControlManager`` does, with its
codes and messages (all INVALID_REQUEST): entity types ``user``, ``client-id`` (keys
``producer_byte_rate``, ``consumer_byte_rate``: whole numbers; ``request_percentage``,
``controller_mutation_rate``) and ``ip`` (key ``connection_creation_rate``: a whole
number), ``ip`` not combined with the others; a null name is the type's default entity,
an empty one refused; a value must be above 0; a key given twice, or an entity given
twice, is refused. An ``ip`` entity must be an IP address: host names are not resolved
here (Kafka resolves them). ``validate_only`` checks and stores nothing. Each distinct
entity is answered once, in request order. Describe filters as Kafka's
``ClientQuotasImage`` does: per entity type an exact name (0), the default entity (1) or
any name (2), ``strict`` for entities with no other types; a bad filter answers the whole
request with INVALID_REQUEST (UNSUPPORTED_VERSION for an unknown entity type) and its
message, and no entries.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.handlers.units import SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable
from purgatory.sim.errors import SimulationError

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
        AlterClientQuotasResponseEntries,
        DescribeClientQuotasComponentData,
        DescribeClientQuotasEntryData,
        DescribeClientQuotasRequest,
        DescribeClientQuotasResponse,
    )

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
#: the quota keys of user and client-id entities: True where the value is a whole number
#: (Kafka's LONG configs), False for a DOUBLE
_USER_AND_CLIENT_KEYS: Final = {
    "producer_byte_rate": True,
    "consumer_byte_rate": True,
    "request_percentage": False,
    "controller_mutation_rate": False,
}
_IP_KEYS: Final = {"connection_creation_rate": True}
#: the largest whole value each key takes (Kafka's LONG and INT)
_LIMITS: Final = {"connection_creation_rate": (2**31 - 1, "an INT")}
_LONG: Final = (2**63 - 1, "a LONG")
_MATCH_EXACT: Final = 0
_MATCH_DEFAULT: Final = 1
_MATCH_SPECIFIED: Final = 2

#: an entity: its (type, name) pairs in request order (a null name: the default entity)
Entity = tuple[tuple[str, str | None], ...]


def _refuse(message: str) -> SimulationError:
    return SimulationError(ErrorCode.INVALID_REQUEST, message)


def _describe_entity(entity: Entity) -> str:
    """As Kafka's ``ClientQuotaEntity.toString`` prints it."""
    inner = ", ".join(f"{kind}={name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


@final
class ClientQuotaHandlers:
    """DescribeClientQuotas and AlterClientQuotas over one quota store for the cluster."""

    def __init__(
        self,
        on_change: Callable[[Mapping[frozenset[tuple[str, str | None]], dict[str, float]]], None]
        | None = None,
    ) -> None:
        self._on_change = on_change
        #: entity (its pairs sorted by type) -> quota key -> value
        self.quotas: dict[frozenset[tuple[str, str | None]], dict[str, float]] = {}
        self._entities: dict[frozenset[tuple[str, str | None]], Entity] = {}

    def apis(self) -> ApiTable:
        return {
            ApiKey.DESCRIBE_CLIENT_QUOTAS: Api(
                *versions(ApiKey.DESCRIBE_CLIENT_QUOTAS), self.describe_client_quotas
            ),
            ApiKey.ALTER_CLIENT_QUOTAS: Api(
                *versions(ApiKey.ALTER_CLIENT_QUOTAS), self.alter_client_quotas
            ),
        }

    # -- describe -------------------------------------------------------------------------

    def describe_client_quotas(
        self, header: RequestHeader, request: DescribeClientQuotasRequest
    ) -> DescribeClientQuotasResponse:
        try:
            exact, specified = self._filter(request.components)
        except SimulationError as refused:
            return respond(
                request, error_code=refused.code, error_message=refused.message, entries=None
            )
        entries: list[DescribeClientQuotasEntryData] = []
        for key, values in self.quotas.items():
            entity = dict(key)
            if request.strict and len(entity) != len(exact) + len(specified):
                continue
            if any(kind not in entity or entity[kind] != name for kind, name in exact.items()):
                continue
            if any(kind not in entity for kind in specified):
                continue
            entries.append(
                {
                    "entity": [
                        {"entity_type": kind, "entity_name": name}
                        for kind, name in self._entities[key]
                    ],
                    "values": [{"key": k, "value": v} for k, v in values.items()],
                }
            )
        return respond(request, error_code=ErrorCode.NONE, error_message=None, entries=entries)

    @staticmethod
    def _filter(
        components: Iterable[DescribeClientQuotasComponentData],
    ) -> tuple[dict[str, str | None], set[str]]:
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for component in components:
            kind = component.entity_type
            if not kind:
                raise _refuse("Invalid empty entity type.")
            if kind in exact or kind in specified:
                raise _refuse(f"Entity type {kind} cannot appear more than once in the filter.")
            if kind not in (IP, USER, CLIENT_ID):
                raise SimulationError(
                    ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}"
                )
            match = component.match
            if component.match_type == _MATCH_EXACT:
                if match is None:
                    raise _refuse(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null."
                    )
                exact[kind] = match
            elif component.match_type == _MATCH_DEFAULT:
                if match is not None:
                    raise _refuse(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                    )
                exact[kind] = None
            elif component.match_type == _MATCH_SPECIFIED:
                if match is not None:
                    raise _refuse(
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                    )
                specified.add(kind)
            else:
                raise _refuse(f"Unknown match type {component.match_type}")
        kinds = exact.keys() | specified
        if IP in kinds and (USER in kinds or CLIENT_ID in kinds):
            raise _refuse(
                "Invalid entity filter component combination. IP filter component should not "
                "be used with user or clientId filter component."
            )
        return exact, specified

    # -- alter ----------------------------------------------------------------------------

    def alter_client_quotas(
        self, header: RequestHeader, request: AlterClientQuotasRequest
    ) -> AlterClientQuotasResponse:
        results: dict[frozenset[tuple[str, str | None]], tuple[Entity, ErrorCode, str | None]] = {}
        changed = False
        for entry in request.entries:
            # later components of a type replace earlier ones, as Kafka's map does
            named = {e.entity_type: e.entity_name for e in entry.entity}
            entity: Entity = tuple(named.items())
            key = frozenset(entity)
            ops: dict[str, float | None] = {}
            duplicate = None
            for op in entry.ops:
                if op.key in ops:
                    duplicate = op.key
                ops[op.key] = None if op.remove else op.value
            if key in results or duplicate is not None:
                # Kafka answers a key given twice, and an entity given twice, this way
                message = f"Ignoring duplicate entity {_describe_entity(entity)}"
                results[key] = (results.get(key, (entity,))[0], ErrorCode.INVALID_REQUEST, message)
                continue
            try:
                changes = self._check(entity, ops)
            except SimulationError as refused:
                results[key] = (entity, refused.code, refused.message)
                continue
            results[key] = (entity, ErrorCode.NONE, None)
            if not request.validate_only:
                self._apply(key, entity, changes)
                changed = True
        if changed and self._on_change is not None:
            self._on_change(self.quotas)
        entries: list[AlterClientQuotasResponseEntries] = [
            {
                "error_code": error,
                "error_message": message,
                "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
            }
            for entity, error, message in results.values()
        ]
        return respond(request, entries=entries)

    @staticmethod
    def _check(entity: Entity, ops: dict[str, float | None]) -> dict[str, float | None]:
        if not entity:
            raise _refuse("Invalid empty client quota entity")
        for kind, name in entity:
            if kind not in (USER, CLIENT_ID, IP):
                raise _refuse(f"Unhandled client quota entity type: {kind}")
            if name is not None and not name:
                raise _refuse(f"Empty {kind} not supported")
        kinds = dict(entity)
        if IP in kinds:
            if USER in kinds or CLIENT_ID in kinds:
                raise _refuse(  # Kafka's words, its missing space included
                    "Invalid quota entity combination, IP entity shouldnot be combined with "
                    "User or ClientId"
                )
            ip = kinds[IP]
            if ip is not None:
                try:
                    ipaddress.ip_address(ip)
                except ValueError:
                    raise _refuse(f"{ip} is not a valid IP or resolvable host.") from None
            keys = _IP_KEYS
        else:
            keys = _USER_AND_CLIENT_KEYS
        for key, value in ops.items():
            if value is None:
                continue
            whole = keys.get(key)
            if whole is None:
                raise _refuse(f"Invalid configuration key {key}")
            if value <= 0.0:
                raise _refuse(f"Quota {key} must be greater than 0")
            if whole:
                limit, kind_name = _LIMITS.get(key, _LONG)
                if value > limit:
                    raise _refuse(f"Proposed value for {key} is too large for {kind_name}.")
                if abs(value % 1.0) > 1e-6:
                    raise _refuse(f"{key} cannot be a fractional value.")
        return ops

    def _apply(
        self,
        key: frozenset[tuple[str, str | None]],
        entity: Entity,
        changes: dict[str, float | None],
    ) -> None:
        values = self.quotas.get(key, {})
        for name, value in changes.items():
            if value is None:
                values.pop(name, None)
            else:
                values[name] = value
        if values:
            self.quotas[key] = values
            self._entities.setdefault(key, entity)
        else:
            self.quotas.pop(key, None)
            self._entities.pop(key, None)


# one for every broker: the cluster has one quota store
UNIT: Final = SharedUnit(lambda s: ClientQuotaHandlers(s.quotas_changed))
