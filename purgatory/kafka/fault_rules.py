"""The fault rules a test adds to :class:`~purgatory.kafka.faults.Faults`: a per-request
:class:`Rule`, a :class:`PartitionRule`, the :class:`Hit` each records, and how their
arguments (an API, an error, a count) are read."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, Self, final

from purgatory.errors import ErrorCode
from purgatory.kafka.fault_partitions import PARTITION_APIS, Partitions
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import kio_error


class RuleHolder(Protocol):
    """What holds a rule (:class:`~purgatory.kafka.faults.Faults`)."""

    def remove(self, rule: Rule | PartitionRule) -> None: ...

    def holds(self, rule: object) -> bool: ...


class Hit(NamedTuple):
    """One request a rule acted on."""

    rule: Rule | PartitionRule
    broker: int
    api: ApiKey
    version: int
    correlation_id: int
    client_id: str | None


@dataclass(eq=False, kw_only=True)
class _Placed:
    """What a per-request rule and a partition rule share: where they act (``broker``,
    ``topic``, ``partition``: None, anywhere), how often, and the :class:`Faults` that
    holds them."""

    broker: int | None = None
    topic: str | None = None
    partition: int | None = None
    #: hits left before the rule removes itself (None: until removed)
    times: int | None = 1
    #: requests this rule acted on so far (one hit per request)
    hits: int = 0
    #: its number, unique in its :class:`Faults` (what ``DELETE /v1/faults/{id}`` names)
    id: int = 0
    _faults: RuleHolder | None = field(default=None, repr=False)

    def remove(self) -> None:
        """Stop acting (a no-op if the rule is already gone)."""
        if self._faults is not None:
            assert isinstance(self, Rule | PartitionRule)
            self._faults.remove(self)

    @property
    def active(self) -> bool:
        return self._faults is not None and self._faults.holds(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()


@final
@dataclass(eq=False)
class Rule(_Placed):
    """One fault rule (see the module docstring); :meth:`Faults.add` makes them."""

    api: ApiKey
    #: the Kafka error code answered (an :class:`ErrorCode`'s number, or any other code)
    error: int | None = None
    drop: bool = False
    disconnect: bool = False
    delay_ms: float = 0.0
    after: bool = False
    versions: tuple[int, int] | None = None
    client_id: str | None = None

    def describe(self) -> str:
        does = [
            f"error {error_name(self.error)}" if self.error is not None else "",
            "drop" if self.drop else "",
            "disconnect" if self.disconnect else "",
            f"delay {self.delay_ms:g} ms" if self.delay_ms else "",
        ]
        action = " + ".join(d for d in does if d)
        return f"{self.api.name} {action}{' after applying' if self.after else ''}"

    def _matches(self, broker: int, header: RequestHeader, partitions: Partitions | None) -> bool:
        if self.broker is not None and broker != self.broker:
            return False
        if self.versions is not None and not (
            self.versions[0] <= header.api_version <= self.versions[1]
        ):
            return False
        if self.client_id is not None and header.client_id != self.client_id:
            return False
        if self.topic is None and self.partition is None:
            return True
        return partitions is not None and any(
            (self.topic is None or topic == self.topic)
            and (self.partition is None or self.partition in indexes)
            for topic, indexes in partitions
        )


@final
@dataclass(eq=False)
class PartitionRule(_Placed):
    """One partition fault (see :meth:`Faults.add_partition_fault`): in requests of
    ``apis`` to ``broker`` (None: any), the partitions of ``topic`` numbered ``partition``
    (None: any) are answered ``error``; the rest of each request is served."""

    #: the Kafka error code answered (an :class:`ErrorCode`'s number, or any other code)
    error: int
    #: the APIs it acts on
    apis: frozenset[ApiKey]

    @property
    def error_name(self) -> str:
        """Kafka's name of the error answered (``NOT_LEADER_OR_FOLLOWER``)."""
        return error_name(self.error)

    def describe(self) -> str:
        apis = "/".join(sorted(k.name for k in self.apis)) if self.apis != PARTITION_APIS else "*"
        where = f"{'*' if self.topic is None else self.topic}-"
        where += "*" if self.partition is None else str(self.partition)
        on = "" if self.broker is None else f" on broker {self.broker}"
        return f"{apis} {where}{on}: error {error_name(self.error)}"

    def _names(self, topic: str | None, index: int) -> bool:
        return (
            topic is not None
            and (self.topic is None or topic == self.topic)
            and (self.partition is None or index == self.partition)
        )


def check_times(times: int | None) -> None:
    if times is not None and (isinstance(times, bool) or not isinstance(times, int)):
        raise TypeError(f"times must be an int or None, got {times!r}")
    if times is not None and times < 1:
        raise ValueError(f"times must be >= 1 or None, got {times}")


def error_number(error: ErrorCode | int | str) -> int:
    """An error's number: an :class:`ErrorCode`, a number Kafka has, or Kafka's name of
    one (``"NOT_LEADER_OR_FOLLOWER"``, any case)."""
    if isinstance(error, ErrorCode):
        return error.number
    if isinstance(error, str) and not isinstance(error, enum.Enum):
        try:
            return int(type(kio_error(0))[error.strip().lower()].value)
        except KeyError:
            raise ValueError(f"{error!r} is not the name of a Kafka error code") from None
    if isinstance(error, bool) or not isinstance(error, int):
        raise ValueError(f"error must be an ErrorCode, a Kafka error number or name, got {error!r}")
    try:
        kio_error(error)
    except ValueError:
        raise ValueError(f"{error} is not a Kafka error code") from None
    return error


def error_name(code: int) -> str:
    return kio_error(code).name.upper()


def api_key(api: ApiKey | str | int) -> ApiKey:
    if isinstance(api, ApiKey):
        return api
    if isinstance(api, int) and not isinstance(api, bool):
        try:
            return ApiKey(api)
        except ValueError:
            pass
    elif isinstance(api, str):
        name = "".join(c for c in api.upper() if c.isalnum())
        for key in ApiKey:
            if key.name.replace("_", "") == name:
                return key
    known = ", ".join(k.name for k in ApiKey)
    raise ValueError(f"unknown Kafka API {api!r}; known: {known}")
