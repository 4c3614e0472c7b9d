"""SASL/OAUTHBEARER (RFC 7628) as a Kafka broker serves it when no validator is
configured: its unsecured validator (``OAuthBearerUnsecuredValidatorCallbackHandler``),
which takes an unsecured JWS (RFC 7515 with ``alg`` ``none`` and no signature) and checks
its claims, not who signed it. Written from Kafka's behaviour for this project: the
client's first message (:func:`parse_initial_response`), the token's validation
(:func:`validate`) with the failure Kafka reports (:class:`InvalidToken`, its JSON error
``{"status":"invalid_token"}``), and the validator's JAAS options (:func:`parse_jaas`),
which a broker takes as ``listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config``.

Nothing here verifies a signature or asks an identity provider: a client names its own
principal. That is what Kafka's default does, and what a test broker needs.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, final

OAUTHBEARER: Final = "OAUTHBEARER"

#: the login module whose options a broker's OAUTHBEARER JAAS config carries
LOGIN_MODULE: Final = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

#: the broker config (Kafka's name, for the one SASL listener here) holding those options
JAAS_CONFIG: Final = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"

# what Java's String.trim() and Kafka's Utils.isBlank take for blank: every char <= ' '
_JAVA_BLANK: Final = "".join(map(chr, range(0x21)))

# OAuthBearerClientInitialResponse's grammar (RFC 7628 section 3.1)
#: a token's claim as Kafka keeps it (:func:`_java_value`)
Claim = str | int | float | list[str]

_SEPARATOR: Final = "\x01"
_SASLNAME: Final = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY: Final = r"[A-Za-z]+"
_VALUE: Final = r"[\x21-\x7e \t\r\n]+"
_INITIAL_RESPONSE: Final = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEPARATOR}"
    rf"(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEPARATOR})*){_SEPARATOR}"
)
_AUTH: Final = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.ASCII)

# OAuthBearerScopeUtils: one scope item
_SCOPE_ITEM: Final = re.compile(r"[\x23-\x5b\x5d-\x7e\x21]+")

_OPTION_PREFIX: Final = "unsecuredValidator"


@final
@dataclass(frozen=True, slots=True)
class UnsecuredOptions:
    """The unsecured validator's options (Kafka's JAAS option names in brackets): the claim
    naming the principal (``unsecuredValidatorPrincipalClaimName``, ``sub``), the claim
    holding the scope (``unsecuredValidatorScopeClaimName``, ``scope``), the scope every
    token must have (``unsecuredValidatorRequiredScope``, space-separated; none) and how
    far the broker's clock may lie from the issuer's
    (``unsecuredValidatorAllowableClockSkewMs``, 0)."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    allowable_clock_skew_ms: int = 0


class InvalidToken(Exception):
    """The token is refused (``OAuthBearerIllegalTokenException``): ``reason`` is why (the
    broker logs it, the client is not told), ``scope`` the required scope it lacked, as
    Java prints a list (then the status is ``insufficient_scope``)."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.scope = scope

    @property
    def status(self) -> str:
        return "invalid_token" if self.scope is None else "insufficient_scope"

    def json(self) -> str:
        """The error the server sends instead of a challenge (RFC 7628 section 3.2.2), as
        Kafka's ``OAuthBearerSaslServer`` writes it."""
        text = f'{{"status":"{self.status}"'
        if self.scope is not None:
            text += f', "scope":"{self.scope}"'
        return text + "}"


@final
@dataclass(frozen=True, slots=True)
class UnsecuredJws:
    """A token the validator accepted: its principal, when it expires and was issued (ms
    since the epoch; ``iat`` is optional), its scope and every claim."""

    principal: str
    lifetime_ms: int
    start_ms: int | None
    scope: frozenset[str]
    claims: Mapping[str, Claim] = field(repr=False)


@final
@dataclass(frozen=True, slots=True)
class InitialResponse:
    """The client's first message: the bearer token, the authorization id it asks for
    ("" if none) and its extensions (name -> value)."""

    token: str
    authorization_id: str
    extensions: Mapping[str, str]


def parse_initial_response(message: bytes) -> InitialResponse:
    """RFC 7628's client first message (``n,[a=AUTHZID],^Aauth=Bearer TOKEN^A[k=v^A]*^A``);
    ValueError with Kafka's message when it does not parse."""
    text = message.decode("utf-8", "replace")
    matched = _INITIAL_RESPONSE.fullmatch(text)
    if matched is None:
        raise ValueError("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for pair in matched["kvpairs"].split(_SEPARATOR):
        if pair:
            key, _, value = pair.partition("=")
            pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise ValueError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    bearer = _AUTH.fullmatch(auth)
    if bearer is None:
        raise ValueError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if bearer["scheme"].lower() != "bearer":
        raise ValueError(f"Invalid scheme in OAUTHBEARER client first message: {bearer['scheme']}")
    return InitialResponse(bearer["token"], matched["authzid"] or "", pairs)


def _blank(text: str) -> bool:
    return not text.strip(_JAVA_BLANK)


def _as_text(value: object) -> str:
    """What Jackson's ``asText`` makes of a JSON value: containers are ""."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return repr(value)
    return ""


def _java_value(value: object) -> Claim:
    """A claim as Kafka keeps it: an array as a list of texts, a number as a number,
    anything else as its text."""
    if isinstance(value, list):
        return [_as_text(item) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return _as_text(value)


def _java_type(value: object) -> str:
    """The Java class Kafka holds the claim in (named in its type errors)."""
    if isinstance(value, list):
        return "ArrayList"
    if isinstance(value, float):
        return "Double"
    if isinstance(value, int):
        if -(1 << 31) <= value < 1 << 31:
            return "Integer"
        return "Long" if -(1 << 63) <= value < 1 << 63 else "BigInteger"
    return "String"


def _no_constant(name: str) -> object:
    raise ValueError(f"not JSON: {name}")


def _decode(part: str) -> dict[str, Claim]:
    """One JWS part: base64 (base64url, or the standard alphabet as Kafka reads it; no
    padding needed), then a JSON object (anything else: no claims)."""
    try:
        raw = base64.b64decode(
            part.translate(str.maketrans("-_", "+/")) + "=" * (-len(part) % 4), validate=True
        )
    except (binascii.Error, ValueError):
        raise InvalidToken("malformed Base64 URL encoded value") from None
    try:
        text = raw.decode("utf-8")
        # Jackson reads the first value and leaves what follows
        value, _ = json.JSONDecoder(parse_constant=_no_constant).raw_decode(text.lstrip())
    except ValueError:  # UnicodeDecodeError and JSONDecodeError too
        raise InvalidToken("malformed JSON") from None
    if not isinstance(value, dict):
        return {}
    return {name: _java_value(claim) for name, claim in value.items()}


def _claim(claims: Mapping[str, Claim], name: str, kind: type) -> Claim | None:
    value = claims.get(name)
    if value is None:
        return None
    wanted = (int, float) if kind is float else (kind,)
    if not isinstance(value, wanted):
        java = {str: "String", float: "Number", list: "List"}[kind]
        raise InvalidToken(f"The '{name}' claim was not of type {java}: {_java_type(value)}")
    return value


def _millis(seconds: float) -> int:
    """Java's ``Math.round(seconds * 1000)``."""
    return math.floor(seconds * 1000 + 0.5)


def _java_list(items: Iterable[str]) -> str:
    """A list as Java prints it: ``[a, b]``."""
    return "[" + ", ".join(items) + "]"


def _scope(claims: Mapping[str, Claim], name: str) -> frozenset[str]:
    value = claims.get(name)
    if isinstance(value, str):
        return frozenset() if _blank(value) else frozenset({value.strip(_JAVA_BLANK)})
    items = _claim(claims, name, list)
    assert items is None or isinstance(items, list)
    return frozenset(i.strip(_JAVA_BLANK) for i in items or () if not _blank(i))


def validate(token: str, options: UnsecuredOptions, now_ms: int) -> UnsecuredJws:
    """The token checked as Kafka's unsecured validator checks it at ``now_ms`` (the
    broker's wall clock); InvalidToken says why it is refused."""
    if ".." in token:
        raise InvalidToken("Malformed compact serialization contains '..'")
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken(
            "Unsecured JWS compact serializations must have 3 dot-separated "
            "Base64URL-encoded values"
        )
    header = _decode(parts[0])
    claims = _decode(parts[1])
    algorithm = header.get("alg")
    if algorithm is None:
        # Kafka fails here with a NullPointerException and drops the connection
        raise InvalidToken("JWS header must have an Algorithm value")
    if algorithm != "none":
        raise InvalidToken("Unsecured JWS must have 'none' for an algorithm")
    if parts[2]:
        raise InvalidToken("Unsecured JWS must not contain a digital signature")
    scope = _scope(claims, options.scope_claim)
    expires = _claim(claims, "exp", float)
    if expires is None:
        raise InvalidToken("No expiration time in JWT")
    assert isinstance(expires, int | float)
    principal = _claim(claims, options.principal_claim, str)
    if not isinstance(principal, str) or _blank(principal):
        raise InvalidToken(f"No principal name in JWT claim: {options.principal_claim}")
    issued = _claim(claims, "iat", float)
    assert issued is None or isinstance(issued, int | float)
    skew = options.allowable_clock_skew_ms
    if issued is not None and 1000 * issued > now_ms + skew:
        raise InvalidToken(
            f"The Issued At value ({issued:f} seconds) was after the indicated time "
            f"({now_ms} ms) plus allowable clock skew ({skew} ms)"
        )
    if now_ms - skew >= 1000 * expires:
        raise InvalidToken(
            f"The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on "
            f"or after the Expiration Time value ({expires:f} seconds)"
        )
    if issued is not None and expires <= issued:
        raise InvalidToken(
            f"The Expiration Time time ({expires:f} seconds) was not after the Issued At "
            f"time ({issued:f} seconds)"
        )
    for required in options.required_scope:
        if required not in scope:
            raise InvalidToken(
                f"The provided scope ({_java_list(sorted(scope))}) was missing a required "
                f"scope ({required}).  All required scope elements: "
                f"{_java_list(options.required_scope)}",
                _java_list(options.required_scope),
            )
    return UnsecuredJws(
        principal,
        _millis(expires),
        None if issued is None else _millis(issued),
        scope,
        claims,
    )


# -- the JAAS config ------------------------------------------------------------------------

_JAAS_TOKEN: Final = re.compile(
    r"""\s*(?:(?P<word>[^\s=;"]+)|"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<symbol>[=;]))""", re.S
)
_FLAGS: Final = ("required", "requisite", "sufficient", "optional")
_OPTIONS: Final = {
    "unsecuredValidatorPrincipalClaimName",
    "unsecuredValidatorScopeClaimName",
    "unsecuredValidatorRequiredScope",
    "unsecuredValidatorAllowableClockSkewMs",
}


def _jaas_tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) of a JAAS config: words, quoted strings (unescaped), ``=`` and ``;``;
    ``//`` and ``/* */`` comments skipped."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    tokens: list[tuple[str, str]] = []
    at = 0
    while text[at:].strip():
        matched = _JAAS_TOKEN.match(text, at)
        if matched is None:
            raise ValueError(f"cannot read the JAAS config at {text[at:].strip()[:20]!r}")
        at = matched.end()
        if matched["word"] is not None:
            tokens.append(("word", matched["word"]))
        elif matched["quoted"] is not None:
            unescaped = re.sub(
                r"\\(.)",
                lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m[1], m[1]),
                matched["quoted"],
                flags=re.S,
            )
            tokens.append(("quoted", unescaped))
        else:
            tokens.append(("symbol", matched["symbol"]))
    return tokens


def parse_jaas(text: str) -> UnsecuredOptions:
    """The unsecured validator's options from a broker's OAUTHBEARER JAAS config
    (``org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
    unsecuredValidatorRequiredScope="read" ;``): one login module, Kafka's; its
    ``unsecuredValidator*`` options checked (a misspelt one is refused; options for the
    broker's own login, ``unsecuredLogin*``, are left alone, as Kafka's validator leaves
    them). ValueError saying what is wrong."""
    tokens = _jaas_tokens(text)
    if not tokens:
        return UnsecuredOptions()
    if tokens[-1] != ("symbol", ";") or [t for t in tokens[:-1] if t == ("symbol", ";")]:
        raise ValueError("the JAAS config must hold one login module, ended by ';'")
    if tokens[0] != ("word", LOGIN_MODULE):
        raise ValueError(f"the login module must be {LOGIN_MODULE}, got {tokens[0][1]!r}")
    if len(tokens) < 3 or tokens[1][0] != "word" or tokens[1][1].lower() not in _FLAGS:
        raise ValueError(f"the login module needs a control flag ({', '.join(_FLAGS)})")
    options: dict[str, str] = {}
    rest = tokens[2:-1]
    if len(rest) % 3:
        raise ValueError("JAAS options are NAME=VALUE")
    for at in range(0, len(rest), 3):
        (kind, name), equals, (value_kind, value) = rest[at : at + 3]
        if kind != "word" or equals != ("symbol", "=") or value_kind == "symbol":
            raise ValueError("JAAS options are NAME=VALUE")
        if name.startswith(_OPTION_PREFIX) and name not in _OPTIONS:
            raise ValueError(f"unknown option {name!r} (known: {', '.join(sorted(_OPTIONS))})")
        options[name] = value
    return _options(options)


def _options(options: Mapping[str, str]) -> UnsecuredOptions:
    defaults = UnsecuredOptions()
    principal = options.get("unsecuredValidatorPrincipalClaimName", "")
    scope_claim = options.get("unsecuredValidatorScopeClaimName", "")
    scope: list[str] = []
    for item in options.get("unsecuredValidatorRequiredScope", "").strip(_JAVA_BLANK).split(" "):
        if item and not _SCOPE_ITEM.fullmatch(item):
            raise ValueError(f"unsecuredValidatorRequiredScope: invalid scope value: {item!r}")
        if item:
            scope.append(item)
    skew_text = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip(_JAVA_BLANK)
    try:
        skew = int(skew_text) if skew_text else 0
    except ValueError:
        raise ValueError(
            f"unsecuredValidatorAllowableClockSkewMs: not an integer: {skew_text!r}"
        ) from None
    if not 0 <= skew < 1 << 31:
        raise ValueError(f"unsecuredValidatorAllowableClockSkewMs: must be 0..2147483647: {skew}")
    return UnsecuredOptions(
        principal.strip(_JAVA_BLANK) or defaults.principal_claim,
        scope_claim.strip(_JAVA_BLANK) or defaults.scope_claim,
        tuple(scope),
        skew,
    )
