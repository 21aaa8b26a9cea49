"""Quire's internal import request: how `quire migrate` appends batches copied from a Kafka
cluster at their original offsets.

It is a Produce request (v9+, flexible) whose request header carries the private tagged field
IMPORT_TAG; no Kafka client sends it. A gateway honours it only when started with
`quire.import.enable` (default off) and otherwise refuses it: an ordinary produce would
reassign the offsets. On the partition owner each batch is appended as one entry keeping its
base offset (gaps stay gaps), never below the partition's current end (PartitionLog.import_batches).
The job reads the partition's end, then imports from there, so a re-run resumes.

The tag's value may carry the offset the log must end at for the import to apply (8 bytes,
big-endian): the job pipelines several imports per partition, and a refused one must refuse
every later one too, or a later import would land beyond it, leaving its offsets a hole.
"""

from __future__ import annotations

import struct

from kafka_wire.primitives import TaggedFields

IMPORT_TAG = 0x5149  # "QI": far above the tags Kafka's request header may ever define
IMPORT_MIN_PRODUCE_VERSION = 9  # the first flexible Produce version: its header has tagged fields
IMPORT_DISABLED = "imports are disabled on this gateway: start it with quire.import.enable=true (--import-enable)"


_END = struct.Struct(">q")


def import_tags(expected_end: int | None = None) -> TaggedFields:
    """The request-header tagged fields marking a Produce request as an import; with
    `expected_end`, it applies only if the partition's log then ends exactly there."""
    return ((IMPORT_TAG, b"\x01" if expected_end is None else _END.pack(expected_end)),)


def is_import(tags: TaggedFields) -> bool:
    return any(tag == IMPORT_TAG for tag, _ in tags)


def import_expected_end(tags: TaggedFields) -> int | None:
    """The log end an import requires (None: any end at or below its first batch)."""
    for tag, value in tags:
        if tag == IMPORT_TAG and len(value) == _END.size:
            return int(_END.unpack(value)[0])
    return None
