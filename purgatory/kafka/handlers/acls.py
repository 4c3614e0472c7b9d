"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), versions 1-3: the ACLs the
authorizer enforces (:mod:`purgatory.kafka.acls`), answered as Kafka's ``AclApis`` and
``AclControlManager`` answer them. With no authorizer configured (``authorizer.class.name``
unset) every one is answered SECURITY_DISABLED, as Kafka does. Who may call them (ALTER or
DESCRIBE on the cluster) is :mod:`purgatory.kafka.authorization`'s business.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, final, overload

from purgatory.errors import ErrorCode
from purgatory.kafka.acls import Acl, Acls, acl_of, filter_of
from purgatory.kafka.handlers.units import SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import error_response, respond, versions
from purgatory.kafka.server import Api, ApiTable

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        CreateAclsAclCreationResult,
        CreateAclsRequest,
        CreateAclsResponse,
        DeleteAclsFilterResult,
        DeleteAclsMatchingAcl,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DescribeAclsAclDescription,
        DescribeAclsRequest,
        DescribeAclsResponse,
    )

_NO_AUTHORIZER: Final = "No Authorizer is configured."


@final
class AclHandlers:
    """The ACL APIs over ``acls``; ``enabled``: an authorizer is configured."""

    def __init__(self, acls: Acls, enabled: bool) -> None:
        self.acls = acls
        self.enabled = enabled

    def apis(self) -> ApiTable:
        return {
            ApiKey.DESCRIBE_ACLS: Api(*versions(ApiKey.DESCRIBE_ACLS), self.describe_acls),
            ApiKey.CREATE_ACLS: Api(*versions(ApiKey.CREATE_ACLS), self.create_acls),
            ApiKey.DELETE_ACLS: Api(*versions(ApiKey.DELETE_ACLS), self.delete_acls),
        }

    def describe_acls(
        self, header: RequestHeader, request: DescribeAclsRequest
    ) -> DescribeAclsResponse:
        if not self.enabled:
            return respond(
                request,
                error_code=ErrorCode.SECURITY_DISABLED,
                error_message="No Authorizer is configured on the broker",
            )
        selector = filter_of(request)
        unknown = selector.unknown
        if unknown is not None:
            return respond(request, error_code=ErrorCode.INVALID_REQUEST, error_message=unknown)
        # grouped by resource pattern, as Kafka's DescribeAclsResponse.aclsResources does
        resources: dict[tuple[int, str, int], list[DescribeAclsAclDescription]] = {}
        for acl in self.acls.matching(selector):
            pattern = (acl.resource_type, acl.resource_name, acl.pattern_type)
            resources.setdefault(pattern, []).append(
                {
                    "principal": acl.principal,
                    "host": acl.host,
                    "operation": acl.operation,
                    "permission_type": acl.permission,
                }
            )
        return respond(
            request,
            error_code=ErrorCode.NONE,
            resources=[
                {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                for (t, n, p), acls in resources.items()
            ],
        )

    def create_acls(self, header: RequestHeader, request: CreateAclsRequest) -> CreateAclsResponse:
        if not self.enabled:
            return _no_authorizer(request)
        results: list[CreateAclsAclCreationResult] = []
        for creation in request.creations:
            acl = acl_of(creation)
            invalid = acl.invalid()
            if invalid is None:
                self.acls.add(acl)  # an ACL that exists already: nothing to do
                results.append({"error_code": ErrorCode.NONE, "error_message": None})
            else:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": invalid})
        return respond(request, results=results)

    def delete_acls(self, header: RequestHeader, request: DeleteAclsRequest) -> DeleteAclsResponse:
        if not self.enabled:
            return _no_authorizer(request)
        results: list[DeleteAclsFilterResult] = []
        for entry in request.filters:
            selector = filter_of(entry)
            unknown = selector.unknown
            if unknown is not None:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": unknown})
                continue
            results.append(
                {
                    "error_code": ErrorCode.NONE,
                    "error_message": None,
                    "matching_acls": [_matching(acl) for acl in self.acls.remove(selector)],
                }
            )
        return respond(request, filter_results=results)


def _matching(acl: Acl) -> DeleteAclsMatchingAcl:
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "resource_type": acl.resource_type,
        "resource_name": acl.resource_name,
        "pattern_type": acl.pattern_type,
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation,
        "permission_type": acl.permission,
    }


@overload
def _no_authorizer(request: CreateAclsRequest) -> CreateAclsResponse: ...


@overload
def _no_authorizer(request: DeleteAclsRequest) -> DeleteAclsResponse: ...


def _no_authorizer(request: CreateAclsRequest | DeleteAclsRequest) -> Any:
    """SECURITY_DISABLED in every result, with Kafka's message."""
    # kio's results of both APIs, edited alike by name: Any
    refused: Any = error_response(request, ErrorCode.SECURITY_DISABLED)
    field = "results" if int(request.__api_key__) == ApiKey.CREATE_ACLS else "filter_results"
    results = [replace(r, error_message=_NO_AUTHORIZER) for r in getattr(refused, field)]
    return replace(refused, **{field: tuple(results)})


UNIT: Final = SharedUnit(lambda s: AclHandlers(s.acls, s.authorizing))
