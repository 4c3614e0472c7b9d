"""SaslHandshake (17, v0-1) and SaslAuthenticate (36, v0-2) where no authentication is
under way, and the SCRAM credential APIs: DescribeUserScramCredentials (50, v0) and
AlterUserScramCredentials (51, v0).

A SASL listener answers the handshake and the tokens itself, before a connection is
served (:class:`~purgatory.kafka.server.KafkaProtocolServer` with
:mod:`purgatory.kafka.sasl`); the handlers here answer them on a plaintext listener, or on
a connection already authenticated that may not re-authenticate, as KafkaApis does:
ILLEGAL_SASL_STATE.

The credential APIs alter and describe the SCRAM credentials every SASL listener checks,
answered as Kafka's controller answers them (``ScramControlManager``, ``ScramImage``):
per user, with Kafka's errors and messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.handlers.units import SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.sasl import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_TYPES,
    Credentials,
    credential_of,
)
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        AlterUserScramCredentialsResult,
        AlterUserScramCredentialsScramCredentialDeletion,
        AlterUserScramCredentialsScramCredentialUpsertion,
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
        DescribeUserScramCredentialsResult,
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )

_TWICE: Final = "A user credential cannot be altered twice in the same request"


@final
class SaslHandlers:
    """The SASL APIs outside an authentication, and the SCRAM credentials of
    ``credentials``."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials

    def apis(self) -> ApiTable:
        return {
            ApiKey.SASL_HANDSHAKE: Api(*versions(ApiKey.SASL_HANDSHAKE), self.handshake),
            ApiKey.SASL_AUTHENTICATE: Api(*versions(ApiKey.SASL_AUTHENTICATE), self.authenticate),
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Api(
                *versions(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS), self.describe_credentials
            ),
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Api(
                *versions(ApiKey.ALTER_USER_SCRAM_CREDENTIALS), self.alter_credentials
            ),
        }

    def handshake(
        self, header: RequestHeader, request: SaslHandshakeRequest
    ) -> SaslHandshakeResponse:
        return respond(request, error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=())

    def authenticate(
        self, header: RequestHeader, request: SaslAuthenticateRequest
    ) -> SaslAuthenticateResponse:
        return respond(
            request,
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
        )

    def describe_credentials(
        self, header: RequestHeader, request: DescribeUserScramCredentialsRequest
    ) -> DescribeUserScramCredentialsResponse:
        asked = [user.name for user in request.users or ()]
        # every user with a credential when none is named; a name asked twice is an error
        names = dict.fromkeys(asked or self.credentials.scram_users(), False)
        for name in asked:
            names[name] = asked.count(name) > 1
        results: list[DescribeUserScramCredentialsResult] = []
        for name, twice in names.items():
            infos = self.credentials.described(name)
            if twice:
                error, message = (
                    ErrorCode.DUPLICATE_RESOURCE,
                    "Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {name}",
                )
            elif not infos:
                error, message = (
                    ErrorCode.RESOURCE_NOT_FOUND,
                    f"Attempt to describe a user credential that does not exist: {name}",
                )
            else:
                error, message = ErrorCode.NONE, None
            results.append(
                {
                    "user": name,
                    "error_code": error,
                    "error_message": message,
                    "credential_infos": [
                        {"mechanism": mechanism, "iterations": iterations}
                        for mechanism, iterations in (infos if error is ErrorCode.NONE else ())
                    ],
                }
            )
        return respond(request, error_code=ErrorCode.NONE, results=results)

    def alter_credentials(
        self, header: RequestHeader, request: AlterUserScramCredentialsRequest
    ) -> AlterUserScramCredentialsResponse:
        errors: dict[str, tuple[ErrorCode, str]] = {}
        deletions: dict[str, AlterUserScramCredentialsScramCredentialDeletion] = {}
        upsertions: dict[str, AlterUserScramCredentialsScramCredentialUpsertion] = {}
        for deletion in request.deletions:
            name = deletion.name
            if name in errors:
                continue
            if deletions.pop(name, None) is not None:
                errors[name] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
                continue
            refused = _refused(name, deletion.mechanism)
            if refused is None and (
                self.credentials.scram(SCRAM_TYPES[deletion.mechanism], name) is None
            ):
                refused = (
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
            if refused is None:
                deletions[name] = deletion
            else:
                errors[name] = refused
        for upsertion in request.upsertions:
            name = upsertion.name
            if name in errors:
                continue
            if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
                errors[name] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
                continue
            refused = _refused(name, upsertion.mechanism)
            if refused is None and upsertion.iterations < MIN_ITERATIONS:
                refused = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif refused is None and upsertion.iterations > MAX_ITERATIONS:
                refused = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            if refused is None:
                upsertions[name] = upsertion
            else:
                errors[name] = refused
        # all or nothing, as the controller applies one batch of records
        for name, deletion in deletions.items():
            self.credentials.delete(name, SCRAM_TYPES[deletion.mechanism])
        for name, upsertion in upsertions.items():
            mechanism = SCRAM_TYPES[upsertion.mechanism]
            self.credentials.upsert(
                name,
                mechanism,
                credential_of(
                    mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations
                ),
            )
        results: list[AlterUserScramCredentialsResult] = [
            {"user": name, "error_code": ErrorCode.NONE, "error_message": None}
            for name in (*deletions, *upsertions)
        ]
        results += [
            {"user": name, "error_code": error, "error_message": message}
            for name, (error, message) in errors.items()
        ]
        return respond(request, results=results)


def _refused(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    """Kafka's ``validateScramUsernameAndMechanism``."""
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in SCRAM_TYPES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


UNIT: Final = SharedUnit(lambda s: SaslHandlers(s.credentials))
