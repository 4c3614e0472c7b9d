"""The state Kafka's coordinators keep, in memory: the groups and their membership (one
map in :mod:`.group_coordinator`, whose protocols :mod:`.classic` and :mod:`.consumer` act
on the classic groups of :mod:`.groups` and on KIP-848's consumer groups), committed
offsets (:mod:`.offsets`), producer ids (:mod:`.producer_ids`) and transactions
(:mod:`.transactions`, the hub, over :mod:`.txn_coordinator`, :mod:`.txn_state` and
:mod:`.txn_markers`). Nothing here reads or writes the wire: the request handlers in
:mod:`purgatory.kafka.handlers` decode requests and ask it.
"""
