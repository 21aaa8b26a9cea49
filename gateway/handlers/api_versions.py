"""ApiVersions: exactly the APIs of the handler table, at the versions we serve, and (v3+) the
features Quire finalizes."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from gateway.context import RequestContext
from gateway.handlers.spec import Handler
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

# Finalized features, as a Kafka 4.4 cluster at its defaults reports those Quire implements:
# transaction.version 2 (KIP-890 part 2) makes producers add partitions implicitly on produce and
# bump their epoch at every EndTxn.
FEATURES = {"transaction.version": 2}
FINALIZED_EPOCH = 1  # features never change at run time
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_versions_handler(served: Callable[[], Mapping[int, tuple[int, int]]]) -> Handler:
    """The ApiVersions handler, advertising served(): api_key -> (min, max). The handler table
    passes its own ranges in, so that this module does not import the table that lists it."""

    async def api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
        if ctx.api_version >= 3 and not (
            _SOFTWARE.fullmatch(req.client_software_name) and _SOFTWARE.fullmatch(req.client_software_version)
        ):
            return ApiVersionsResponse(error_code=int(ErrorCode.INVALID_REQUEST))
        keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in served().items()]
        if ctx.api_version < 3:
            return ApiVersionsResponse(api_keys=keys)
        return ApiVersionsResponse(
            api_keys=keys,
            supported_features=[ApiVersionsResponse.SupportedFeatureKey(name=n, min_version=0, max_version=v)
                                for n, v in FEATURES.items()],
            finalized_features_epoch=FINALIZED_EPOCH,
            finalized_features=[ApiVersionsResponse.FinalizedFeatureKey(name=n, min_version_level=v, max_version_level=v)
                                for n, v in FEATURES.items()],
        )

    return api_versions
