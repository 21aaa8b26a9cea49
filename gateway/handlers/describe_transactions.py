"""DescribeTransactions (v0): each transactional id's state at its coordinator (admin clients
send each id to its coordinator)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from kafka_wire.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)

State = DescribeTransactionsResponse.TransactionState
TopicData = DescribeTransactionsResponse.TopicData


async def describe_transactions(
    ctx: RequestContext, req: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    out = []
    for tid in req.transactional_ids:
        try:
            d = (await ctx.services.txn_coordinators().coordinator_for(tid)).describe(tid)
        except KafkaApiError as e:
            out.append(State(error_code=e.error_code, transactional_id=tid))
            continue
        topics: dict[str, list[int]] = {}
        for t, p in d.partitions or []:
            topics.setdefault(t, []).append(p)
        out.append(State(
            error_code=d.error, transactional_id=tid, transaction_state=d.state,
            transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_ms,
            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
            topics=[TopicData(topic=t, partitions=ps) for t, ps in topics.items()],
        ))
    return DescribeTransactionsResponse(transaction_states=out)
