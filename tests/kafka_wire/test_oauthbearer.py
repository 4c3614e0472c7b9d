"""OAUTHBEARER as Kafka's unsecured validator takes it: the token's checks (alg none, no
signature, exp and iat with the clock skew, the principal claim, the required scope), the
client's first message, the JAAS options and ``sasl.enabled.mechanisms``, and the
exchange (the JSON error, the client's 0x01, the session bounded by the token); all with
a fixed clock."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest

from purgatory.kafka.broker_configs import broker_configs
from purgatory.kafka.oauthbearer import (
    JAAS_CONFIG,
    InvalidToken,
    UnsecuredOptions,
    parse_initial_response,
    parse_jaas,
    validate,
)
from purgatory.kafka.sasl import (
    AuthenticationFailed,
    SaslListener,
    SaslSession,
    State,
    enabled_mechanisms,
)

NOW_S = 1_700_000_000
NOW_MS = NOW_S * 1000
DEFAULTS = UnsecuredOptions()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jws(claims: dict[str, Any] | str, header: dict[str, Any] | None = None, sig: str = "") -> str:
    """An unsecured JWS (RFC 7515 with alg none) written for these tests."""
    head = json.dumps({"alg": "none"} if header is None else header).encode()
    body = claims.encode() if isinstance(claims, str) else json.dumps(claims).encode()
    return f"{b64url(head)}.{b64url(body)}.{sig}"


def good(**more: Any) -> dict[str, Any]:
    return {"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 3600, **more}


def refused(token: str, options: UnsecuredOptions = DEFAULTS, now_ms: int = NOW_MS) -> str:
    with pytest.raises(InvalidToken) as caught:
        validate(token, options, now_ms)
    return caught.value.reason


# -- the token ---------------------------------------------------------------------------


def test_a_good_token_names_its_principal_and_lifetime() -> None:
    token = validate(jws(good(scope=["read", " write "])), DEFAULTS, NOW_MS)
    assert token.principal == "alice"
    assert token.lifetime_ms == (NOW_S + 3600) * 1000
    assert token.start_ms == (NOW_S - 10) * 1000
    assert token.scope == {"read", "write"}
    # iat is optional; exp may be fractional (Java's Math.round of ms)
    token = validate(jws({"sub": "bob", "exp": NOW_S + 1.0005}), DEFAULTS, NOW_MS)
    assert (token.principal, token.lifetime_ms, token.start_ms) == ("bob", NOW_MS + 1001, None)


def test_expiry_and_issue_time_are_checked_with_the_allowable_clock_skew() -> None:
    expired = jws(good(exp=NOW_S - 5, iat=NOW_S - 60))
    assert refused(expired) == (
        f"The indicated time ({NOW_MS} ms) minus allowable clock skew (0 ms) was on or after "
        f"the Expiration Time value ({NOW_S - 5:f} seconds)"
    )
    # within a 10 s skew it passes; at exactly exp + skew it does not (on or after)
    within = UnsecuredOptions(allowable_clock_skew_ms=10_000)
    assert validate(expired, within, NOW_MS).principal == "alice"
    assert "on or after" in refused(expired, within, (NOW_S + 5) * 1000)
    assert validate(expired, within, (NOW_S + 5) * 1000 - 1).principal == "alice"
    # issued in the future: beyond the skew refused, within it taken
    future = jws(good(iat=NOW_S + 5))
    assert refused(future) == (
        f"The Issued At value ({NOW_S + 5:f} seconds) was after the indicated time "
        f"({NOW_MS} ms) plus allowable clock skew (0 ms)"
    )
    assert validate(future, within, NOW_MS).principal == "alice"
    # exp not after iat
    assert refused(jws(good(iat=NOW_S + 5, exp=NOW_S + 5)), within) == (
        f"The Expiration Time time ({NOW_S + 5:f} seconds) was not after the Issued At "
        f"time ({NOW_S + 5:f} seconds)"
    )


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": NOW_S + 60}, "No principal name in JWT claim: sub"),
        ({"sub": " ", "exp": NOW_S + 60}, "No principal name in JWT claim: sub"),
        ({"sub": 7, "exp": NOW_S + 60}, "The 'sub' claim was not of type String: Integer"),
        ({"sub": "alice"}, "No expiration time in JWT"),
        ({"sub": "alice", "exp": "soon"}, "The 'exp' claim was not of type Number: String"),
        (
            {"sub": "alice", "exp": NOW_S + 60, "iat": [1]},
            "The 'iat' claim was not of type Number: ArrayList",
        ),
        (
            {"sub": "alice", "exp": NOW_S + 60, "scope": 3},
            "The 'scope' claim was not of type List: Integer",
        ),
        ([1, 2], "No expiration time in JWT"),  # not an object: no claims
    ],
)
def test_claims_missing_or_of_the_wrong_type_are_refused(claims: Any, reason: str) -> None:
    assert refused(jws(json.dumps(claims))) == reason


def test_only_an_unsecured_jws_is_taken() -> None:
    assert refused(jws(good(), {"alg": "HS256"})) == (
        "Unsecured JWS must have 'none' for an algorithm"
    )
    assert refused(jws(good(), sig="c2ln")) == "Unsecured JWS must not contain a digital signature"
    assert refused(jws(good(), {"typ": "JWT"})) == "JWS header must have an Algorithm value"
    assert refused("a.b") == (
        "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"
    )
    assert refused(jws(good()) + "sig.") == (
        "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"
    )
    assert refused("a..b") == "Malformed compact serialization contains '..'"


def test_malformed_base64_or_json_is_refused() -> None:
    header = b64url(b'{"alg":"none"}')
    assert refused(f"{header}.abcde.") == "malformed Base64 URL encoded value"
    assert refused(f"{header}.a*b.") == "malformed Base64 URL encoded value"
    assert refused(f"{header}.{b64url(b'{not json')}.") == "malformed JSON"
    nan = b64url(b'{"exp": NaN}')
    assert refused(f"{header}.{nan}.") == "malformed JSON"
    assert refused(f"{header}.{b64url(bytes([0xFF, 0xFE]))}.") == "malformed JSON"
    # base64url and the standard alphabet, with or without padding
    claims = json.dumps(good(note="?>?>")).encode()
    standard = base64.b64encode(claims).decode()
    assert "+" in standard or "/" in standard
    assert validate(f"{header}.{standard}.", DEFAULTS, NOW_MS).principal == "alice"
    assert validate(f"{header}.{b64url(claims)}.", DEFAULTS, NOW_MS).principal == "alice"


def test_the_principal_claim_and_the_required_scope_are_options() -> None:
    options = UnsecuredOptions(principal_claim="client_id", required_scope=("read", "write"))
    token = jws(good(client_id="svc", scope="read"))
    with pytest.raises(InvalidToken) as caught:
        validate(token, options, NOW_MS)
    assert caught.value.json() == '{"status":"insufficient_scope", "scope":"[read, write]"}'
    assert caught.value.reason == (
        "The provided scope ([read]) was missing a required scope (write).  All required "
        "scope elements: [read, write]"
    )
    granted = validate(jws(good(client_id="svc", scope=["write", "read"])), options, NOW_MS)
    assert granted.principal == "svc"
    other = UnsecuredOptions(scope_claim="scp", required_scope=("read",))
    assert validate(jws(good(scp="read")), other, NOW_MS).scope == {"read"}


# -- the client's first message ----------------------------------------------------------


def test_the_first_message_carries_the_token_an_authorization_id_and_extensions() -> None:
    token = jws(good())
    message = f"n,a=alice,\x01auth=Bearer {token}\x01traceId=abc 1\x01tenant=t\x01\x01"
    first = parse_initial_response(message.encode())
    assert (first.token, first.authorization_id) == (token, "alice")
    assert first.extensions == {"traceId": "abc 1", "tenant": "t"}
    plain = parse_initial_response(f"n,,\x01auth=bearer {token}\x01\x01".encode())
    assert (plain.authorization_id, plain.extensions) == ("", {})


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (b"n,,\x01\x01", "'auth' not specified"),
        (b"n,,\x01auth=Bearer\x01\x01", "invalid 'auth' format"),
        (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme"),
        (b"p=tls,,\x01auth=Bearer abc\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01auth=Bearer abc\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01auth=Bearer abc\x01x1=y\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"\x01", "Invalid OAUTHBEARER client first message"),
    ],
)
def test_a_malformed_first_message_is_refused(message: bytes, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_initial_response(message)


# -- configuration -----------------------------------------------------------------------

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def test_the_jaas_config_carries_the_validator_options() -> None:
    assert parse_jaas("") == UnsecuredOptions()
    options = parse_jaas(
        f"{MODULE} required unsecuredValidatorPrincipalClaimName=client_id\n"
        '  unsecuredValidatorRequiredScope="read  write" '
        'unsecuredValidatorAllowableClockSkewMs="30000" '
        'unsecuredLoginStringClaim_sub="admin";'
    )
    assert options == UnsecuredOptions("client_id", "scope", ("read", "write"), 30_000)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("org.example.Other required;", "login module must be"),
        (f"{MODULE};", "control flag"),
        (f"{MODULE} required unsecuredValidatorRequiredScope=read", "one login module"),
        (f'{MODULE} required unsecuredValidatorAllowableClockSkewMs="-1";', "0..2147483647"),
        (f'{MODULE} required unsecuredValidatorAllowableClockSkewMs="soon";', "integer"),
        (f'{MODULE} required unsecuredValidatorRequiredScope="a\\\\b";', "invalid scope"),
        (f'{MODULE} required unsecuredValidatorRequiredScop="read";', "unknown option"),
        (f"{MODULE} required unsecuredValidatorRequiredScope;", "NAME=VALUE"),
    ],
)
def test_a_bad_jaas_config_is_refused_at_start(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_jaas(text)
    with pytest.raises(ValueError, match=re.escape(JAAS_CONFIG)):
        broker_configs({JAAS_CONFIG: text})


def test_sasl_enabled_mechanisms_restricts_or_extends_the_default() -> None:
    assert broker_configs().value("sasl.enabled.mechanisms") == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    assert enabled_mechanisms("OAUTHBEARER, SCRAM-SHA-256") == ("OAUTHBEARER", "SCRAM-SHA-256")
    with pytest.raises(ValueError, match="GSSAPI \\(Kerberos\\) is not served"):
        broker_configs({"sasl.enabled.mechanisms": "GSSAPI,PLAIN"})
    with pytest.raises(ValueError, match="'DIGEST-MD5' is not served"):
        broker_configs({"sasl.enabled.mechanisms": "DIGEST-MD5"})
    with pytest.raises(ValueError, match="at least one"):
        broker_configs({"sasl.enabled.mechanisms": ""})


# -- the exchange ------------------------------------------------------------------------


class Clocks:
    """The session clock (monotonic) and the wall clock, moved together."""

    def __init__(self) -> None:
        self.now = float(NOW_S)

    def __call__(self) -> float:
        return self.now


def session(clocks: Clocks, **listener: Any) -> SaslSession:
    sasl = SaslListener(mechanisms=("OAUTHBEARER",), clock=clocks, wall_clock=clocks, **listener)
    return SaslSession(sasl)


def first(token: str, authzid: str = "") -> bytes:
    authz = f"a={authzid}" if authzid else ""
    return f"n,{authz},\x01auth=Bearer {token}\x01\x01".encode()


def test_a_good_token_logs_in_for_the_tokens_lifetime() -> None:
    clocks = Clocks()
    login = session(clocks)
    assert not login.handshake("PLAIN", 1)  # not enabled
    login = session(clocks)
    assert login.handshake("OAUTHBEARER", 1)
    answer, lifetime = login.authenticate(first(jws(good()), "alice"))
    assert (answer, lifetime, login.principal) == (b"", 3_600_000, "User:alice")
    clocks.now += 3599
    assert not login.expired()
    clocks.now += 2
    assert login.expired()


def test_connections_max_reauth_ms_bounds_the_tokens_session() -> None:
    clocks = Clocks()
    login = session(clocks, max_reauth_ms=60_000)
    login.handshake("OAUTHBEARER", 1)
    assert login.authenticate(first(jws(good())))[1] == 60_000
    # a token that expires sooner bounds it instead
    login = session(clocks, max_reauth_ms=60_000)
    login.handshake("OAUTHBEARER", 1)
    assert login.authenticate(first(jws(good(exp=NOW_S + 30))))[1] == 30_000
    # expired but within the skew: logged in, with a session that is already over
    login = session(clocks, oauthbearer=UnsecuredOptions(allowable_clock_skew_ms=10_000))
    login.handshake("OAUTHBEARER", 1)
    assert login.authenticate(first(jws(good(exp=NOW_S - 5))))[1] == 0
    clocks.now += 0.001
    assert login.expired()


def test_a_bad_token_is_answered_with_the_json_error_then_fails_on_0x01() -> None:
    clocks = Clocks()
    login = session(clocks)
    login.handshake("OAUTHBEARER", 1)
    answer, lifetime = login.authenticate(first(jws(good(exp=NOW_S - 1))))
    assert (answer, lifetime, login.state) == (b'{"status":"invalid_token"}', 0, State.AUTHENTICATE)
    with pytest.raises(AuthenticationFailed) as caught:
        login.authenticate(b"\x01")
    assert caught.value.message == '{"status":"invalid_token"}'
    assert "Expiration Time" in caught.value.reason
    assert login.state is State.FAILED
    # another first message instead of 0x01 starts over, as Kafka's server does
    login = session(clocks)
    login.handshake("OAUTHBEARER", 1)
    login.authenticate(first(jws(good(), {"alg": "RS256"})))
    assert login.authenticate(first(jws(good())))[0] == b""
    assert login.authenticated


def test_a_malformed_message_or_another_authorization_id_fails_at_once() -> None:
    clocks = Clocks()
    login = session(clocks)
    login.handshake("OAUTHBEARER", 1)
    with pytest.raises(AuthenticationFailed) as caught:
        login.authenticate(b"\x01")  # no error to acknowledge: not a first message
    assert caught.value.message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism OAUTHBEARER"
    )
    login = session(clocks)
    login.handshake("OAUTHBEARER", 1)
    with pytest.raises(AuthenticationFailed) as caught:
        login.authenticate(first(jws(good()), "bob"))
    assert caught.value.message == (
        "Authentication failed: Client requested an authorization id (bob) that is different "
        "from the token's principal name (alice)"
    )


def test_re_authentication_keeps_the_principal() -> None:
    clocks = Clocks()
    login = session(clocks)
    login.handshake("OAUTHBEARER", 1)
    login.authenticate(first(jws(good(exp=NOW_S + 10))))
    clocks.now += 5
    assert login.may_reauthenticate()
    login.handshake("OAUTHBEARER", 1)
    _, lifetime = login.authenticate(first(jws(good(exp=NOW_S + 65))))
    assert (lifetime, login.authenticated) == (60_000, True)
    clocks.now += 5
    assert login.may_reauthenticate()
    login.handshake("OAUTHBEARER", 1)
    with pytest.raises(AuthenticationFailed, match="Cannot change principals"):
        login.authenticate(first(jws(good(sub="mallory"))))
