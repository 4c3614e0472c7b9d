"""The cluster's feature levels (KIP-584), as Kafka's controller keeps them: the range of
each feature the brokers support, the level finalized for the cluster, and the epoch that
grows with every change. ApiVersions (v3+) reports them; UpdateFeatures changes them.

One feature is here, ``transaction.version`` (Kafka's ``TransactionVersion``: 0 and 1
are Transactions V1, 2 is V2, KIP-890 part 2), finalized at 2 as Kafka 4.x formats a new
cluster. A client that reads it at 2 may run its transactions the V2 way (the coordinator
bumps the epoch at each EndTxn v5, Produce v12+ and TxnOffsetCommit v5 add their
partition or group to the transaction themselves); below 2 those implicit additions are
refused, as they are by a Kafka cluster finalized at TV1. The other features a Kafka
broker reports (``metadata.version``, ``kraft.version``, ``group.version``...) are left
out: nothing here behaves differently by their level, so no level of theirs could be
honoured.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Final, NamedTuple, final

from purgatory.errors import ErrorCode

TRANSACTION_VERSION: Final = "transaction.version"
#: the first ``transaction.version`` of Transactions V2 (Kafka's TV_2)
TV_2: Final = 2

#: each feature's supported levels (min, max), as the brokers register them
SUPPORTED: Final[Mapping[str, tuple[int, int]]] = {TRANSACTION_VERSION: (0, 2)}
#: the levels a new cluster is finalized at (Kafka 4.x's defaults)
DEFAULT_LEVELS: Final[Mapping[str, int]] = {TRANSACTION_VERSION: TV_2}


class UpgradeType(enum.IntEnum):
    """UpdateFeatures' ``upgrade_type`` (v1+; v0's ``allow_downgrade`` is SAFE_DOWNGRADE
    when set, else UPGRADE)."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


class FeatureUpdate(NamedTuple):
    """One entry of an UpdateFeatures request; ``upgrade_type`` as sent (Kafka refuses a
    value it does not know)."""

    feature: str
    level: int
    upgrade_type: int


@final
class Features:
    """The finalized level of every supported feature (0: not finalized) and their epoch,
    which starts at 0 and grows by one with each UpdateFeatures that changes a level
    (Kafka's is the metadata log's offset: it too only grows)."""

    def __init__(self, levels: Mapping[str, int] | None = None) -> None:
        """``levels``: the features finalized at start by name, as Kafka's ``kafka-storage
        format --feature NAME=LEVEL`` (checked by :func:`checked_levels`); the others at
        :data:`DEFAULT_LEVELS`."""
        self._levels = {**DEFAULT_LEVELS, **checked_levels(levels or {})}
        self.epoch = 0

    def level(self, name: str) -> int:
        return self._levels.get(name, 0)

    def finalized(self) -> dict[str, int]:
        """The features finalized above 0 (Kafka reports only those), by name."""
        return {name: level for name, level in sorted(self._levels.items()) if level > 0}

    @property
    def transactions_v2(self) -> bool:
        """Whether ``transaction.version`` is finalized at 2 or more."""
        return self.level(TRANSACTION_VERSION) >= TV_2

    def update(
        self, updates: Iterable[FeatureUpdate], validate_only: bool
    ) -> tuple[ErrorCode, str | None]:
        """Apply every update, or none: the first invalid one is answered
        INVALID_UPDATE_VERSION with Kafka's reason (FeatureControlManager's checks, in
        its order); ``validate_only`` checks them and changes nothing."""
        wanted: dict[str, int] = {}
        for update in updates:
            reason = _invalid(
                update.feature, update.level, update.upgrade_type, self.level(update.feature)
            )
            if reason is not None:
                return ErrorCode.INVALID_UPDATE_VERSION, (
                    f"Invalid update version {update.level} for feature {update.feature}. " + reason
                )
            wanted[update.feature] = update.level
        if validate_only:
            return ErrorCode.NONE, None
        changed = {name: level for name, level in wanted.items() if self.level(name) != level}
        if changed:
            self._levels.update(changed)
            self.epoch += 1
        return ErrorCode.NONE, None


def checked_levels(levels: Mapping[str, object]) -> dict[str, int]:
    """Feature levels to start at, each a supported feature at a level it supports:
    ValueError (TypeError for a level that is not an int) naming what is supported."""
    checked: dict[str, int] = {}
    for name, level in levels.items():
        supported = SUPPORTED.get(name)
        if supported is None:
            known = ", ".join(f"{n} ({lo}-{hi})" for n, (lo, hi) in SUPPORTED.items())
            raise ValueError(f"unknown feature {name!r}; supported: {known}")
        if isinstance(level, bool) or not isinstance(level, int):
            raise TypeError(f"feature {name}: the level must be an int, got {level!r}")
        low, high = supported
        if not low <= level <= high:
            raise ValueError(f"feature {name}: level {level} is outside {low}-{high}")
        checked[name] = level
    return checked


def _invalid(name: str, level: int, upgrade_type: int, current: int) -> str | None:
    """Why a feature may not go from ``current`` to ``level`` this way (None: it may)."""
    if upgrade_type not in tuple(UpgradeType):
        return "The controller does not support the given upgrade type."
    if level < 0:
        return "A feature version cannot be less than 0."
    supported = SUPPORTED.get(name)
    if supported is None:
        return "The controller does not support the given feature."
    low, high = supported
    if not low <= level <= high:
        return f"The controller only supports versions {low}-{high} of this feature."
    if level < current and upgrade_type == UpgradeType.UPGRADE:
        return (
            "Can't downgrade the version of this feature without setting the upgrade type "
            "to either safe or unsafe downgrade."
        )
    if level > current and upgrade_type != UpgradeType.UPGRADE:
        return "Can't downgrade to a newer version."
    return None
