"""Kafka's error codes, names, retriable flags and default messages (as Kafka 4.x's Errors.java).

Retriable is True where Kafka's exception class is a RetriableException (including the
InvalidMetadataException family)."""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple


class ErrorInfo(NamedTuple):
    code: int
    name: str
    retriable: bool
    message: str


class ErrorCode(IntEnum):
    """Kafka error codes, named as in Kafka's Errors.java."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133


# (code, retriable, default message); names come from ErrorCode
_TABLE: tuple[tuple[ErrorCode, bool, str], ...] = (
    (ErrorCode.UNKNOWN_SERVER_ERROR, False, "The server experienced an unexpected error when processing the request."),
    (ErrorCode.NONE, False, ""),
    (ErrorCode.OFFSET_OUT_OF_RANGE, False, "The requested offset is not within the range of offsets maintained by the server."),
    (ErrorCode.CORRUPT_MESSAGE, True, "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt."),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, True, "This server does not host this topic-partition."),
    (ErrorCode.INVALID_FETCH_SIZE, False, "The requested fetch size is invalid."),
    (ErrorCode.LEADER_NOT_AVAILABLE, True, "There is no leader for this topic-partition as we are in the middle of a leadership election."),
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, True, "For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition."),
    (ErrorCode.REQUEST_TIMED_OUT, True, "The request timed out."),
    (ErrorCode.BROKER_NOT_AVAILABLE, False, "The broker is not available."),
    (ErrorCode.REPLICA_NOT_AVAILABLE, True, "The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition."),
    (ErrorCode.MESSAGE_TOO_LARGE, False, "The request included a message larger than the max message size the server will accept."),
    (ErrorCode.STALE_CONTROLLER_EPOCH, False, "The controller moved to another broker."),
    (ErrorCode.OFFSET_METADATA_TOO_LARGE, False, "The metadata field of the offset request was too large."),
    (ErrorCode.NETWORK_EXCEPTION, True, "The server disconnected before a response was received."),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, True, "The coordinator is loading and hence can't process requests."),
    (ErrorCode.COORDINATOR_NOT_AVAILABLE, True, "The coordinator is not available."),
    (ErrorCode.NOT_COORDINATOR, True, "This is not the correct coordinator."),
    (ErrorCode.INVALID_TOPIC_EXCEPTION, False, "The request attempted to perform an operation on an invalid topic."),
    (ErrorCode.RECORD_LIST_TOO_LARGE, False, "The request included message batch larger than the configured segment size on the server."),
    (ErrorCode.NOT_ENOUGH_REPLICAS, True, "Messages are rejected since there are fewer in-sync replicas than required."),
    (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, True, "Messages are written to the log, but to fewer in-sync replicas than required."),
    (ErrorCode.INVALID_REQUIRED_ACKS, False, "Produce request specified an invalid value for required acks."),
    (ErrorCode.ILLEGAL_GENERATION, False, "Specified group generation id is not valid."),
    (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, False, "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list."),
    (ErrorCode.INVALID_GROUP_ID, False, "The group id is invalid."),
    (ErrorCode.UNKNOWN_MEMBER_ID, False, "The coordinator is not aware of this member."),
    (ErrorCode.INVALID_SESSION_TIMEOUT, False, "The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms)."),
    (ErrorCode.REBALANCE_IN_PROGRESS, False, "The group is rebalancing, so a rejoin is needed."),
    (ErrorCode.INVALID_COMMIT_OFFSET_SIZE, False, "The committing offset data size is not valid."),
    (ErrorCode.TOPIC_AUTHORIZATION_FAILED, False, "Topic authorization failed."),
    (ErrorCode.GROUP_AUTHORIZATION_FAILED, False, "Group authorization failed."),
    (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, False, "Cluster authorization failed."),
    (ErrorCode.INVALID_TIMESTAMP, False, "The timestamp of the message is out of acceptable range."),
    (ErrorCode.UNSUPPORTED_SASL_MECHANISM, False, "The broker does not support the requested SASL mechanism."),
    (ErrorCode.ILLEGAL_SASL_STATE, False, "Request is not valid given the current SASL state."),
    (ErrorCode.UNSUPPORTED_VERSION, False, "The version of API is not supported."),
    (ErrorCode.TOPIC_ALREADY_EXISTS, False, "Topic with this name already exists."),
    (ErrorCode.INVALID_PARTITIONS, False, "Number of partitions is below 1."),
    (ErrorCode.INVALID_REPLICATION_FACTOR, False, "Replication factor is below 1 or larger than the number of available brokers."),
    (ErrorCode.INVALID_REPLICA_ASSIGNMENT, False, "Replica assignment is invalid."),
    (ErrorCode.INVALID_CONFIG, False, "Configuration is invalid."),
    (ErrorCode.NOT_CONTROLLER, True, "This is not the correct controller for this cluster."),
    (ErrorCode.INVALID_REQUEST, False, "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details."),
    (ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, False, "The message format version on the broker does not support the request."),
    (ErrorCode.POLICY_VIOLATION, False, "Request parameters do not satisfy the configured policy."),
    (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, False, "The broker received an out of order sequence number."),
    (ErrorCode.DUPLICATE_SEQUENCE_NUMBER, False, "The broker received a duplicate sequence number."),
    (ErrorCode.INVALID_PRODUCER_EPOCH, False, "Producer attempted to produce with an old epoch."),
    (ErrorCode.INVALID_TXN_STATE, False, "The producer attempted a transactional operation in an invalid state."),
    (ErrorCode.INVALID_PRODUCER_ID_MAPPING, False, "The producer attempted to use a producer id which is not currently assigned to its transactional id."),
    (ErrorCode.INVALID_TRANSACTION_TIMEOUT, False, "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms)."),
    (ErrorCode.CONCURRENT_TRANSACTIONS, True, "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing."),
    (ErrorCode.TRANSACTION_COORDINATOR_FENCED, False, "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer."),
    (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, False, "Transactional Id authorization failed."),
    (ErrorCode.SECURITY_DISABLED, False, "Security features are disabled."),
    (ErrorCode.OPERATION_NOT_ATTEMPTED, False, "The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest."),
    (ErrorCode.KAFKA_STORAGE_ERROR, True, "Disk error when trying to access log file on the disk."),
    (ErrorCode.LOG_DIR_NOT_FOUND, False, "The user-specified log directory is not found in the broker config."),
    (ErrorCode.SASL_AUTHENTICATION_FAILED, False, "SASL Authentication failed."),
    (ErrorCode.UNKNOWN_PRODUCER_ID, False, "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception."),
    (ErrorCode.REASSIGNMENT_IN_PROGRESS, False, "A partition reassignment is in progress."),
    (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, False, "Delegation Token feature is not enabled."),
    (ErrorCode.DELEGATION_TOKEN_NOT_FOUND, False, "Delegation Token is not found on server."),
    (ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, False, "Specified Principal is not valid Owner/Renewer."),
    (ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, False, "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels."),
    (ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, False, "Delegation Token authorization failed."),
    (ErrorCode.DELEGATION_TOKEN_EXPIRED, False, "Delegation Token is expired."),
    (ErrorCode.INVALID_PRINCIPAL_TYPE, False, "Supplied principalType is not supported."),
    (ErrorCode.NON_EMPTY_GROUP, False, "The group is not empty."),
    (ErrorCode.GROUP_ID_NOT_FOUND, False, "The group id does not exist."),
    (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, True, "The fetch session ID was not found."),
    (ErrorCode.INVALID_FETCH_SESSION_EPOCH, True, "The fetch session epoch is invalid."),
    (ErrorCode.LISTENER_NOT_FOUND, True, "There is no listener on the leader broker that matches the listener on which metadata request was processed."),
    (ErrorCode.TOPIC_DELETION_DISABLED, False, "Topic deletion is disabled."),
    (ErrorCode.FENCED_LEADER_EPOCH, True, "The leader epoch in the request is older than the epoch on the broker."),
    (ErrorCode.UNKNOWN_LEADER_EPOCH, True, "The leader epoch in the request is newer than the epoch on the broker."),
    (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, False, "The requesting client does not support the compression type of given partition."),
    (ErrorCode.STALE_BROKER_EPOCH, False, "Broker epoch has changed."),
    (ErrorCode.OFFSET_NOT_AVAILABLE, True, "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing."),
    (ErrorCode.MEMBER_ID_REQUIRED, False, "The group member needs to have a valid member id before actually entering a consumer group."),
    (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, True, "The preferred leader was not available."),
    (ErrorCode.GROUP_MAX_SIZE_REACHED, False, "The group has reached its maximum size."),
    (ErrorCode.FENCED_INSTANCE_ID, False, "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id."),
    (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, True, "Eligible topic partition leaders are not available."),
    (ErrorCode.ELECTION_NOT_NEEDED, True, "Leader election not needed for topic partition."),
    (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, False, "No partition reassignment is in progress."),
    (ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, False, "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."),
    (ErrorCode.INVALID_RECORD, False, "This record has failed the validation on broker and hence will be rejected."),
    (ErrorCode.UNSTABLE_OFFSET_COMMIT, True, "There are unstable offsets that need to be cleared."),
    (ErrorCode.THROTTLING_QUOTA_EXCEEDED, True, "The throttling quota has been exceeded."),
    (ErrorCode.PRODUCER_FENCED, False, "There is a newer producer with the same transactionalId which fences the current one."),
    (ErrorCode.RESOURCE_NOT_FOUND, False, "A request illegally referred to a resource that does not exist."),
    (ErrorCode.DUPLICATE_RESOURCE, False, "A request illegally referred to the same resource twice."),
    (ErrorCode.UNACCEPTABLE_CREDENTIAL, False, "Requested credential would not meet criteria for acceptability."),
    (ErrorCode.INCONSISTENT_VOTER_SET, False, "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters."),
    (ErrorCode.INVALID_UPDATE_VERSION, False, "The given update version was invalid."),
    (ErrorCode.FEATURE_UPDATE_FAILED, False, "Unable to update finalized features due to an unexpected server error."),
    (ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE, False, "Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup."),
    (ErrorCode.SNAPSHOT_NOT_FOUND, False, "Requested snapshot was not found."),
    (ErrorCode.POSITION_OUT_OF_RANGE, False, "Requested position is not greater than or equal to zero, and less than the size of the snapshot."),
    (ErrorCode.UNKNOWN_TOPIC_ID, True, "This server does not host this topic ID."),
    (ErrorCode.DUPLICATE_BROKER_REGISTRATION, False, "This broker ID is already in use."),
    (ErrorCode.BROKER_ID_NOT_REGISTERED, False, "The given broker ID was not registered."),
    (ErrorCode.INCONSISTENT_TOPIC_ID, True, "The log's topic ID did not match the topic ID in the request."),
    (ErrorCode.INCONSISTENT_CLUSTER_ID, False, "The clusterId in the request does not match that found on the server."),
    (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, False, "The transactionalId could not be found."),
    (ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, True, "The fetch session encountered inconsistent topic ID usage."),
    (ErrorCode.INELIGIBLE_REPLICA, False, "The new ISR contains at least one ineligible replica."),
    (ErrorCode.NEW_LEADER_ELECTED, False, "The AlterPartition request successfully updated the partition state but the leader has changed."),
    (ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, False, "The requested offset is moved to tiered storage."),
    (ErrorCode.FENCED_MEMBER_EPOCH, False, "The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin."),
    (ErrorCode.UNRELEASED_INSTANCE_ID, False, "The instance ID is still used by another member in the consumer group. That member must leave first."),
    (ErrorCode.UNSUPPORTED_ASSIGNOR, False, "The assignor or its version range is not supported by the consumer group."),
    (ErrorCode.STALE_MEMBER_EPOCH, False, "The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API."),
    (ErrorCode.MISMATCHED_ENDPOINT_TYPE, False, "The request was sent to an endpoint of the wrong type."),
    (ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, False, "This endpoint type is not supported yet."),
    (ErrorCode.UNKNOWN_CONTROLLER_ID, False, "This controller ID is not known."),
    (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, False, "Client sent a push telemetry request with an invalid or outdated subscription ID."),
    (ErrorCode.TELEMETRY_TOO_LARGE, False, "Client sent a push telemetry request larger than the maximum size the broker will accept."),
    (ErrorCode.INVALID_REGISTRATION, False, "The controller has considered the broker registration to be invalid."),
    (ErrorCode.TRANSACTION_ABORTABLE, False, "The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID."),
    (ErrorCode.INVALID_RECORD_STATE, False, "The record state is invalid. The acknowledgement of delivery could not be completed."),
    (ErrorCode.SHARE_SESSION_NOT_FOUND, True, "The share session was not found."),
    (ErrorCode.INVALID_SHARE_SESSION_EPOCH, True, "The share session epoch is invalid."),
    (ErrorCode.FENCED_STATE_EPOCH, False, "The share coordinator rejected the request because the share-group state epoch did not match."),
    (ErrorCode.INVALID_VOTER_KEY, False, "The voter key doesn't match the receiving replica's key."),
    (ErrorCode.DUPLICATE_VOTER, False, "The voter is already part of the set of voters."),
    (ErrorCode.VOTER_NOT_FOUND, False, "The voter is not part of the set of voters."),
    (ErrorCode.INVALID_REGULAR_EXPRESSION, False, "The regular expression is not valid."),
    (ErrorCode.REBOOTSTRAP_REQUIRED, False, "Client metadata is stale. The client should rebootstrap to obtain new metadata."),
    (ErrorCode.STREAMS_INVALID_TOPOLOGY, False, "The supplied topology is invalid."),
    (ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH, False, "The supplied topology epoch is invalid."),
    (ErrorCode.STREAMS_TOPOLOGY_FENCED, False, "The supplied topology epoch is outdated."),
    (ErrorCode.SHARE_SESSION_LIMIT_REACHED, True, "The limit of share sessions has been reached."),
)

_INFO: dict[int, ErrorInfo] = {int(c): ErrorInfo(int(c), c.name, retr, msg) for c, retr, msg in _TABLE}


def error_info(code: int) -> ErrorInfo:
    """Info for a code; an unknown code maps to UNKNOWN_SERVER_ERROR as Kafka's clients do, keeping
    the code."""
    info = _INFO.get(int(code))
    if info is not None:
        return info
    unknown = _INFO[-1]
    return ErrorInfo(int(code), unknown.name, False, f"Unknown error code {code}")


def is_retriable(code: int) -> bool:
    return error_info(code).retriable
