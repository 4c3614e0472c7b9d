"""Log lines for events that come in floods (refusals, timeouts): at most one per interval."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final, final

#: at most one line per this many seconds for each kind of event
LOG_INTERVAL_S: Final = 10.0


@final
class Throttled:
    """A warning per event, at most one per ``interval_s``; the next line that is written
    says how many were skipped since the last."""

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock
        self._next_at = float("-inf")
        self._skipped = 0

    def warning(self, message: str, *args: object) -> None:
        now = self._clock()
        if now < self._next_at:
            self._skipped += 1
            return
        if self._skipped:
            message += " (and %d more since the last such line)"
            args = (*args, self._skipped)
        self._logger.warning(message, *args)
        self._skipped = 0
        self._next_at = now + self._interval_s
