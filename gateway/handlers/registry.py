"""The Kafka APIs this gateway serves: one line per API, naming its handler and the versions it
narrows the schema's range to. An API is served when, and only when, it has a line here.

Every handler module is imported here, at start-up. One that fails to import raises
HandlerImportError, naming the module and the cause, and the gateway does not start: a gateway
that silently stopped advertising Produce or Fetch would look healthy while serving nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.dispatch import supported_apis
from gateway.errors import HandlerImportError
from gateway.handlers.spec import Handler, HandlerSpec
from kafka_wire.api import API_NAMES


def _failed_import(e: BaseException) -> HandlerImportError:
    """The error naming the handler module whose import raised `e` (the outermost one on the
    traceback: the module this table imports, not the dependency that broke it)."""
    module = getattr(e, "filename", None) if isinstance(e, SyntaxError) else None
    tb = e.__traceback__
    while module is None and tb is not None:
        name = tb.tb_frame.f_globals.get("__name__", "")
        if name.startswith("gateway.handlers.") and name != __name__:
            module = name
        tb = tb.tb_next
    cause = f"{type(e).__name__}: {e}".replace("\n", " ")
    return HandlerImportError(f"handler module {module or 'gateway.handlers'} failed to import ({cause})")


try:
    from gateway.handlers import (
        add_offsets_to_txn,
        add_partitions_to_txn,
        alter_configs,
        api_versions,
        client_quotas,
        consumer_group_describe,
        consumer_group_heartbeat,
        create_partitions,
        create_topics,
        delete_groups,
        delete_records,
        delete_topics,
        describe_cluster,
        describe_configs,
        describe_groups,
        describe_log_dirs,
        describe_producers,
        describe_quorum,
        describe_topic_partitions,
        describe_transactions,
        elect_leaders,
        end_txn,
        fetch,
        find_coordinator,
        heartbeat,
        init_producer_id,
        join_group,
        leave_group,
        list_groups,
        list_offsets,
        list_transactions,
        metadata,
        offset_commit,
        offset_delete,
        offset_fetch,
        offset_for_leader_epoch,
        partition_reassignments,
        produce,
        share_acknowledge,
        share_fetch,
        share_group_describe,
        share_group_heartbeat,
        share_group_offsets,
        sync_group,
        txn_offset_commit,
        update_features,
        write_txn_markers,
    )
except Exception as e:
    raise _failed_import(e) from e


def serve(
    api: str, fn: Handler, *, raw_request: bool = False, min_version: int | None = None,
    max_version: int | None = None, overlaps_durability: bool = False,
) -> HandlerSpec:
    """One line of the table: the API by its Kafka name (kafka_wire.api.API_NAMES)."""
    return HandlerSpec(API_NAMES[api].api_key, fn, raw_request, min_version, max_version, overlaps_durability)


def _table(*specs: HandlerSpec) -> dict[int, HandlerSpec]:
    out: dict[int, HandlerSpec] = {}
    for s in specs:
        if s.api_key in out:
            raise RuntimeError(f"two handlers for API key {s.api_key}: {out[s.api_key].fn} and {s.fn}")
        out[s.api_key] = s
    return out


def _served() -> Mapping[int, tuple[int, int]]:
    return supported_apis(HANDLERS)


HANDLERS: dict[int, HandlerSpec] = _table(
    serve("Produce", produce.handle_produce, raw_request=True, overlaps_durability=True),
    serve("Fetch", fetch.handle_fetch),
    serve("ListOffsets", list_offsets.handle_list_offsets),
    serve("Metadata", metadata.metadata),
    serve("OffsetCommit", offset_commit.offset_commit),
    serve("OffsetFetch", offset_fetch.offset_fetch),
    serve("FindCoordinator", find_coordinator.find_coordinator),
    serve("JoinGroup", join_group.join_group),
    serve("Heartbeat", heartbeat.heartbeat),
    serve("LeaveGroup", leave_group.leave_group),
    serve("SyncGroup", sync_group.sync_group),
    serve("DescribeGroups", describe_groups.describe_groups),
    serve("ListGroups", list_groups.list_groups),
    # v5 (Kafka 4.4, KIP-1242) asks the broker to check the client's ClusterId/NodeId and answer
    # REBOOTSTRAP_REQUIRED on a mismatch; that check is not built, so v5 is not advertised.
    serve("ApiVersions", api_versions.api_versions_handler(_served), max_version=4),
    serve("CreateTopics", create_topics.create_topics),
    serve("DeleteTopics", delete_topics.delete_topics),
    serve("DeleteRecords", delete_records.handle_delete_records),
    serve("InitProducerId", init_producer_id.handle_init_producer_id),
    serve("AddPartitionsToTxn", add_partitions_to_txn.add_partitions_to_txn),
    serve("AddOffsetsToTxn", add_offsets_to_txn.add_offsets_to_txn),
    serve("EndTxn", end_txn.end_txn),
    serve("TxnOffsetCommit", txn_offset_commit.txn_offset_commit),
    serve("DescribeTransactions", describe_transactions.describe_transactions),
    serve("ListTransactions", list_transactions.list_transactions),
    serve("OffsetForLeaderEpoch", offset_for_leader_epoch.handle_offset_for_leader_epoch, min_version=2),
    serve("DescribeConfigs", describe_configs.describe_configs),
    serve("AlterConfigs", alter_configs.alter_configs),
    serve("DescribeLogDirs", describe_log_dirs.describe_log_dirs),
    serve("CreatePartitions", create_partitions.create_partitions),
    serve("DeleteGroups", delete_groups.delete_groups),
    serve("IncrementalAlterConfigs", alter_configs.incremental_alter_configs),
    serve("OffsetDelete", offset_delete.offset_delete),
    serve("DescribeCluster", describe_cluster.describe_cluster),
    serve("DescribeProducers", describe_producers.handle_describe_producers),
    serve("ElectLeaders", elect_leaders.elect_leaders),
    serve("AlterPartitionReassignments", partition_reassignments.alter_partition_reassignments),
    serve("ListPartitionReassignments", partition_reassignments.list_partition_reassignments),
    serve("DescribeClientQuotas", client_quotas.describe_client_quotas),
    serve("DescribeQuorum", describe_quorum.describe_quorum),
    serve("UpdateFeatures", update_features.update_features),
    serve("DescribeTopicPartitions", describe_topic_partitions.describe_topic_partitions),
    serve("WriteTxnMarkers", write_txn_markers.handle_write_txn_markers),
    serve("ConsumerGroupHeartbeat", consumer_group_heartbeat.consumer_group_heartbeat),
    serve("ConsumerGroupDescribe", consumer_group_describe.consumer_group_describe),
    serve("ShareGroupHeartbeat", share_group_heartbeat.share_group_heartbeat),
    serve("ShareGroupDescribe", share_group_describe.share_group_describe),
    serve("ShareFetch", share_fetch.share_fetch),
    serve("ShareAcknowledge", share_acknowledge.share_acknowledge),
    serve("DescribeShareGroupOffsets", share_group_offsets.describe_share_group_offsets),
    serve("AlterShareGroupOffsets", share_group_offsets.alter_share_group_offsets),
    serve("DeleteShareGroupOffsets", share_group_offsets.delete_share_group_offsets),
)
