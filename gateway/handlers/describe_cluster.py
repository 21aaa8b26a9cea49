"""DescribeCluster (v0-2): the live gateways as brokers."""

from __future__ import annotations

from gateway.context import RequestContext
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse

BROKERS_ENDPOINT = 1


async def describe_cluster(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    cluster = ctx.services.cluster
    if ctx.api_version >= 1 and req.endpoint_type != BROKERS_ENDPOINT:
        return DescribeClusterResponse(error_code=int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
                                       error_message="The request was sent to an endpoint of type BROKER, but we "
                                       f"wanted an endpoint of type {req.endpoint_type}",
                                       endpoint_type=req.endpoint_type, cluster_id=cluster.cluster_id)
    brokers = [DescribeClusterResponse.DescribeClusterBroker(broker_id=g.node_id, host=g.host, port=g.port,
                                                              rack=g.rack, is_fenced=False)
               for g in cluster.gateways()]
    return DescribeClusterResponse(error_message=None, endpoint_type=BROKERS_ENDPOINT, cluster_id=cluster.cluster_id,
                                   controller_id=cluster.controller_id, brokers=brokers)
