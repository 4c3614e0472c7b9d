"""The state Kafka's coordinators keep, in memory: consumer groups and their membership
(:mod:`.group_coordinator` over :mod:`.groups`), committed offsets (:mod:`.offsets`) and
producer ids (:mod:`.producer_ids`). Nothing here reads or writes the wire: the request
handlers in :mod:`purgatory.kafka.handlers` decode requests and ask it.
"""
