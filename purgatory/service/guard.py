"""Who may call the service, and how: the checks every request passes before its handler.

* **Host** (DNS rebinding): with ``allowed_hosts`` set, a request whose ``Host`` header names
  another host gets 400. A server bound to loopback allows only loopback names by default, so
  a web page whose domain was re-pointed at 127.0.0.1 cannot reach it.
* **Token**: with ``token`` set, every route but ``/healthz`` (and ``/metrics`` if
  ``public_metrics``) needs ``Authorization: Bearer <token>``; 401 otherwise.
* **Content type** (CSRF): a state-changing request must say ``Content-Type:
  application/json``, which a cross-site form or ``no-cors`` fetch cannot send; 415 otherwise.
  A ``DELETE`` without a body has no content to type: a browser sends a cross-site DELETE
  only after a CORS preflight, which this server never approves.

Each refusal is one JSON error and one line in the log, never a traceback.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from purgatory.errors import ErrorCode
from purgatory.loopback import is_loopback
from purgatory.service.refusals import ServiceRefusal

#: routes that answer without a token
OPEN_PATHS = frozenset({"/healthz"})
#: methods that change state; they must carry JSON
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass(frozen=True)
class Refusal:
    """Why a request may not reach its handler."""

    status: int
    reason: str  # the rejected-requests metric label
    code: ErrorCode | ServiceRefusal
    message: str


def host_name(header: str) -> str:
    """The host of a ``Host`` header, without port or IPv6 brackets, lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@dataclass(frozen=True)
class AccessPolicy:
    """The access rules of one app (see the module docstring)."""

    token: str | None = None
    public_metrics: bool = False
    #: lower-case host names allowed in ``Host``; None allows any
    allowed_hosts: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.token is not None and (not self.token or self.token != self.token.strip()):
            raise ValueError("the token must be a non-empty string without surrounding spaces")

    @classmethod
    def for_bind(
        cls,
        bind_host: str,
        *,
        token: str | None = None,
        public_metrics: bool = False,
        allowed_hosts: Iterable[str] = (),
    ) -> AccessPolicy:
        """The policy for a server bound to ``bind_host``: explicit ``allowed_hosts`` if
        any, else loopback names for a loopback bind, else no host check."""
        hosts = frozenset(h.lower() for h in allowed_hosts)
        if not hosts and is_loopback(bind_host):
            hosts = LOOPBACK_NAMES
        return cls(token, public_metrics, hosts or None)

    def check(
        self, method: str, path: str, headers: dict[str, str], *, routed: bool = True
    ) -> Refusal | None:
        """The refusal for this request, or None to let it through. An unrouted request
        (no such path or method) skips the content check: it gets its 404 or 405."""
        if self.allowed_hosts is not None:
            host = host_name(headers.get("host", ""))
            if host not in self.allowed_hosts:
                return Refusal(
                    400,
                    "bad_host",
                    ServiceRefusal.INVALID_HOST,
                    f"host {host!r} is not served here",
                )
        if self.token is not None and not self._open(path):
            given = headers.get("authorization", "")
            scheme, _, credentials = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                credentials.strip().encode(), self.token.encode()
            ):
                return Refusal(
                    401,
                    "unauthorized",
                    ServiceRefusal.UNAUTHORIZED,
                    "a valid bearer token is needed",
                )
        if routed and method in STATE_CHANGING and (method != "DELETE" or _has_body(headers)):
            media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if media_type != "application/json":
                return Refusal(
                    415,
                    "media_type",
                    ServiceRefusal.UNSUPPORTED_MEDIA_TYPE,
                    f"send Content-Type: application/json (got {media_type or 'none'!r})",
                )
        return None

    def _open(self, path: str) -> bool:
        return path in OPEN_PATHS or (self.public_metrics and path == "/metrics")


def _has_body(headers: dict[str, str]) -> bool:
    length = headers.get("content-length", "").strip()
    return bool(headers.get("transfer-encoding")) or length not in ("", "0")
