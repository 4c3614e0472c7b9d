"""The request handlers: each decodes its requests from the wire, asks the simulated
cluster or a coordinator's state, and encodes the answer. Each handler class has one table
of the API keys and versions it answers (``apis()``, a
:data:`~purgatory.kafka.server.ApiTable`), which the front door registers with every
listener.
"""
