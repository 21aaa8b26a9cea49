"""ElectLeaders (v0-2). A partition's leader is its owning gateway, and the owner is the only
replica Quire reports, so it is always the preferred leader: every owned partition answers
ELECTION_NOT_NEEDED, as Kafka does for a partition already led by its preferred replica (and,
for an unclean election, by a leader in the ISR)."""

from __future__ import annotations

from gateway.context import RequestContext
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse

TopicResult = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = ElectLeadersResponse.PartitionResult
PREFERRED, UNCLEAN = 0, 1
NOT_NEEDED = "Leader election not needed for topic partition."


async def elect_leaders(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    services = ctx.services
    election = req.election_type if ctx.api_version >= 1 else PREFERRED
    if req.topic_partitions is None:
        # Every partition: Kafka reports only elections it made, so each topic with no result.
        return ElectLeadersResponse(replica_election_results=[
            TopicResult(topic=t.name, partition_result=[]) for t in await services.topics.all()])
    if election not in (PREFERRED, UNCLEAN):
        bad = int(ErrorCode.INVALID_REQUEST)
        return ElectLeadersResponse(error_code=bad, replica_election_results=[
            TopicResult(topic=t.topic, partition_result=[
                PartitionResult(partition_id=p, error_code=bad, error_message=f"Unknown election type {election}")
                for p in t.partitions])
            for t in req.topic_partitions])
    out = []
    for t in req.topic_partitions:
        info = await services.topics.get(t.topic)
        results = []
        for p in t.partitions:
            if info is None:
                results.append(PartitionResult(partition_id=p, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                               error_message=f"No such topic as {t.topic}"))
            elif not 0 <= p < info.partitions:
                results.append(PartitionResult(partition_id=p, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                               error_message=f"No such partition as {t.topic}-{p}"))
            elif services.cluster.leader_of(info.topic_id, p) is None:
                # No live owner yet: one is chosen by the ownership leases, not by an election.
                code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election == PREFERRED else \
                    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                results.append(PartitionResult(partition_id=p, error_code=int(code), error_message=None))
            else:
                results.append(PartitionResult(partition_id=p, error_code=int(ErrorCode.ELECTION_NOT_NEEDED),
                                               error_message=NOT_NEEDED))
        out.append(TopicResult(topic=t.topic, partition_result=results))
    return ElectLeadersResponse(replica_election_results=out)
