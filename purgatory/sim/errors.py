"""The simulation's refusals: a :class:`SimulationError` carries an
:class:`~purgatory.errors.ErrorCode` (defined below the simulation, so the trigger bus and
the Kafka wire share it)."""

from __future__ import annotations

from purgatory.errors import ErrorCode

__all__ = ["ErrorCode", "SimulationError"]


class SimulationError(ValueError):
    """A request the cluster refuses outright, as Kafka would answer it: ``code`` is the
    :class:`ErrorCode` (a value: nobody parses the text), ``message`` says why.

    A ``ValueError``, so code that catches bad input in general still catches it."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
