"""``purgatory serve``'s ready file: what every listener bound, written as JSON once all
are up (the format is in docs/serve.md), atomically."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import NamedTuple

from purgatory.json_types import JsonObject
from purgatory.kafka.sasl import MECHANISMS

#: the version of the ready file's format: a reader refuses a version it does not know;
#: keys are only ever added (a reader ignores those it does not know)
READY_FILE_VERSION = 1


class TlsListeners(NamedTuple):
    """A TLS protocol's listeners in the ready file: broker id -> (host, port), and the
    files of the CA and the client certificate by their keys (``ca_file``, ...)."""

    addresses: dict[int, tuple[str, int]]
    files: dict[str, str]


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def ready_document(
    http: list[tuple[str, int]],
    kafka: dict[int, tuple[str, int]] | None,
    kafka_sasl: dict[int, tuple[str, int]] | None = None,
    kafka_ssl: TlsListeners | None = None,
    kafka_sasl_ssl: TlsListeners | None = None,
    mechanisms: tuple[str, ...] = MECHANISMS,
) -> JsonObject:
    """What the ready file says: the HTTP listeners (``http``: (host, port) as bound) and,
    with Kafka, each broker's plaintext listener (``kafka``: broker id -> (host, port))
    and SASL_PLAINTEXT listener (``kafka_sasl``), and its SSL and SASL_SSL ones
    (``kafka_ssl``, ``kafka_sasl_ssl``: ``addresses`` as those, and the files of the CA
    and the client certificate); the SASL ones offer ``mechanisms``; the format is in
    docs/serve.md."""
    document: JsonObject = {
        "version": READY_FILE_VERSION,
        "pid": os.getpid(),
        "http": {
            "url": _url(*http[0]),
            "addresses": [{"host": host, "port": port} for host, port in http],
        },
        "kafka": None,
    }
    if kafka is not None:
        document["kafka"] = _listeners(kafka)
    document["kafka_sasl"] = None
    if kafka_sasl is not None:
        document["kafka_sasl"] = {
            **_listeners(kafka_sasl),
            "security_protocol": "SASL_PLAINTEXT",
            "mechanisms": list(mechanisms),
        }
    # TLS listeners: "addresses" (broker id -> (host, port)) and the certificates' files
    for key, listener, protocol in (
        ("kafka_ssl", kafka_ssl, "SSL"),
        ("kafka_sasl_ssl", kafka_sasl_ssl, "SASL_SSL"),
    ):
        document[key] = None
        if listener is not None:
            described: JsonObject = {
                **_listeners(listener.addresses),
                "security_protocol": protocol,
                **listener.files,
            }
            if protocol == "SASL_SSL":
                described["mechanisms"] = list(mechanisms)
            document[key] = described
    return document


def _listeners(addresses: dict[int, tuple[str, int]]) -> JsonObject:
    ordered = sorted(addresses.items())
    brokers: list[JsonObject] = [
        {"id": broker, "host": host, "port": port} for broker, (host, port) in ordered
    ]
    return {
        "bootstrap_servers": ",".join(f"{host}:{port}" for _, (host, port) in ordered),
        "brokers": brokers,
    }


def write_ready_file(path: str, document: JsonObject) -> None:
    """Write ``document`` to ``path`` atomically: a temporary file beside it, renamed over
    it, so a reader sees no file or the whole of it."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".ready-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(document, out, indent=2)
            out.write("\n")
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
