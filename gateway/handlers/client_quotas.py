"""DescribeClientQuotas (v0-1). Quire enforces no client quotas and stores none, so every valid
filter matches nothing; filters Kafka rejects get Kafka's errors and messages
(DescribeClientQuotasRequest.filter and the broker's ClientQuotaMetadataManager).
AlterClientQuotas is not served: accepting quotas that are then neither kept nor enforced would
tell tools a limit is in place when none is."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

EXACT, DEFAULT, SPECIFIED = 0, 1, 2
ENTITY_TYPES = ("user", "client-id", "ip")


def _check(req: DescribeClientQuotasRequest) -> None:
    bad = int(ErrorCode.INVALID_REQUEST)
    for c in req.components:  # the request's own filter() first, as Kafka parses it
        if c.match_type == EXACT and c.match is None:
            raise KafkaApiError(bad, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
        if c.match_type == DEFAULT and c.match is not None:
            raise KafkaApiError(bad, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
        if c.match_type == SPECIFIED and c.match is not None:
            raise KafkaApiError(bad, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
        if c.match_type not in (EXACT, DEFAULT, SPECIFIED):
            raise KafkaApiError(bad, f"Unknown match type {c.match_type}")
    seen: set[str] = set()
    for c in req.components:
        if c.entity_type not in ENTITY_TYPES:
            raise KafkaApiError(int(ErrorCode.UNSUPPORTED_VERSION), f"Unsupported entity type {c.entity_type}")
        if c.entity_type in seen:
            raise KafkaApiError(bad, f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        seen.add(c.entity_type)
    if "ip" in seen and len(seen) > 1:
        raise KafkaApiError(bad, "Invalid entity filter component combination. IP filter component should not be "
                                 "used with user or clientId filter component.")


async def describe_client_quotas(ctx: RequestContext, req: DescribeClientQuotasRequest
                                 ) -> DescribeClientQuotasResponse:
    try:
        _check(req)
    except KafkaApiError as e:
        return DescribeClientQuotasResponse(error_code=e.error_code, error_message=e.message, entries=None)
    return DescribeClientQuotasResponse(entries=[])
