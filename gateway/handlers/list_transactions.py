"""ListTransactions (v0-2; duration filter v1, transactional-id pattern v2): the transactions of
every shard this gateway coordinates (admin clients ask every gateway)."""

from __future__ import annotations

import re

from coordinator.txn.state import TxnState
from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse

Listed = ListTransactionsResponse.TransactionState


async def list_transactions(ctx: RequestContext, req: ListTransactionsRequest) -> ListTransactionsResponse:
    v = ctx.api_version
    states = set(req.state_filters)
    unknown = [s for s in req.state_filters if TxnState.by_name(s) is None]
    pattern = req.transactional_id_pattern if v >= 2 else None
    if pattern:
        try:
            re.compile(pattern)
        except re.error:
            return ListTransactionsResponse(error_code=int(ErrorCode.INVALID_REGULAR_EXPRESSION))
    try:
        shards = await ctx.services.txn_coordinators().owned_coordinators()
    except KafkaApiError as e:
        return ListTransactionsResponse(error_code=e.error_code)
    if shards is None:
        return ListTransactionsResponse(error_code=int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
    listed = [
        Listed(transactional_id=tid, producer_id=pid, transaction_state=state)
        for c in shards
        for tid, pid, state in c.list_transactions(states, set(req.producer_id_filters),
                                                    req.duration_filter if v >= 1 else -1, pattern)
    ]
    return ListTransactionsResponse(unknown_state_filters=unknown, transaction_states=listed)
