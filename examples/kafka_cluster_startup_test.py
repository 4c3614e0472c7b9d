"""A stranger's test file: one test that asks for the ``kafka_cluster`` fixture and lists
the topics with confluent-kafka. Run alone, in a fresh process, it shows what the fixture
costs on first use (set-up: the package's import and the cluster's start):

    pytest -c /dev/null -p no:cacheprovider --durations=0 examples/kafka_cluster_startup_test.py

(``-c /dev/null``: without this project's pytest settings, as a stranger would run it.)
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient


@pytest.mark.kafka_cluster(topics={"orders": 1})
def test_the_topic_is_listed(kafka_cluster: Any) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    assert "orders" in admin.list_topics(timeout=10).topics
