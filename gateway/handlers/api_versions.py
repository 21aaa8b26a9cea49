"""ApiVersions: exactly the APIs with a registered handler, at the versions we serve."""

from __future__ import annotations

import re

from gateway.context import RequestContext
from gateway.dispatch import supported_apis
from gateway.handlers.registry import handler
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@handler(18)
async def api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.api_version >= 3 and not (
        _SOFTWARE.fullmatch(req.client_software_name) and _SOFTWARE.fullmatch(req.client_software_version)
    ):
        return ApiVersionsResponse(error_code=int(ErrorCode.INVALID_REQUEST))
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in supported_apis().items()]
    return ApiVersionsResponse(api_keys=keys)
