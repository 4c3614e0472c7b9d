"""ACLs and the authorizer that enforces them, as Kafka's StandardAuthorizer does.

An ACL (:class:`Acl`) allows or denies a principal (``User:NAME``, ``User:*`` for every
one) from a host (``*``: any) one operation on the resources a pattern names: a LITERAL
name (``*``: every resource of the type) or a PREFIXED one. :class:`Acls` holds them
(CreateAcls adds, DeleteAcls removes what a filter matches, DescribeAcls lists it).

:class:`Authorizer` decides (``authorizer.class.name`` set): a super user
(``super.users``) may do anything; otherwise a DENY ACL that matches wins, then an ALLOW
ACL that matches (READ, WRITE, DELETE or ALTER imply DESCRIBE, ALTER_CONFIGS implies
DESCRIBE_CONFIGS, ALL implies every operation; the implications hold for ALLOW only); a
resource no ACL names at all is allowed only with ``allow.everyone.if.no.acl.found``, one
that has ACLs for others is denied.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, TypeVar, final

WILDCARD: Final = "*"
#: the one name of the cluster resource
CLUSTER_NAME: Final = "kafka-cluster"


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` (its wire codes)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType``: how an ACL's resource name matches (LITERAL, PREFIXED), or
    how a filter matches ACLs (ANY: any pattern, name equal; MATCH: the ACLs that would
    apply to that resource name)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    """Kafka's ``AclOperation``."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(enum.IntEnum):
    """Kafka's ``AclPermissionType``."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_IMPLIES_DESCRIBE: Final = frozenset(
    {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS: Final = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})


E = TypeVar("E", bound=enum.IntEnum)


def _enum(kind: type[E], value: int) -> E:
    """A wire code as ``kind``; one Kafka does not know is UNKNOWN (as its ``fromCode``)."""
    try:
        return kind(value)
    except ValueError:
        return kind(0)


@final
@dataclass(frozen=True, slots=True)
class Acl:
    """One ACL (Kafka's ``AclBinding``)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def invalid(self) -> str | None:
        """Why CreateAcls refuses it (Kafka's ``AclControlManager.validateNewAcl`` and
        ``AclApis``), or None."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return f"Invalid resourceType {self.resource_type.name}"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid patternType {self.pattern_type.name}"
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            return f"Invalid operation {self.operation.name}"
        if self.permission not in (Permission.DENY, Permission.ALLOW):
            return f"Invalid permissionType {self.permission.name}"
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        if not self.resource_name:
            return "Resource name should not be empty"
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            return (
                "Could not parse principal from `"
                f"{self.principal}` (expected a string in format principalType:principalName)"
            )
        return None

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether the ACL's pattern names this resource."""
        if self.resource_type is not resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


@final
@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select (Kafka's ``AclBindingFilter``): None for a
    name, principal or host matches any; ANY for a type, pattern, operation or
    permission."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    @property
    def unknown(self) -> str | None:
        """Kafka's refusal of a filter with an unknown part, or None."""
        if self.resource_type is ResourceType.UNKNOWN or self.pattern_type is PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation is Operation.UNKNOWN or self.permission is Permission.UNKNOWN:
            return "Unknown entryFilter."
        return None

    def matches(self, acl: Acl) -> bool:
        if (
            self.resource_type is not ResourceType.ANY
            and self.resource_type is not acl.resource_type
        ):
            return False
        pattern = self.pattern_type
        if pattern not in (PatternType.ANY, PatternType.MATCH) and pattern is not acl.pattern_type:
            return False
        name = self.resource_name
        if name is not None:
            if pattern in (PatternType.ANY, acl.pattern_type):
                if name != acl.resource_name:
                    return False
            elif acl.pattern_type is PatternType.LITERAL:
                if acl.resource_name not in (name, WILDCARD):
                    return False
            elif not name.startswith(acl.resource_name):
                return False
        return (
            (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and self.operation in (Operation.ANY, acl.operation)
            and self.permission in (Permission.ANY, acl.permission)
        )


def acl_of(entry: Any) -> Acl:
    """A CreateAcls creation as an :class:`Acl` (kio's fields)."""
    return Acl(
        _enum(ResourceType, entry.resource_type),
        entry.resource_name,
        _enum(PatternType, getattr(entry, "resource_pattern_type", PatternType.LITERAL)),
        entry.principal,
        entry.host,
        _enum(Operation, entry.operation),
        _enum(Permission, entry.permission_type),
    )


def filter_of(entry: Any) -> AclFilter:
    """A DescribeAcls request or DeleteAcls filter as an :class:`AclFilter`."""
    return AclFilter(
        _enum(ResourceType, entry.resource_type_filter),
        entry.resource_name_filter,
        _enum(PatternType, getattr(entry, "pattern_type_filter", PatternType.LITERAL)),
        entry.principal_filter,
        entry.host_filter,
        _enum(Operation, entry.operation),
        _enum(Permission, entry.permission_type),
    )


@final
class Acls:
    """The cluster's ACLs, in the order created (an ACL created twice is kept once)."""

    def __init__(self, acls: Iterable[Acl] = ()) -> None:
        self._acls: dict[Acl, None] = dict.fromkeys(acls)

    def add(self, acl: Acl) -> None:
        self._acls[acl] = None

    def matching(self, selector: AclFilter) -> list[Acl]:
        return [acl for acl in self._acls if selector.matches(acl)]

    def remove(self, selector: AclFilter) -> list[Acl]:
        """Remove and return what ``selector`` matches."""
        gone = self.matching(selector)
        for acl in gone:
            del self._acls[acl]
        return gone

    def all(self) -> list[Acl]:
        return list(self._acls)

    def __len__(self) -> int:
        return len(self._acls)


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:ops``)."""
    return frozenset(part.strip() for part in text.split(";") if part.strip())


@final
class Authorizer:
    """Kafka's StandardAuthorizer over ``acls``."""

    def __init__(
        self, acls: Acls, super_users: Iterable[str] = (), allow_if_no_acl: bool = False
    ) -> None:
        self.acls = acls
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl

    def allowed(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        principals = (principal, "User:*")
        has_acls = allow = False
        for acl in self.acls.all():
            if not acl.applies_to(resource_type, name):
                continue
            has_acls = True
            if acl.principal not in principals or acl.host not in (WILDCARD, host):
                continue
            if acl.permission is Permission.DENY:
                if acl.operation in (Operation.ALL, operation):
                    return False
            elif _allows(acl.operation, operation):
                allow = True
        if allow:
            return True
        return self.allow_if_no_acl and not has_acls

    def allowed_any(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether ``principal`` may do ``operation`` on some resource of the type (Kafka's
        ``authorizeByResourceType``, which InitProducerId asks for WRITE on any topic): an
        ALLOW ACL for it that no DENY ACL on every such resource (``*``) undoes."""
        if principal in self.super_users:
            return True
        principals = (principal, "User:*")
        mine = [
            acl
            for acl in self.acls.all()
            if acl.resource_type is resource_type
            and acl.principal in principals
            and acl.host in (WILDCARD, host)
        ]
        if any(
            acl.permission is Permission.DENY
            and acl.operation in (Operation.ALL, operation)
            and acl.pattern_type is PatternType.LITERAL
            and acl.resource_name == WILDCARD
            for acl in mine
        ):
            return False
        if any(
            acl.permission is Permission.ALLOW and _allows(acl.operation, operation) for acl in mine
        ):
            return True
        return self.allow_if_no_acl and not any(
            acl.resource_type is resource_type for acl in self.acls.all()
        )


def _allows(granted: Operation, wanted: Operation) -> bool:
    """Whether an ALLOW ACL for ``granted`` allows ``wanted``."""
    if granted in (Operation.ALL, wanted):
        return True
    if wanted is Operation.DESCRIBE:
        return granted in _IMPLIES_DESCRIBE
    if wanted is Operation.DESCRIBE_CONFIGS:
        return granted in _IMPLIES_DESCRIBE_CONFIGS
    return False
