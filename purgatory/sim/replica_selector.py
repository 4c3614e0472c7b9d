"""Fetching from followers (KIP-392): which replica a consumer should read from.

A broker configured with Kafka's ``replica.selector.class`` =
``org.apache.kafka.common.replica.RackAwareReplicaSelector`` tells a consumer that says
its rack (Fetch v11+ ``rack_id``) the replica to fetch from instead, as Kafka's
``ReplicaManager.findPreferredReadReplica`` with its ``RackAwareReplicaSelector`` does,
from the leader's view of its followers:

* only the leader and the followers in the ISR whose log (as the leader last learnt it)
  holds the fetch offset are candidates;
* a consumer without a rack, or whose rack has no candidate, or whose rack holds the
  leader, gets the leader, which is no preferred replica at all (the leader answers the
  fetch itself);
* among several candidates in its rack, the one with the highest log end offset, then
  the one caught up most recently (Kafka's ``ReplicaView.comparator``), then the lowest
  broker id (Kafka's choice among equals is a hash set's order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from purgatory.sim.partition import Partition

#: Kafka's rack-aware selector, the one ``replica.selector.class`` may name here
RACK_AWARE_REPLICA_SELECTOR: Final = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
#: the selectors served (None, Kafka's default: consumers read from the leader only)
REPLICA_SELECTORS: Final = (RACK_AWARE_REPLICA_SELECTOR,)


def check_replica_selector(name: str | None) -> str | None:
    """``name`` if it is a selector served (or None), else ValueError."""
    if name is None or name == "" or name in REPLICA_SELECTORS:
        return name or None
    raise ValueError(
        f"replica.selector.class {name!r} is not served; known: {', '.join(REPLICA_SELECTORS)}"
    )


def select_read_replica(
    p: Partition,
    racks: Mapping[int, str | None],
    client_rack: str,
    fetch_offset: int,
) -> int | None:
    """The replica of ``p`` that a consumer in ``client_rack`` fetching at
    ``fetch_offset`` should read from, by the leader's view; None for the leader (also
    when ``p`` has none)."""
    leader = p.leader
    if leader is None or not client_rack or racks.get(leader) == client_rack:
        return None
    best: int | None = None
    best_key = (0, 0.0, 0)
    for broker, state in p.followers.items():
        if (
            broker in p.isr
            and racks.get(broker) == client_rack
            and state.leo >= fetch_offset
            and state.lso <= fetch_offset
        ):
            key = (state.leo, state.last_caught_up_ms, -broker)
            if best is None or key > best_key:
                best, best_key = broker, key
    return best
