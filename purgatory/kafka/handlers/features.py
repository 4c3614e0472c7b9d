"""UpdateFeatures (API key 57, versions 0-2): changes the cluster's finalized feature
levels (:mod:`purgatory.kafka.features`), as Kafka's controller does (a broker forwards
the request to it). Every update is checked first, and either all apply or none does:
the first invalid one is the top-level INVALID_UPDATE_VERSION with Kafka's reason.
``validate_only`` (v1+) checks and changes nothing. v0 says a downgrade is allowed with
``allow_downgrade`` (a safe downgrade), v1+ with ``upgrade_type``. Before v2 the answer
lists each feature's result, NONE each when the request succeeded and none at all when
it failed, as Kafka's ``UpdateFeaturesResponse.createWithErrors`` builds it; v2 has the
top-level error only. The authorizer asks ALTER on the cluster
(:mod:`purgatory.kafka.authorization`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from purgatory.errors import ErrorCode
from purgatory.kafka.features import Features, FeatureUpdate, UpgradeType
from purgatory.kafka.handlers.units import SharedUnit
from purgatory.kafka.protocol import ApiKey, RequestHeader
from purgatory.kafka.schemas import respond, versions
from purgatory.kafka.server import Api, ApiTable

if TYPE_CHECKING:
    from purgatory.kafka.messages import (
        UpdateFeaturesRequest,
        UpdateFeaturesResponse,
        UpdateFeaturesUpdatableFeatureResult,
    )


@final
class FeatureHandlers:
    """UpdateFeatures over the cluster's ``features``."""

    def __init__(self, features: Features) -> None:
        self.features = features

    def apis(self) -> ApiTable:
        return {
            ApiKey.UPDATE_FEATURES: Api(*versions(ApiKey.UPDATE_FEATURES), self.update_features)
        }

    def update_features(
        self, header: RequestHeader, request: UpdateFeaturesRequest
    ) -> UpdateFeaturesResponse:
        updates: list[FeatureUpdate] = []
        for entry in request.feature_updates:
            if hasattr(entry, "upgrade_type"):  # v1+
                upgrade = int(entry.upgrade_type)
            else:
                upgrade = (
                    UpgradeType.SAFE_DOWNGRADE if entry.allow_downgrade else UpgradeType.UPGRADE
                )
            updates.append(FeatureUpdate(entry.feature, int(entry.max_version_level), upgrade))
        validate_only = request.validate_only if hasattr(request, "validate_only") else False
        error, message = self.features.update(updates, validate_only)
        results: list[UpdateFeaturesUpdatableFeatureResult] = (
            [
                {"feature": update.feature, "error_code": ErrorCode.NONE, "error_message": None}
                for update in updates
            ]
            if error is ErrorCode.NONE
            else []
        )
        return respond(request, error_code=error, error_message=message, results=results)


UNIT: Final = SharedUnit(lambda s: FeatureHandlers(s.features))
