"""The ``kafka_cluster`` pytest fixture: an :class:`~purgatory.kafka.embedded.EmbeddedKafka`
for the test that asks for it, closed when the test ends.

Installed with the package (``pip install 'purgatory-aio[service]'``) and registered
through the ``pytest11`` entry point; it does nothing, and imports nothing of the broker,
unless a test names the fixture. Three brokers by default; a marker passes
:class:`~purgatory.kafka.embedded.EmbeddedKafka`'s arguments::

    @pytest.mark.kafka_cluster(brokers=1, topics={"orders": 2})
    def test_orders(kafka_cluster):
        producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers)

Broker configs go by Kafka's names, as your test Kafka's server.properties sets them::

    @pytest.mark.kafka_cluster(configs={"group.min.session.timeout.ms": 1000})

SASL_PLAINTEXT listeners beside the plaintext ones, for users who log in (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512), at ``kafka_cluster.sasl_bootstrap_servers``::

    @pytest.mark.kafka_cluster(users={"alice": "alice-secret"}, sasl_port=0)

SSL listeners (``ssl=True``, or ``ssl_port``; SASL_SSL ones with ``sasl_ssl_port``), at
``kafka_cluster.ssl_bootstrap_servers``, with the cluster's CA at
``kafka_cluster.ca_file`` and a client's context from ``kafka_cluster.client_ssl_context()``::

    @pytest.mark.kafka_cluster(ssl=True, configs={"ssl.client.auth": "required"})

The cluster runs on its own loop thread, so the fixture serves synchronous tests
(kafka-python, confluent-kafka) and asyncio tests (aiokafka) alike.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, cast

import pytest

if TYPE_CHECKING:
    from purgatory.kafka.embedded import EmbeddedKafka, EmbeddedKafkaOptions

#: The marker that configures the fixture, and the fixture's name.
NAME = "kafka_cluster"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{NAME}(brokers=3, topics=None, min_insync_replicas=1, cluster_options=None, "
        "configs=None, users=None, sasl_port=None, ssl=False, ssl_port=None, "
        "sasl_ssl_port=None): the embedded Kafka cluster of the kafka_cluster fixture "
        "(EmbeddedKafka's arguments; configs: broker configs by Kafka's names; users: "
        "name -> password for the SASL listeners on sasl_port and sasl_ssl_port; ssl: SSL "
        "listeners on free ports)",
    )


#: what the fixture imports, the embedded cluster and the Kafka wire under it
EMBEDDED = "purgatory.kafka.embedded"


def _import_unrewritten(name: str) -> ModuleType:
    """Module ``name``, imported (with what it imports) past pytest's assertion rewriting.

    pytest rewrites the asserts of every module of a distribution that has a ``pytest11``
    entry point (a wheel install of this package names them all), so that a plugin's own
    asserts report well. For the Kafka wire that means parsing and compiling each of its
    120-odd modules from source in every run where pytest cannot keep its rewritten copies
    (a read-only install, ``PYTHONDONTWRITEBYTECODE``): 0.35-0.4 s of the fixture's
    set-up, for modules that hold no test asserts. So the import runs with pytest's
    import hook set aside: the modules behave the same, their asserts unrewritten.
    """
    module = sys.modules.get(name)
    if module is not None:
        return module
    hooks = [
        (at, finder)
        for at, finder in enumerate(sys.meta_path)
        if type(finder).__name__ == "AssertionRewritingHook"
    ]
    for _, finder in reversed(hooks):
        sys.meta_path.remove(finder)
    try:
        return importlib.import_module(name)
    finally:
        for at, finder in hooks:
            sys.meta_path.insert(at, finder)


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[EmbeddedKafka]:
    """A running embedded Kafka cluster (three brokers unless the ``kafka_cluster`` marker
    says otherwise); connect with ``kafka_cluster.bootstrap_servers``."""
    embedded_kafka: type[EmbeddedKafka] = _import_unrewritten(EMBEDDED).EmbeddedKafka

    marker = request.node.get_closest_marker(NAME)
    kwargs = {} if marker is None else dict(marker.kwargs)
    brokers: int = kwargs.pop("brokers", 3)
    if marker is not None and marker.args:
        if len(marker.args) > 1:
            raise pytest.UsageError(f"{NAME} marker: only brokers may be positional")
        brokers = marker.args[0]
    # the marker's keywords are EmbeddedKafka's options, which it checks (names and values)
    options = cast("EmbeddedKafkaOptions", kwargs)
    with embedded_kafka(brokers, **options) as kafka:
        yield kafka
