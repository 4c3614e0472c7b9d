"""Kafka wire protocol front door for the simulated broker (issue 12).

Hand-written codecs over ``struct`` and ``memoryview`` for the non-flexible versions that
clients accept. This package depends downward on :mod:`purgatory.sim` only.
"""
