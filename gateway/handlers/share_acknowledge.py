"""ShareAcknowledge (v1-2): acknowledgements of a share session's acquired records, without
fetching; epoch -1 also closes the session (what a closing KafkaShareConsumer sends)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.partition.lookup import TopicCache
from gateway.shares import FINAL_EPOCH, INITIAL_EPOCH, acknowledge, release_session
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.share_acknowledge import ShareAcknowledgeRequest, ShareAcknowledgeResponse

Resp = ShareAcknowledgeResponse


async def share_acknowledge(ctx: RequestContext, req: ShareAcknowledgeRequest) -> Resp:
    if not req.group_id:
        return Resp(error_code=ErrorCode.INVALID_REQUEST, error_message="GroupId must be set")
    if not req.member_id:
        return Resp(error_code=ErrorCode.INVALID_REQUEST, error_message="MemberId must be set")
    if req.share_session_epoch == INITIAL_EPOCH:
        return Resp(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                    error_message="ShareAcknowledge cannot open a share session")
    shares = ctx.services.share_partitions()
    try:
        session = shares.session(req.group_id, req.member_id, req.share_session_epoch)
    except KafkaApiError as e:
        return Resp(error_code=e.error_code, error_message=e.message)
    cache = TopicCache(ctx.services.topics, ctx.services.partitions)
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, msg = await acknowledge(shares, cache, req.group_id, req.member_id, t.topic_id, p.partition_index,
                                          p.acknowledgement_batches)
            parts.append(Resp.PartitionData(partition_index=p.partition_index, error_code=code, error_message=msg,
                                            current_leader=Resp.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)))
        topics.append(Resp.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=parts))
    if req.share_session_epoch == FINAL_EPOCH:
        release_session(shares, session)
    config = await shares.config_in_force(req.group_id, session.partitions)
    return Resp(acquisition_lock_timeout_ms=config.record_lock_duration_ms, responses=topics)
