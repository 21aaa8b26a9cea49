"""ApiVersions: exactly the APIs of the handler table, at the versions we serve."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from gateway.context import RequestContext
from gateway.handlers.spec import Handler
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

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
        return ApiVersionsResponse(api_keys=keys)

    return api_versions
