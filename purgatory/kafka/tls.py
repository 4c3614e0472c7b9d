"""TLS for the SSL and SASL_SSL listeners, as a Kafka broker's: the certificates a cluster
makes for itself at start, the server's and the client's :class:`ssl.SSLContext`, and the
principal a client certificate stands for.

:class:`TlsMaterial` makes, with ``cryptography``, a CA, one certificate per broker (its
subject ``CN=purgatory-broker-ID``, its subject alternative names 127.0.0.1, ``localhost``
and the host the listeners bind) and one client certificate for mutual TLS
(:data:`CLIENT_SUBJECT`), as PEM files in a temporary directory it removes at
:meth:`~TlsMaterial.close`. Keys are ECDSA P-256 (every client here takes them, and they
are made in a millisecond).

The broker configs by Kafka's names (:mod:`purgatory.kafka.broker_configs`):
``ssl.client.auth`` (``none``, ``requested``, ``required``), ``ssl.enabled.protocols``
(``TLSv1.2``, ``TLSv1.3``) and ``ssl.principal.mapping.rules`` (:class:`PrincipalMapper`,
Kafka's SslPrincipalMapper). A client certificate's principal is ``User:`` and its subject
as Java's ``X500Principal.getName()`` prints it (RFC 2253: the last RDN first,
``CN=client,OU=clients,O=purgatory``), mapped by the rules; a client that sent none is
``User:ANONYMOUS`` (Kafka's DefaultKafkaPrincipalBuilder).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import shutil
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, final

from purgatory.kafka.sasl import ANONYMOUS

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

#: the client certificate's subject, as its principal names it
CLIENT_SUBJECT: Final = "CN=purgatory-client,OU=clients,O=purgatory"

#: ``ssl.client.auth``: whether the server asks for a client certificate
CLIENT_AUTH: Final = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}

#: ``ssl.enabled.protocols``: the TLS versions a listener may take
PROTOCOLS: Final = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}

#: how long a TLS handshake may take before the connection is closed (Kafka bounds it by
#: nothing but its idle timeout; asyncio's default is 60 s)
HANDSHAKE_TIMEOUT_S: Final = 10.0

_VALID: Final = datetime.timedelta(days=365)


class NoMatchingRule(Exception):
    """No ``ssl.principal.mapping.rules`` rule maps the subject: Kafka fails the
    authentication."""


@final
class PrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules``: a comma-separated list of ``DEFAULT``
    (the subject as is) and ``RULE:pattern/replacement/`` rules (optionally ``L`` or
    ``U`` after the last slash: the result lower- or upper-cased), tried in order; the
    first whose pattern matches the whole subject gives the name (the replacement's
    ``$1`` its first group, as Java's ``replaceAll``). ValueError for a rule that does not
    parse."""

    # Kafka's RULE_PATTERN, in Python's syntax
    _RULE: Final = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
    _SPLITTER: Final = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
    _PARSER: Final = re.compile(_RULE)

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.text = rules
        self._rules: list[tuple[re.Pattern[str], str, str] | None] = []
        for rule in self._split(rules):
            match = self._PARSER.match(rule)
            if match is None or match.end() != len(rule):
                raise ValueError(f"ssl.principal.mapping.rules: invalid rule {rule!r}")
            if match.group(2) is not None:  # a RULE
                try:
                    pattern = re.compile(match.group(2))
                except re.error as exc:
                    raise ValueError(
                        f"ssl.principal.mapping.rules: bad pattern in {rule!r}: {exc}"
                    ) from None
                replacement = _java_replacement(match.group(3), pattern.groups)
                self._rules.append((pattern, replacement, match.group(4)))
            elif match.group(1) is not None:
                self._rules.append(None)  # DEFAULT
            # an empty rule is ignored, as Kafka ignores it

    @classmethod
    def _split(cls, rules: str) -> list[str]:
        found: list[str] = []
        text = rules.strip()
        position = 0
        while position <= len(text):
            match = cls._SPLITTER.search(text, position)
            if match is None:
                break
            found.append(match.group(1))
            # Java's find() moves past an empty match by one character
            position = match.end() if match.end() > match.start() else match.end() + 1
        return found

    def name(self, subject: str) -> str:
        """The name ``subject`` maps to; :class:`NoMatchingRule` if no rule applies."""
        for rule in self._rules:
            if rule is None:
                return subject
            pattern, replacement, case = rule
            if pattern.fullmatch(subject) is None:
                continue
            result = pattern.sub(replacement, subject)
            if case == "L":
                return result.lower()
            return result.upper() if case == "U" else result
        raise NoMatchingRule(f"No rules apply to {subject}, rules {self.text}")


def _java_replacement(replacement: str, groups: int) -> str:
    """Java's ``replaceAll`` replacement as :func:`re.sub`'s: ``$N`` a group (digits past
    the groups there are taken as literal, as Kafka's escapeLiteralBackReferences and
    Java's parser do), ``\\x`` the character x."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        if char == "$":
            digits = re.match(r"\d+", replacement[i + 1 :])
            if digits is not None:
                number = digits.group()
                # the longest prefix naming a group there is (Java reads digits greedily)
                taken = 1
                while taken < len(number) and int(number[: taken + 1]) <= groups:
                    taken += 1
                if int(number[:taken]) <= groups:
                    out.append(f"\\g<{int(number[:taken])}>")
                    i += 1 + taken
                    continue
                out.append("$")
                i += 1
                continue
        out.append("\\\\" if char == "\\" else char)
        i += 1
    return "".join(out)


def subject_of(der: bytes) -> str:
    """A DER certificate's subject as Java's ``X500Principal.getName()`` prints it
    (RFC 2253: the last RDN first; CN, L, ST, O, OU, C, STREET, DC, UID by name, other
    attributes by OID)."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


@final
@dataclass(frozen=True, slots=True)
class TlsSettings:
    """A TLS listener's settings, from the broker configs: ``client_auth`` (a key of
    :data:`CLIENT_AUTH`), ``protocols`` (keys of :data:`PROTOCOLS`), the principal
    ``mapper``, and how long a handshake may take."""

    client_auth: str = "none"
    protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    mapper: PrincipalMapper = field(default_factory=PrincipalMapper)
    handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S


@final
class TlsListener:
    """What a server needs of TLS: the ``context`` to wrap its connections in, the
    handshake's bound, and the principal of a connection's client certificate."""

    __slots__ = ("context", "handshake_timeout_s", "mapper")

    def __init__(
        self, context: ssl.SSLContext, mapper: PrincipalMapper, handshake_timeout_s: float
    ) -> None:
        self.context = context
        self.mapper = mapper
        self.handshake_timeout_s = handshake_timeout_s

    def principal(self, ssl_object: ssl.SSLObject | None) -> str:
        """``User:NAME``: the mapped subject of the client's certificate, ANONYMOUS
        without one; :class:`NoMatchingRule` when no rule maps it."""
        der = None if ssl_object is None else ssl_object.getpeercert(binary_form=True)
        if not der:
            return ANONYMOUS
        return f"User:{self.mapper.name(subject_of(der))}"


@final
class _Authority:
    """The test CA, made now: its key and self-signed certificate, valid from a day ago (a
    clock a little behind still trusts it) for :data:`_VALID`; it issues the brokers' and
    the client's certificates."""

    def __init__(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.x509.oid import NameOID

        self.now = datetime.datetime.now(datetime.UTC)
        self.start = self.now - datetime.timedelta(days=1)
        self.key = _private_key()
        self.name = _name(
            (NameOID.ORGANIZATION_NAME, "purgatory"), (NameOID.COMMON_NAME, "purgatory test CA")
        )
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.start)
            .not_valid_after(self.now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )

    def issue(
        self,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        alt_names: list[x509.GeneralName] | None = None,
    ) -> tuple[bytes, bytes]:
        """A new key and its certificate for ``subject`` and ``usage``, signed by the CA:
        (certificate PEM, key PEM)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization

        private = _private_key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.name)
            .public_key(private.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.start)
            .not_valid_after(self.now + _VALID)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
        )
        if alt_names:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), _pem_key(private)


def _private_key() -> ec.EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(private: ec.EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(*parts: tuple[x509.ObjectIdentifier, str]) -> x509.Name:
    from cryptography import x509

    return x509.Name([x509.NameAttribute(oid, value) for oid, value in parts])


@final
class TlsMaterial:
    """A CA, broker certificates and a client certificate, made now with
    ``cryptography``, as PEM files under :attr:`directory` (removed by :meth:`close`).
    ``hosts`` are the broker certificates' subject alternative names besides 127.0.0.1
    and localhost."""

    def __init__(self, broker_ids: Iterable[int], hosts: Iterable[str] = ()) -> None:
        from cryptography.hazmat.primitives import serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        self.directory = tempfile.mkdtemp(prefix="purgatory-kafka-tls-")
        try:
            ca = _Authority()
            self.ca_file = self._write(
                "ca.pem", ca.certificate.public_bytes(serialization.Encoding.PEM)
            )
            alt_names = _alt_names(["127.0.0.1", "localhost", *hosts])
            #: broker id -> (certificate file, key file)
            self.broker_files: dict[int, tuple[str, str]] = {}
            for broker in broker_ids:
                cert, private = ca.issue(
                    _name(
                        (NameOID.ORGANIZATION_NAME, "purgatory"),
                        (NameOID.COMMON_NAME, f"purgatory-broker-{broker}"),
                    ),
                    ExtendedKeyUsageOID.SERVER_AUTH,
                    alt_names,
                )
                self.broker_files[broker] = (
                    self._write(f"broker-{broker}.pem", cert),
                    self._write(f"broker-{broker}.key", private),
                )
            cert, private = ca.issue(
                _name(
                    (NameOID.ORGANIZATION_NAME, "purgatory"),
                    (NameOID.ORGANIZATIONAL_UNIT_NAME, "clients"),
                    (NameOID.COMMON_NAME, "purgatory-client"),
                ),
                ExtendedKeyUsageOID.CLIENT_AUTH,
            )
            self.client_cert_file = self._write("client.pem", cert)
            self.client_key_file = self._write("client.key", private)
        except BaseException:
            self.close()
            raise

    def _write(self, filename: str, data: bytes) -> str:
        """``data`` as a new file of :attr:`directory`, readable by its owner only."""
        path = os.path.join(self.directory, filename)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return path

    def server_context(self, broker: int, settings: TlsSettings) -> ssl.SSLContext:
        """Broker ``broker``'s listeners' context: its certificate, the client
        certificates the CA signed asked for as ``ssl.client.auth`` says, the enabled
        protocols only."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        cert, private = self.broker_files[broker]
        context.load_cert_chain(cert, private)
        context.verify_mode = CLIENT_AUTH[settings.client_auth]
        if context.verify_mode != ssl.CERT_NONE:
            context.load_verify_locations(self.ca_file)
        versions = sorted(PROTOCOLS[p] for p in settings.protocols)
        context.minimum_version = versions[0]
        context.maximum_version = versions[-1]
        return context

    def client_context(self, certificate: bool = True) -> ssl.SSLContext:
        """A client's context: trusts the CA, checks the broker's host name, and with
        ``certificate`` presents the client certificate (mutual TLS)."""
        context = ssl.create_default_context(cafile=self.ca_file)
        if certificate:
            context.load_cert_chain(self.client_cert_file, self.client_key_file)
        return context

    def files(self) -> dict[str, str]:
        """The ready file's names for the CA and client files."""
        return {
            "ca_file": self.ca_file,
            "client_cert_file": self.client_cert_file,
            "client_key_file": self.client_key_file,
        }

    def close(self) -> None:
        """Remove the files. Idempotent."""
        shutil.rmtree(self.directory, ignore_errors=True)


def _alt_names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    from cryptography import x509

    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(h for h in hosts if h):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def tls_settings(client_auth: str, protocols: str, rules: str) -> TlsSettings:
    """The settings from the configs' text; ValueError for a rule that does not parse."""
    return TlsSettings(
        client_auth, tuple(p for p in protocols.split(",") if p), PrincipalMapper(rules)
    )
