"""Differential runs: edge-case error codes and ListOffsets answers, the same raw requests
against Apache Kafka and Quire (see known_differences.toml for the allowed differences)."""

from __future__ import annotations

import time

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.txn_wire import Txn
from compat_tests.support.wire import Wire, batch

pytestmark = pytest.mark.compat(suite="differential", client="raw protocol")


def unknown_topic_and_partition(bootstrap: str) -> Observations:
    topic, missing = unique("d-unk"), unique("d-missing")
    with Wire(bootstrap) as w:
        w.create(topic, partitions=2)
        md = w.metadata([missing], auto_create=False).topics[0]
        fetch_missing = w.fetch(missing, 0, 0)
        return {
            "metadata.unknown_topic": int(md.error_code),
            "produce.unknown_topic": w.produce(missing, 0, batch(1))[0],
            "produce.unknown_partition": w.produce(topic, 7, batch(1))[0],
            "produce.negative_partition": w.produce(topic, -1, batch(1))[0],
            "fetch.unknown_topic": int(fetch_missing.error_code),
            "fetch.unknown_partition": int(w.fetch(topic, 9, 0).error_code),
            "list_offsets.unknown_topic": w.list_offset(missing, 0, -1)[0],
            "list_offsets.unknown_partition": w.list_offset(topic, 5, -1)[0],
            # A metadata request for an unknown topic must not have created it.
            "metadata.still_unknown": int(w.metadata([missing], auto_create=False).topics[0].error_code),
        }


def bad_offsets_and_list_offsets(bootstrap: str) -> Observations:
    topic = unique("d-off")
    t0 = int(time.time() * 1000) - 60_000
    with Wire(bootstrap) as w:
        w.create(topic)
        empty = {f"empty.list_offsets.{name}": w.list_offset(topic, 0, ts)[:2]
                 for name, ts in (("earliest", -2), ("latest", -1), ("max_timestamp", -3), ("ts0", 0))}
        acks = [w.produce(topic, 0, batch(5, timestamp=t0 + 1000 * i)) for i in range(3)]
        out: Observations = {"produce.acks": acks, **empty}
        for name, ts in (("earliest", -2), ("latest", -1), ("max_timestamp", -3), ("ts_before_all", t0 - 1),
                         ("ts_first", t0), ("ts_between", t0 + 500), ("ts_third", t0 + 2000),
                         ("ts_after_all", t0 + 10_000)):
            err, offset, stamp = w.list_offset(topic, 0, ts)
            out[f"list_offsets.{name}"] = (err, offset, stamp - t0 if stamp >= 0 else stamp)
        for name, offset in (("at_hw", 15), ("past_hw", 16), ("far_past_hw", 10_000), ("negative", -1),
                             ("inside_batch", 7)):
            part = w.fetch(topic, 0, offset)
            out[f"fetch.{name}"] = (int(part.error_code), int(part.high_watermark), int(part.log_start_offset),
                                    bytes(part.records or b"")[:8] != b"" and int.from_bytes(bytes(part.records)[:8], "big"))
        return out


def too_large_messages(bootstrap: str) -> Observations:
    topic = unique("d-big")
    with Wire(bootstrap) as w:
        w.create(topic, configs={"max.message.bytes": "2000"})
        return {
            "produce.fits": w.produce(topic, 0, batch(1, size=1000)),
            "produce.too_large_one_record": w.produce(topic, 0, batch(1, size=5000))[0],
            "produce.too_large_many_records": w.produce(topic, 0, batch(40, size=100))[0],
            "produce.after": w.produce(topic, 0, batch(1, size=10)),
        }


def invalid_topics_and_configs(bootstrap: str) -> Observations:
    base = unique("d-cfg")
    with Wire(bootstrap) as w:
        w.create(base)
        cases = {
            "slash_in_name": (f"{base}/x", 1, -1, {}),
            "name_too_long": ("x" * 250, 1, -1, {}),
            "dot": (".", 1, -1, {}),
            "dotdot": ("..", 1, -1, {}),
            "empty_name": ("", 1, -1, {}),
            "exists": (base, 1, -1, {}),
            "zero_partitions": (f"{base}-p0", 0, -1, {}),
            "negative_partitions": (f"{base}-pn", -5, -1, {}),
            "unknown_config": (f"{base}-c1", 1, -1, {"no.such.config": "1"}),
            "bad_int_config": (f"{base}-c2", 1, -1, {"retention.ms": "soon"}),
            "bad_enum_config": (f"{base}-c3", 1, -1, {"cleanup.policy": "sometimes"}),
            "bad_range_config": (f"{base}-c4", 1, -1, {"min.insync.replicas": "0"}),
            "bad_bool_config": (f"{base}-c5", 1, -1, {"unclean.leader.election.enable": "maybe"}),
        }
        out: Observations = {f"create.{k}": w.create_topics(v)[v[0]] for k, v in cases.items()}
        valid = f"{base}-validate"
        out["create.validate_only"] = w.create_topics((valid, 3, -1, {"retention.ms": "1000"}), validate_only=True)[valid]
        out["validate_only.created"] = int(w.metadata([valid]).topics[0].error_code)
        from compat_tests.support.wire import INCREMENTAL_ALTER_CONFIGS, TOPIC_RESOURCE
        from kafka_wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IAC

        def alter(name: str, value: str | None, op: int = 0, topic: str = base) -> int:
            r = w.call(INCREMENTAL_ALTER_CONFIGS, IAC(resources=[IAC.AlterConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=topic,
                configs=[IAC.AlterableConfig(name=name, config_operation=op, value=value)])]))
            return int(r.responses[0].error_code)

        out["alter.ok"] = alter("retention.ms", "7200000")
        out["alter.bad_value"] = alter("retention.ms", "later")
        out["alter.unknown_config"] = alter("no.such.config", "1")
        out["alter.unknown_topic"] = alter("retention.ms", "1000", topic=f"{base}-nope")
        out["alter.delete_default"] = alter("retention.ms", None, op=1)
        return out


def idempotent_sequences(bootstrap: str) -> Observations:
    topic = unique("d-seq")
    with Wire(bootstrap) as w:
        w.create(topic)
        err, pid, epoch = w.init_producer_id()
        out: Observations = {"init_producer_id": (err, pid >= 0, epoch)}

        def send(seq: int, n: int = 3, e: int = epoch, p: int = pid) -> tuple[int, int]:
            return w.produce(topic, 0, batch(n, producer_id=p, producer_epoch=e, base_sequence=seq))

        out["seq0"] = send(0)
        out["gap"] = send(5)[0]
        out["duplicate_last"] = send(0)
        out["seq3"] = send(3)
        out["duplicate_older"] = send(0)
        out["out_of_order_back"] = send(1)[0]
        out["old_epoch"] = send(6, e=epoch - 1)[0] if epoch > 0 else "n/a"
        out["new_epoch_nonzero_seq"] = send(4, e=epoch + 1)[0]
        out["unknown_producer_nonzero_seq"] = send(3, p=pid + 1000)[0]
        out["unknown_producer_seq0"] = send(0, p=pid + 1001)[0]
        out["end_offset"] = w.list_offset(topic, 0, -1)[:2]
        return out


def produce_to_internal_topics(bootstrap: str) -> Observations:
    """Internal topics refuse a client's appends (only Kafka's admin client id may write them)."""
    with Wire(bootstrap) as w:
        assert w.find_coordinator(unique("d-int-g"))[0] == 0
        assert Txn(w, unique("d-int-t")).find() == 0  # both topics exist from here on
        out: Observations = {}
        for topic in ("__consumer_offsets", "__transaction_state"):
            parts = len(w.metadata([topic]).topics[0].partitions)
            out[f"{topic}.partition_0"] = w.produce(topic, 0, batch(1))
            out[f"{topic}.last_partition"] = w.produce(topic, parts - 1, batch(1))
            out[f"{topic}.unknown_partition"] = w.produce(topic, parts, batch(1))[0]
        return out


SCENARIOS = {
    "unknown_topic_and_partition": unknown_topic_and_partition,
    "bad_offsets_and_list_offsets": bad_offsets_and_list_offsets,
    "too_large_messages": too_large_messages,
    "invalid_topics_and_configs": invalid_topics_and_configs,
    "idempotent_sequences": idempotent_sequences,
    "produce_to_internal_topics": produce_to_internal_topics,
}


def test_unknown_topic_and_partition(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, unknown_topic_and_partition)


def test_bad_offsets_and_list_offsets(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, bad_offsets_and_list_offsets)


def test_too_large_messages(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, too_large_messages)


def test_invalid_topics_and_configs(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, invalid_topics_and_configs)


def test_idempotent_sequences(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, idempotent_sequences)


def test_produce_to_internal_topics(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, produce_to_internal_topics)
