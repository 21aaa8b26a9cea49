"""Kafka's `__transaction_state` records, so a shard's log reads like Kafka's own transaction
log. The codecs are generated from kafka-transaction-coordinator's TransactionLogKey/Value
(kafka_wire/codegen/jars.py); this module adds what the schemas leave to the coordinator: a key
and a value each start with their int16 version, a null value is a tombstone (an expired
transactional id), the partitions of an Empty transaction are null, and values are written at
v1 (flexible, with the tagged producer-id and client transaction-version fields) as Kafka 4.4
does. Version 0 values are read too."""

from __future__ import annotations

import struct
from collections import defaultdict

from coordinator.txn.state import TxnMetadata, TxnState
from kafka_wire.api import decode_versioned, encode_versioned
from kafka_wire.exceptions import DecodeError
from kafka_wire.messages.transaction_log_key import TransactionLogKey
from kafka_wire.messages.transaction_log_value import TransactionLogValue

_KEY_VERSION = 0
_VALUE_VERSION = 1
_VERSION = struct.Struct(">h")
Partitions = TransactionLogValue.PartitionsSchema


def encode_key(transactional_id: str) -> bytes:
    return _VERSION.pack(_KEY_VERSION) + TransactionLogKey(transactional_id=transactional_id).encode(_KEY_VERSION)


def decode_key(data: bytes | memoryview) -> str:
    b = memoryview(data)
    if len(b) < 2:
        raise DecodeError("truncated key version", "__transaction_state key", 0)
    (version,) = _VERSION.unpack_from(b)
    if version != _KEY_VERSION:
        raise DecodeError(f"unknown key version {version}", "__transaction_state key", 0)
    return TransactionLogKey.decode(b[2:], _KEY_VERSION).transactional_id


def encode_value(txn: TxnMetadata) -> bytes:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, p in sorted(txn.partitions):
        by_topic[topic].append(p)
    partitions = (
        None if txn.state is TxnState.EMPTY
        else [Partitions(topic=t, partition_ids=ps) for t, ps in by_topic.items()]
    )
    v = TransactionLogValue(
        producer_id=txn.producer_id,
        previous_producer_id=txn.previous_producer_id,
        next_producer_id=txn.next_producer_id,
        producer_epoch=txn.producer_epoch,
        next_producer_epoch=-1,
        transaction_timeout_ms=txn.timeout_ms,
        transaction_status=txn.state.id,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=txn.last_update_ms,
        transaction_start_timestamp_ms=txn.start_ms,
        client_transaction_version=txn.client_version,
    )
    return encode_versioned(v, _VALUE_VERSION)


def decode_value(transactional_id: str, data: bytes | memoryview) -> TxnMetadata:
    _, v = decode_versioned(TransactionLogValue, data)
    assert isinstance(v, TransactionLogValue)
    return TxnMetadata(
        transactional_id=transactional_id,
        producer_id=v.producer_id,
        previous_producer_id=v.previous_producer_id,
        next_producer_id=v.next_producer_id,
        producer_epoch=v.producer_epoch,
        last_producer_epoch=-1,
        timeout_ms=v.transaction_timeout_ms,
        state=TxnState.by_id(v.transaction_status),
        partitions={(p.topic, i) for p in v.transaction_partitions or [] for i in p.partition_ids},
        start_ms=v.transaction_start_timestamp_ms,
        last_update_ms=v.transaction_last_update_timestamp_ms,
        client_version=v.client_transaction_version,
    )
