"""The request handlers: each decodes its requests from the wire, asks the simulated
cluster or a coordinator's state, and encodes the answer. Each handler class has one table
of the API keys and versions it answers (``apis()``, a
:data:`~purgatory.kafka.server.ApiTable`), and its module one ``UNIT``
(:mod:`purgatory.kafka.handlers.units`) saying how it is built from the front door's
context; :data:`purgatory.kafka.handlers.registry.UNITS` lists them, and the front door
serves them all on every listener.
"""
