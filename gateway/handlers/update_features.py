"""UpdateFeatures (v0-2). Quire's finalized features are fixed (ApiVersions advertises
transaction.version 2, gateway/handlers/api_versions.py): every update is refused as Kafka's controller refuses an
update of a feature it does not support, INVALID_UPDATE_VERSION for the whole request with
Kafka's message naming the first feature in error."""

from __future__ import annotations

from gateway.context import RequestContext
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.update_features import UpdateFeaturesRequest, UpdateFeaturesResponse


def _why(ctx: RequestContext, u: UpdateFeaturesRequest.FeatureUpdateKey) -> str:
    if u.max_version_level < 0:
        return "A feature version cannot be less than 0."
    if u.max_version_level == 0:
        return f"Feature {u.feature} not found."
    return f"Local controller {ctx.services.cluster.controller_id} does not support this feature."


async def update_features(ctx: RequestContext, req: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    if not req.feature_updates:
        return UpdateFeaturesResponse(error_message=None, results=[])
    u = req.feature_updates[0]
    return UpdateFeaturesResponse(
        error_code=int(ErrorCode.INVALID_UPDATE_VERSION), results=[],
        error_message="The update failed for all features since the following feature had an error: "
                      f"Invalid update version {u.max_version_level} for feature {u.feature}. {_why(ctx, u)}")
