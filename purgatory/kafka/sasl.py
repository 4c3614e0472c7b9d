"""SASL authentication as a Kafka broker's SASL_PLAINTEXT listener performs it: the
mechanisms PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) and
OAUTHBEARER (RFC 7628, with Kafka's unsecured validator: :mod:`purgatory.kafka.oauthbearer`),
the credentials they check, and one connection's authentication state (:class:`SaslSession`).
``sasl.enabled.mechanisms`` says which a listener offers (:data:`MECHANISMS` unless set).

Users come from ``purgatory serve --kafka-user NAME:PASSWORD`` (``EmbeddedKafka(users=...)``):
each may log in with every mechanism, its SCRAM credentials derived at Kafka's default of
4096 iterations, as ``kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]'``
derives them. AlterUserScramCredentials adds or replaces SCRAM credentials (a salted
password the client derived) and deletes them; PLAIN checks the passwords given at start,
as Kafka's PLAIN checks its JAAS file, so deleting a user's SCRAM credentials leaves its
PLAIN login alone, as in Kafka.

The session follows Kafka's ``SaslServerAuthenticator``: ApiVersions and SaslHandshake
first; a v0 handshake means the tokens that follow are raw frames (no request header), a v1
handshake that they come in SaslAuthenticate requests. A failed authentication is counted
by mechanism and closes the connection. With ``connections.max.reauth.ms`` set, a session
lasts that long (SaslAuthenticate v1+ says so in ``session_lifetime_ms``; an OAUTHBEARER
session no longer than its token, whether or not that is set); the client
re-authenticates on the same connection (KIP-368) with the same mechanism and user, at most
once a second, and a connection whose session ran out is closed at its next request.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import math
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, final

from purgatory.kafka.oauthbearer import (
    OAUTHBEARER,
    InvalidToken,
    UnsecuredOptions,
    parse_initial_response,
    validate,
)

PLAIN: Final = "PLAIN"
SCRAM_SHA_256: Final = "SCRAM-SHA-256"
SCRAM_SHA_512: Final = "SCRAM-SHA-512"

#: the principal of a client nobody authenticated (a plaintext listener's)
ANONYMOUS: Final = "User:ANONYMOUS"

#: the mechanisms a SASL listener enables unless ``sasl.enabled.mechanisms`` says
#: otherwise, in the order its handshake lists them
MECHANISMS: Final = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)

#: every mechanism served here (``sasl.enabled.mechanisms`` may name these only)
SERVED_MECHANISMS: Final = (*MECHANISMS, OAUTHBEARER)

#: SCRAM mechanisms by Kafka's ``ScramMechanism`` type (AlterUserScramCredentials,
#: DescribeUserScramCredentials): name and hash
SCRAM_TYPES: Final[Mapping[int, str]] = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}
_HASHES: Final[Mapping[str, str]] = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}

#: Kafka's default and least iterations for a SCRAM credential, and the most it takes
DEFAULT_ITERATIONS: Final = 4096
MIN_ITERATIONS: Final = 4096
MAX_ITERATIONS: Final = 16384

#: how soon after one re-authentication a connection may start another (Kafka's
#: ``MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS``)
MIN_REAUTH_INTERVAL_S: Final = 1.0


class AuthenticationFailed(Exception):
    """The client's credentials are refused: ``message`` is what Kafka tells the client
    (SASL_AUTHENTICATION_FAILED's error message), ``reason`` what the broker logs (by
    default the same)."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or message


def enabled_mechanisms(text: str) -> tuple[str, ...]:
    """``sasl.enabled.mechanisms`` (a comma-separated list) checked: each served here, at
    least one; ValueError naming what is not (GSSAPI: no Kerberos here)."""
    names = tuple(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))
    if not names:
        raise ValueError("sasl.enabled.mechanisms: name at least one mechanism")
    for name in names:
        if name == "GSSAPI":
            raise ValueError(
                "sasl.enabled.mechanisms: GSSAPI (Kerberos) is not served here; "
                f"enable some of {', '.join(SERVED_MECHANISMS)}"
            )
        if name not in SERVED_MECHANISMS:
            raise ValueError(
                f"sasl.enabled.mechanisms: {name!r} is not served here "
                f"(served: {', '.join(SERVED_MECHANISMS)})"
            )
    return names


@final
@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a broker keeps of a SCRAM password (RFC 5802 section 3): never the password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(mechanism: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, _HASHES[mechanism]).digest()


def _hash(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(_HASHES[mechanism], data).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's SaltedPassword: Hi(password, salt, i), PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


def credential_of(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored and server keys of a salted password (as AlterUserScramCredentials
    carries it)."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(
        salt,
        _hash(mechanism, client_key),
        _hmac(mechanism, salted, b"Server Key"),
        iterations,
    )


def scram_credential(
    mechanism: str, password: str, *, iterations: int = DEFAULT_ITERATIONS, salt: bytes = b""
) -> ScramCredential:
    """A SCRAM credential for ``password`` (a random salt unless given)."""
    salt = salt or secrets.token_bytes(32)
    return credential_of(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations
    )


def parse_user(text: str) -> tuple[str, str]:
    """``NAME:PASSWORD`` (``--kafka-user``) split at the first colon; ValueError when
    either is empty."""
    name, sep, password = text.partition(":")
    if not sep or not name or not password:
        raise ValueError(f"--kafka-user wants NAME:PASSWORD, got {text!r}")
    return name, password


@final
class Credentials:
    """The users a SASL listener knows: PLAIN passwords (given at start) and SCRAM
    credentials by mechanism (derived at start, then altered by
    AlterUserScramCredentials). Shared by every listener of a front door."""

    def __init__(self, users: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        self._plain: dict[str, str] = {}
        self._scram: dict[str, dict[str, ScramCredential]] = {m: {} for m in SCRAM_TYPES.values()}
        pairs = users.items() if isinstance(users, Mapping) else users
        for name, password in pairs:
            self.add_user(name, password)

    def add_user(self, name: str, password: str) -> None:
        """A user who may log in with every mechanism."""
        if not name or not password:
            raise ValueError("a user needs a name and a password")
        self._plain[name] = password
        for mechanism in SCRAM_TYPES.values():
            self._scram[mechanism][name] = scram_credential(mechanism, password)

    def plain_matches(self, name: str, password: str) -> bool:
        known = self._plain.get(name)
        return known is not None and hmac.compare_digest(known.encode(), password.encode())

    def scram(self, mechanism: str, name: str) -> ScramCredential | None:
        return self._scram[mechanism].get(name)

    def upsert(self, name: str, mechanism: str, credential: ScramCredential) -> None:
        self._scram[mechanism][name] = credential

    def delete(self, name: str, mechanism: str) -> bool:
        """Remove one SCRAM credential; False if there was none."""
        return self._scram[mechanism].pop(name, None) is not None

    def scram_users(self) -> list[str]:
        """Every user with a SCRAM credential, each once, in the order first stored."""
        seen: dict[str, None] = {}
        for by_name in self._scram.values():
            seen.update(dict.fromkeys(by_name))
        return list(seen)

    def described(self, name: str) -> list[tuple[int, int]]:
        """A user's SCRAM credentials as (mechanism type, iterations)."""
        return [
            (number, by_name[name].iterations)
            for number, mechanism in SCRAM_TYPES.items()
            if name in (by_name := self._scram[mechanism])
        ]


class _Mechanism:
    """One authentication exchange of one mechanism (Kafka's ``SaslServer``);
    ``credential_expires_ms``: when the credential it checked runs out (ms since the
    epoch; None: never), which bounds the session."""

    complete = False
    user = ""
    credential_expires_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError


@final
class _Plain(_Mechanism):
    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    def evaluate(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", "replace").split("\0")
        if len(parts) != 3:
            raise AuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
            )
        authorization_id, user, password = parts
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        if not self._credentials.plain_matches(user, password):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self.user = user
        self.complete = True
        return b""


def _scram_name(text: str) -> str:
    """A SCRAM saslname unescaped (RFC 5802: ``=2C`` is a comma, ``=3D`` an equals sign)."""
    return text.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str) -> dict[str, str]:
    """``a=x,b=y`` as a dict; ValueError for a part without ``=``."""
    values: dict[str, str] = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise ValueError(f"invalid SCRAM attribute {part!r}")
        values.setdefault(name, value)
    return values


@final
class _Scram(_Mechanism):
    """The server side of RFC 5802: client-first, server-first, client-final, server-final."""

    def __init__(self, mechanism: str, credentials: Credentials) -> None:
        self._mechanism = mechanism
        self._credentials = credentials
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def _failed(self) -> AuthenticationFailed:
        # Kafka does not tell the client why (the user might not exist): one message
        return AuthenticationFailed(
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self._mechanism}"
        )

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._failed() from None
        if self._credential is None:
            return self._first(message)
        return self._final(message)

    def _first(self, message: str) -> bytes:
        # gs2-header: "n,," or "n,a=authzid," (no channel binding over plaintext)
        parts = message.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or parts[1][:2] not in ("", "a="):
            raise self._failed()
        try:
            bare = _attributes(parts[2])
        except ValueError:
            raise self._failed() from None
        if "n" not in bare or not bare.get("r"):
            raise self._failed()
        user = _scram_name(bare["n"])
        credential = self._credentials.scram(self._mechanism, user)
        if credential is None:
            raise self._failed()
        authorization_id = _scram_name(parts[1][2:])
        if authorization_id and authorization_id != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self.user = user
        self._credential = credential
        self._gs2_header = f"{parts[0]},{parts[1]},"
        self._client_first_bare = parts[2]
        self._nonce = bare["r"] + secrets.token_urlsafe(18)
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        credential = self._credential
        assert credential is not None
        if self.complete:
            raise self._failed()  # a token after the exchange ended
        without_proof, sep, proof_text = message.rpartition(",p=")
        try:
            attributes = _attributes(without_proof)
            proof = base64.b64decode(proof_text, validate=True)
            binding = base64.b64decode(attributes.get("c", ""), validate=True)
        except ValueError:
            raise self._failed() from None
        if not sep or attributes.get("r") != self._nonce or binding != self._gs2_header.encode():
            raise self._failed()
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._mechanism, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._failed()
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(_hash(self._mechanism, client_key), credential.stored_key):
            raise self._failed()
        server_signature = _hmac(self._mechanism, credential.server_key, auth_message)
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


@final
class _OAuthBearer(_Mechanism):
    """The server side of RFC 7628 as Kafka's ``OAuthBearerSaslServer`` with its unsecured
    validator: the client's first message carries the token; a token refused is answered
    with the JSON error (not a failure yet), and the client's byte 0x01 that acknowledges
    it ends the exchange as a failure with that JSON as the message."""

    def __init__(self, options: UnsecuredOptions, wall_clock: Callable[[], float]) -> None:
        self._options = options
        self._wall_clock = wall_clock
        self._error: InvalidToken | None = None
        #: the client's SASL extensions (the unsecured validator accepts them all)
        self.extensions: Mapping[str, str] = {}

    def evaluate(self, token: bytes) -> bytes:
        refused = self._error
        if token == b"\x01" and refused is not None:
            raise AuthenticationFailed(refused.json(), f"{refused.json()}: {refused.reason}")
        self._error = None  # anything else is a first message again, as in Kafka
        try:
            response = parse_initial_response(token)
        except ValueError as exc:
            # Kafka does not tell the client why (a SaslException)
            raise AuthenticationFailed(
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {OAUTHBEARER}",
                str(exc),
            ) from None
        now_ms = math.floor(self._wall_clock() * 1000)
        try:
            jws = validate(response.token, self._options, now_ms)
        except InvalidToken as exc:
            self._error = exc
            return exc.json().encode()
        wanted = response.authorization_id
        if wanted and wanted != jws.principal:
            raise AuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({wanted}) "
                f"that is different from the token's principal name ({jws.principal})"
            )
        self.extensions = response.extensions
        self.user = jws.principal
        self.credential_expires_ms = jws.lifetime_ms
        self.complete = True
        return b""


def _exchange(mechanism: str, listener: SaslListener) -> _Mechanism:
    if mechanism == PLAIN:
        return _Plain(listener.credentials)
    if mechanism == OAUTHBEARER:
        return _OAuthBearer(listener.oauthbearer, listener.wall_clock)
    return _Scram(mechanism, listener.credentials)


@final
@dataclass
class SaslListener:
    """What every SASL listener of a front door shares: the users, the session lifetime
    (``connections.max.reauth.ms``; 0: sessions never end), how long a connection whose
    authentication failed stays open after its error answer
    (``connection.failed.authentication.delay.ms``: slows a password-guessing client), the
    mechanisms enabled (``sasl.enabled.mechanisms``), the OAUTHBEARER validator's options;
    ``clock`` times sessions, ``wall_clock`` (seconds since the epoch) checks tokens."""

    credentials: Credentials = field(default_factory=Credentials)
    max_reauth_ms: int = 0
    failed_close_delay_ms: int = 100
    mechanisms: tuple[str, ...] = MECHANISMS
    oauthbearer: UnsecuredOptions = field(default_factory=UnsecuredOptions)
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time


class State(enum.Enum):
    """Where a connection is in Kafka's SASL exchange."""

    HANDSHAKE = enum.auto()  # ApiVersions or SaslHandshake expected
    AUTHENTICATE = enum.auto()  # SASL tokens expected
    AUTHENTICATED = enum.auto()  # requests are served
    FAILED = enum.auto()  # the connection closes


@final
class SaslSession:
    """One SASL connection's authentication: synchronous, so that the server (and the
    tests) drive it one request at a time."""

    def __init__(self, listener: SaslListener) -> None:
        self.listener = listener
        self.state = State.HANDSHAKE
        #: the tokens come as raw frames (a v0 handshake), not in SaslAuthenticate
        self.raw_tokens = False
        self.mechanism: str | None = None
        #: the authenticated user (``User:NAME`` is its principal)
        self.user: str | None = None
        self.expires_at: float | None = None
        self._exchange: _Mechanism | None = None
        self._reauth_started: float | None = None
        self._reauth_of: tuple[str, str] | None = None  # (mechanism, user) re-authenticated
        self._bad_reauth_mechanism: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is State.AUTHENTICATED

    def expired(self) -> bool:
        """The session ran out: the server closes the connection at its next request."""
        return self.expires_at is not None and self.listener.clock() > self.expires_at

    def may_reauthenticate(self) -> bool:
        """A SaslHandshake on an authenticated connection starts a re-authentication: only
        when the session has a lifetime, and not twice within a second (else Kafka answers
        it as any other: ILLEGAL_SASL_STATE)."""
        if not self.authenticated or self.expires_at is None:
            return False
        now = self.listener.clock()
        started = self._reauth_started
        if started is not None and now - started < MIN_REAUTH_INTERVAL_S:
            return False
        self._reauth_started = now
        assert self.mechanism is not None
        assert self.user is not None
        self._reauth_of = (self.mechanism, self.user)
        self.state = State.HANDSHAKE
        return True

    def handshake(self, mechanism: str, version: int) -> bool:
        """SaslHandshake: True if the mechanism is enabled (the tokens follow); False and
        the connection fails if not."""
        if mechanism not in self.listener.mechanisms:
            self.state = State.FAILED
            return False
        self.raw_tokens = version == 0
        previous = self._reauth_of
        if previous is not None and previous[0] != mechanism:
            # Kafka answers the handshake, then refuses the token that follows
            self._bad_reauth_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{previous[0]}'"
            )
        self.mechanism = mechanism
        self._exchange = _exchange(mechanism, self.listener)
        self.state = State.AUTHENTICATE
        return True

    def authenticate(self, token: bytes) -> tuple[bytes, int]:
        """One SASL token (raw, or a SaslAuthenticate's): the server's token and, once
        complete, the session lifetime in ms (0: none). Raises AuthenticationFailed; the
        connection fails."""
        exchange = self._exchange
        assert exchange is not None
        try:
            if self._bad_reauth_mechanism is not None:
                raise AuthenticationFailed(self._bad_reauth_mechanism)
            answer = exchange.evaluate(token)
            previous = self._reauth_of
            if exchange.complete and previous is not None and previous[1] != exchange.user:
                raise AuthenticationFailed(
                    "Cannot change principals during re-authentication from "
                    f"User.{previous[1]}: User.{exchange.user}"
                )
        except AuthenticationFailed:
            self.state = State.FAILED
            raise
        lifetime = 0
        if exchange.complete:
            self.user = exchange.user
            self.state = State.AUTHENTICATED
            self.raw_tokens = False
            self._exchange = None
            self._reauth_of = None
            lifetime, self.expires_at = self._session(exchange.credential_expires_ms)
        return answer, lifetime

    def _session(self, credential_expires_ms: int | None) -> tuple[int, float | None]:
        """The session lifetime in ms and when it ends (None: never), as Kafka's
        ``calcCompletionTimesAndReturnSessionLifetimeMs``: ``connections.max.reauth.ms``,
        or what is left of the credential (an OAUTHBEARER token), whichever is shorter."""
        longest = self.listener.max_reauth_ms
        if credential_expires_ms is None:
            if longest <= 0:
                return 0, None
            lifetime = longest
        else:
            left = credential_expires_ms - math.floor(self.listener.wall_clock() * 1000)
            lifetime = max(0, left if longest <= 0 else min(left, longest))
        return lifetime, self.listener.clock() + lifetime / 1000

    def fail(self) -> None:
        """A request the exchange does not allow: the connection closes."""
        self.state = State.FAILED

    @property
    def principal(self) -> str:
        """``User:NAME`` once authenticated (``User:ANONYMOUS`` before)."""
        return f"User:{self.user}" if self.user is not None else ANONYMOUS
