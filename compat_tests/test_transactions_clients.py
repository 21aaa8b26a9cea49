"""Transactions with unchanged clients: the Java client (kafka-clients 4.4.0, the harness's txn
command), confluent-kafka, kafka-python and aiokafka: commit, abort, read_committed consumers
seeing committed records only, fencing by a second producer with the same transactional.id, consume-transform-produce with
sendOffsetsToTransaction, a transaction the coordinator aborts on its timeout (each for every client;
confluent-kafka's sendOffsetsToTransaction is in tests/faults/txn_loop.py), and Kafka's
kafka-transactions tool (TransactionsCommand: list, describe, describe-producers, abort)."""

from __future__ import annotations

import shutil
import time
from typing import Any

import pytest

from compat_tests.support import kafka_dist
from compat_tests.support.clients import create_topic, unique
from compat_tests.support.java_harness import one, only, run_harness
from compat_tests.support.targets import Target
from compat_tests.support.txn_wire import Txn
from compat_tests.support.wire import Wire
from coordinator.group.hashing import shard_for
from coordinator.txn.config import TRANSACTION_STATE_TOPIC
from coordinator.txn.records import encode_key, encode_value
from coordinator.txn.state import TxnMetadata, TxnState
from kafka_wire.records import NewRecord, build_batch, iter_batches

java = pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")
BOTH = pytest.mark.parametrize("target", ["standalone", "cluster"], indirect=True)


def read(target: Target, topic: str, isolation: str = "read_committed") -> list[str]:
    return list(one(run_harness("txn", mode="read", bootstrap=target.bootstrap, topic=topic, isolation=isolation),
                    "read")["values"])


@java
@pytest.mark.compat(suite="transactions", client="java-client")
@BOTH
def test_commit_and_abort_seen_by_read_committed(target: Target) -> None:
    topic, txn = unique("jt-ca"), unique("jt-id")
    create_topic(target.bootstrap, topic, partitions=3)
    run_harness("txn", mode="commit", bootstrap=target.bootstrap, topic=topic, partitions=3, count=30, txn=txn,
                prefix="c1-")
    run_harness("txn", mode="abort", bootstrap=target.bootstrap, topic=topic, partitions=3, count=20, txn=txn)
    run_harness("txn", mode="commit", bootstrap=target.bootstrap, topic=topic, partitions=3, count=9, txn=txn,
                prefix="c2-")
    committed = sorted(read(target, topic))
    assert committed == sorted([f"c1-{i}" for i in range(30)] + [f"c2-{i}" for i in range(9)])
    everything = read(target, topic, "read_uncommitted")
    assert sorted(everything) == sorted(committed + [f"a-{i}" for i in range(20)])


@java
@pytest.mark.compat(suite="transactions", client="java-client")
@BOTH
def test_second_producer_fences_the_first(target: Target) -> None:
    topic, txn = unique("jt-fence"), unique("jt-id")
    create_topic(target.bootstrap, topic)
    events = run_harness("txn", mode="fence", bootstrap=target.bootstrap, topic=topic, txn=txn)
    failed = one(events, "first_failed")
    # the zombie's next write meets the bumped epoch (as on Kafka: INVALID_PRODUCER_EPOCH from the
    # partition, or PRODUCER_FENCED from the coordinator)
    assert failed["root"] in ("org.apache.kafka.common.errors.ProducerFencedException",
                              "org.apache.kafka.common.errors.InvalidProducerEpochException")
    assert only(events, "second_committed") and not only(events, "first_committed")
    # the zombie's open transaction was aborted when the second producer initialized
    assert read(target, topic) == ["second-0", "second-1"]


@java
@pytest.mark.compat(suite="transactions", client="java-client")
@BOTH
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consume_transform_produce_with_offsets(target: Target, protocol: str) -> None:
    src, out, group = unique("jt-src"), unique("jt-out"), unique("jt-g")
    create_topic(target.bootstrap, src, partitions=2)
    create_topic(target.bootstrap, out, partitions=2)
    run_harness("txn", mode="commit", bootstrap=target.bootstrap, topic=src, partitions=2, count=10,
                txn=unique("jt-src-id"), prefix="v-")
    # an aborted round leaves neither output nor group offsets behind
    events = run_harness("txn", mode="offsets", bootstrap=target.bootstrap, topic=src, out=out, group=group,
                         count=10, txn=unique("jt-ctp"), end="abort", protocol=protocol)
    assert one(events, "group_offsets")["offsets"] == {}
    assert read(target, out) == []
    events = run_harness("txn", mode="offsets", bootstrap=target.bootstrap, topic=src, out=out, group=group,
                         count=10, txn=unique("jt-ctp"), end="commit", protocol=protocol)
    assert one(events, "group_offsets")["offsets"] == {"0": 5, "1": 5}
    assert sorted(read(target, out)) == sorted(f"V-{i}" for i in range(10))


@java
@pytest.mark.compat(suite="transactions", client="java-client")
def test_coordinator_aborts_a_timed_out_transaction(target: Target) -> None:
    topic, txn = unique("jt-to"), unique("jt-id")
    create_topic(target.bootstrap, topic)
    events = run_harness("txn", mode="timeout", bootstrap=target.bootstrap, topic=topic, txn=txn,
                         transaction_timeout_ms=1000)
    assert only(events, "coordinator_aborted") and not only(events, "committed")
    assert one(events, "failed")["type"].endswith(("ProducerFencedException", "InvalidProducerEpochException",
                                                    "KafkaException", "ExecutionException"))
    assert read(target, topic) == []


@pytest.mark.compat(suite="transactions", client="confluent-kafka")
@BOTH
def test_confluent_transactional_producer(target: Target) -> None:
    from confluent_kafka import Producer

    topic = unique("ck-txn")
    create_topic(target.bootstrap, topic, partitions=2)
    p = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": unique("ck-id")})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"c-{i}".encode(), partition=i % 2)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=f"a-{i}".encode(), partition=i % 2)
    p.flush(60)
    p.abort_transaction(60)
    assert sorted(read(target, topic)) == sorted(f"c-{i}" for i in range(10))


def table(out: str) -> list[dict[str, str]]:
    """A kafka-transactions table (tab-separated, a header line) as rows."""
    lines = [ln for ln in out.splitlines() if ln.strip()]
    head = [h.strip() for h in lines[0].split("\t") if h.strip()]
    return [dict(zip(head, (c.strip() for c in ln.split("\t")), strict=False)) for ln in lines[1:]]


@java
@pytest.mark.compat(suite="transactions", client="kafka-transactions")
@BOTH
def test_transactions_command_on_a_hanging_transaction(target: Target) -> None:
    topic, tid = unique("jt-hang"), unique("jt-hang-id")
    create_topic(target.bootstrap, topic)

    def tool(*args: str) -> str:
        return kafka_dist.run_tool("kafka-transactions", ["--bootstrap-server", target.bootstrap, *args]).stdout

    # a transaction whose producer went away after writing (nothing will end it but its timeout)
    with Wire(target.first) as w:
        err, coordinator = Txn(w, tid).find_coordinator()
        assert err == 0
    with Wire(coordinator) as w:
        t = Txn(w, tid)
        assert t.init(timeout_ms=600_000)[0] == 0
        assert t.add({topic: [0]}) == {"topic0": [0]}
    with Wire(target.bootstrap) as w:  # the partition's owner, once metadata names it
        deadline = time.monotonic() + 30
        while True:
            md = w.metadata([topic])
            leader = md.topics[0].partitions[0].leader_id if md.topics[0].partitions else -1
            node = next((b for b in md.brokers if b.node_id == leader), None)
            if node is not None or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert node is not None, f"{topic}: no leader"
    with Wire(f"{node.host}:{node.port}") as w:
        t2 = Txn(w, tid)
        t2.pid, t2.epoch = t.pid, t.epoch
        assert t2.produce(topic, 0, 0) == 0
    listed = [r for r in table(tool("list")) if r["TransactionalId"] == tid]
    assert [(r["ProducerId"], r["TransactionState"]) for r in listed] == [(str(t.pid), "Ongoing")]
    (desc,) = table(tool("describe", "--transactional-id", tid))
    assert (desc["ProducerId"], desc["TransactionState"], desc["TransactionTimeoutMs"], desc["TopicPartitions"]) == (
        str(t.pid), "Ongoing", "600000", f"{topic}-0")
    (prod,) = table(tool("describe-producers", "--topic", topic, "--partition", "0"))
    assert (prod["ProducerId"], prod["CurrentTransactionStartOffset"]) == (str(t.pid), "0")
    # the operator aborts it on the partition: the ABORT marker closes it, read_committed moves on
    tool("abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    (prod,) = table(tool("describe-producers", "--topic", topic, "--partition", "0"))
    assert prod["CurrentTransactionStartOffset"] == "None"
    assert read(target, topic) == []


@pytest.mark.compat(suite="transactions", client="kafka-python")
@BOTH
def test_kafka_python_transactional_producer(target: Target) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = unique("kp-txn")
    create_topic(target.bootstrap, topic, partitions=2)
    p = KafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=unique("kp-id"))
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(10):
            p.send(topic, value=f"c-{i}".encode(), partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(4):
            p.send(topic, value=f"a-{i}".encode(), partition=i % 2)
        p.flush()
        p.abort_transaction()
    finally:
        p.close()
    c = KafkaConsumer(bootstrap_servers=target.bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=20000)
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        c.assign(tps)
        ends = c.end_offsets(tps)  # the last stable offsets
        got = []
        for m in c:
            got.append(m.value.decode())
            if all(c.position(tp) >= ends[tp] for tp in tps):
                break
    finally:
        c.close()
    assert sorted(got) == sorted(f"c-{i}" for i in range(10))
    assert sorted(read(target, topic)) == sorted(got)


@pytest.mark.compat(suite="transactions", client="aiokafka")
@BOTH
def test_aiokafka_transactional_producer(target: Target) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    topic = unique("ak-txn")
    create_topic(target.bootstrap, topic, partitions=2)

    async def produce() -> None:
        p = AIOKafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=unique("ak-id"))
        await p.start()
        try:
            async with p.transaction():
                for i in range(8):
                    await p.send(topic, value=f"c-{i}".encode(), partition=i % 2)
            await p.begin_transaction()
            for i in range(3):
                await p.send_and_wait(topic, value=f"a-{i}".encode(), partition=i % 2)
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(produce())
    assert sorted(read(target, topic)) == sorted(f"c-{i}" for i in range(8))


def _exhaust_epoch(bootstrap: str, tid: str, epoch: int) -> int:
    """Make `tid`'s transaction state say `epoch` (as after ~32,000 transactions): a record
    appended to its `__transaction_state` partition, read by the coordinator at its next load
    (the caller restarts the gateway). Returns the producer id. Kafka's admin client id: the only
    one allowed to append to an internal topic."""
    with Wire(bootstrap, client_id="__admin_client") as w:
        t = Txn(w, tid)
        assert t.find() == 0
        assert t.init()[0] == 0
        parts = len(w.metadata([TRANSACTION_STATE_TOPIC]).topics[0].partitions)
        now = int(time.time() * 1000)
        state = TxnMetadata(tid, t.pid, producer_epoch=epoch, state=TxnState.EMPTY, last_update_ms=now,
                            client_version=2)
        batch = build_batch([NewRecord(encode_key(tid), encode_value(state))])
        assert w.produce(TRANSACTION_STATE_TOPIC, shard_for(tid, parts), batch)[0] == 0
        return t.pid


def _rotated(bootstrap: str, tid: str) -> tuple[str, int, int]:
    with Wire(bootstrap) as w:
        d = Txn(w, tid).describe()
        return str(d.transaction_state), int(d.producer_id), int(d.producer_epoch)


@java
@pytest.mark.compat(suite="transactions", client="java-client")
def test_producer_id_rotates_when_tv2_exhausts_the_epoch(standalone_factory: Any) -> None:
    """Transaction version 2 bumps the epoch per commit: a producer whose id reaches the last
    epoch (Short.MAX_VALUE - 1) gets a new producer id from that commit's EndTxn and goes on
    with it, unchanged (kafka-clients 4.4); read_committed sees every record. (confluent-kafka
    2.16 ends transactions at transaction version 1, where the epoch does not move per commit.)"""
    gw = standalone_factory()
    topic, tid = unique("txn-rot"), unique("txn-rot-id")
    create_topic(gw.bootstrap, topic, partitions=2)
    # the producer's initialization takes it to MAX - 2, its first commit to MAX - 1, the
    # second rotates, the third runs under the new id
    old_pid = _exhaust_epoch(gw.bootstrap, tid, (1 << 15) - 4)
    gw.stop()
    gw.start()  # the coordinator loads the shard: this id at MAX - 3
    events = run_harness("txn", mode="bench", bootstrap=gw.bootstrap, topic=topic, count=30, size=8,
                         txn=tid, **{"txn.size": 10})
    assert one(events, "bench")["transactions"] == 3
    state, pid, epoch = _rotated(gw.bootstrap, tid)
    assert state == "CompleteCommit" and pid != old_pid and epoch == 1, (state, pid, epoch)
    target = Target("standalone", gw.bootstrap)
    assert read(target, topic) == ["x" * 8] * 30
    assert read(target, topic, "read_uncommitted") == ["x" * 8] * 30


def _batches(bootstrap: str, topic: str) -> list[tuple[int, bool, int]]:
    """(base offset, control, record count) of every batch of partition 0, as stored."""
    out: list[tuple[int, bool, int]] = []
    with Wire(bootstrap) as w:
        offset = 0
        while True:
            p = w.fetch(topic, 0, offset)
            assert p.error_code == 0, p.error_code
            got = list(iter_batches(bytes(p.records or b"")))
            out += [(b.base_offset, b.is_control, b.record_count) for b in got if b.base_offset >= offset]
            if not got or got[-1].last_offset + 1 >= p.high_watermark:
                return out
            offset = got[-1].last_offset + 1


@pytest.mark.compat(suite="transactions", client="java-client, confluent-kafka")
@java
def test_cleaned_compacted_topic_with_transactions_read_committed(standalone_factory: Any) -> None:
    """A compacted topic written in transactions of one producer (commit, abort, commit, abort,
    commit over the same keys): the cleaner removes the aborted records, the superseded ones,
    and then, past delete.retention.ms, the markers of transactions with nothing left (Kafka's
    LogCleaner), keeping offsets; read_committed Java (4.4) and confluent-kafka consumers from
    the start read exactly the latest committed values (an abort whose marker went must not
    hide the producer's later commits)."""
    gw = standalone_factory(extra_args=["--log-cleaner-backoff-ms", "200"])
    topic, tid = unique("txn-compact"), unique("txn-compact-id")
    with Wire(gw.bootstrap) as w:
        w.create(topic, configs={"cleanup.policy": "compact", "segment.ms": "300",
                                 "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
    for mode, count, prefix in (("commit", 4, "a"), ("abort", 4, "x"), ("commit", 2, "c"), ("abort", 3, "y"),
                                ("commit", 4, "e")):
        run_harness("txn", mode=mode, bootstrap=gw.bootstrap, topic=topic, count=count, txn=tid, prefix=prefix)
    markers = [b for b, control, _ in _batches(gw.bootstrap, topic) if control]
    assert len(markers) == 5
    from confluent_kafka import Producer

    pad = Producer({"bootstrap.servers": gw.bootstrap, "linger.ms": 0})
    deadline = time.monotonic() + 150
    n = 0
    while True:  # the event: the cleaner's passes left what Kafka's would
        by_offset = {b: (control, count) for b, control, count in _batches(gw.bootstrap, topic)}
        left = [by_offset[m][1] for m in markers]
        data = {b: c for b, (control, c) in by_offset.items() if not control and b < markers[-1]}
        if left == [0, 0, 0, 0, 1] and sum(data.values()) == 4:
            break
        assert time.monotonic() < deadline, (left, data)
        # later writes roll ledgers past the transactions (the open ledger is not cleaned)
        pad.produce(topic, f"pad-{n}".encode(), key=b"pad")
        pad.flush(30)
        n += 1
        time.sleep(0.2)
    expected = [f"e{i}" for i in range(4)]  # (and the pads, compacted or not yet)

    def txn_values(values: list[str]) -> list[str]:
        return sorted(v for v in values if not v.startswith("pad-"))

    target = Target("standalone", gw.bootstrap)
    # Java 4.4 read_committed / read_uncommitted, from the start of the cleaned log
    assert txn_values(read(target, topic)) == expected
    assert txn_values(read(target, topic, "read_uncommitted")) == expected
    # confluent-kafka read_committed from the start
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": unique("g"), "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    got: list[str] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        while True:
            m = c.poll(10)
            assert m is not None, "no end of partition"
            if m.error():
                break
            got.append(m.value().decode())
    finally:
        c.close()
    assert txn_values(got) == expected


STANDALONE = pytest.mark.parametrize("target", ["standalone"], indirect=True)


def _describe(bootstrap: str, tid: str) -> tuple[str, int]:
    with Wire(bootstrap) as w:
        d = Txn(w, tid).describe()
        return str(d.transaction_state), int(d.producer_epoch)


def _wait_coordinator_abort(bootstrap: str, tid: str) -> None:
    """The event: the coordinator aborted `tid`'s open transaction on its timeout (Kafka bumps
    the epoch, fencing the producer's next EndTxn)."""
    state, epoch = _describe(bootstrap, tid)
    assert state == "Ongoing", state
    deadline = time.monotonic() + 30
    while True:
        got = _describe(bootstrap, tid)
        if got[0] in ("CompleteAbort", "Empty") and got[1] > epoch:
            return
        assert time.monotonic() < deadline, (got, epoch)
        time.sleep(0.05)


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    """The group's committed offsets once stable: a read_committed consumer asks with
    require_stable (KIP-447), so offsets of a transaction whose commit markers the coordinator
    is still writing come back UNSTABLE_OFFSET_COMMIT (retried), not as the offsets before it."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      isolation_level="read_committed")
    try:
        return {p: c.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        c.close()


def _plain_produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i, v in enumerate(values):
            p.send(topic, value=v.encode(), partition=i % partitions)
        p.flush()
    finally:
        p.close()


@pytest.mark.compat(suite="transactions", client="confluent-kafka")
@STANDALONE
def test_confluent_second_producer_fences_the_first(target: Target) -> None:
    from confluent_kafka import KafkaError, KafkaException, Producer

    topic, tid = unique("ck-fence"), unique("ck-fence-id")
    create_topic(target.bootstrap, topic)
    conf = {"bootstrap.servers": target.bootstrap, "transactional.id": tid}
    a = Producer(conf)
    a.init_transactions(60)
    a.begin_transaction()
    a.produce(topic, value=b"first-0")
    a.flush(60)
    b = Producer(conf)
    b.init_transactions(60)  # fences a: its open transaction is aborted, the epoch bumped
    with pytest.raises(KafkaException) as failed:
        a.commit_transaction(60)
    err = failed.value.args[0]
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), err
    assert err.fatal(), err
    b.begin_transaction()
    for i in range(2):
        b.produce(topic, value=f"second-{i}".encode())
    b.commit_transaction(60)
    assert read(target, topic) == ["second-0", "second-1"]


@pytest.mark.compat(suite="transactions", client="confluent-kafka")
@STANDALONE
def test_confluent_coordinator_aborts_a_timed_out_transaction(target: Target) -> None:
    from confluent_kafka import KafkaError, KafkaException, Producer

    topic, tid = unique("ck-to"), unique("ck-to-id")
    create_topic(target.bootstrap, topic)
    # librdkafka caps message.timeout.ms at transaction.timeout.ms: 2 s leaves the send room
    p = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": tid, "transaction.timeout.ms": 2000})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(topic, value=b"late-0")
    assert p.flush(60) == 0
    _wait_coordinator_abort(target.bootstrap, tid)
    with pytest.raises(KafkaException) as failed:
        p.commit_transaction(60)
    # the EndTxn's PRODUCER_FENCED (Kafka's answer to the old epoch): librdkafka's fatal _FENCED
    err = failed.value.args[0]
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED) and err.fatal(), err
    assert read(target, topic) == []
    assert read(target, topic, "read_uncommitted") == ["late-0"]


@pytest.mark.compat(suite="transactions", client="kafka-python")
@STANDALONE
def test_kafka_python_second_producer_fences_the_first(target: Target) -> None:
    from kafka import KafkaProducer
    from kafka.errors import ProducerFencedError

    topic, tid = unique("kp-fence"), unique("kp-fence-id")
    create_topic(target.bootstrap, topic)
    a = KafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=tid)
    b = KafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=tid)
    try:
        a.init_transactions()
        a.begin_transaction()
        a.send(topic, value=b"first-0").get(timeout=30)
        b.init_transactions()
        with pytest.raises(ProducerFencedError):  # the EndTxn's PRODUCER_FENCED, as on Kafka
            a.commit_transaction()
        b.begin_transaction()
        for i in range(2):
            b.send(topic, value=f"second-{i}".encode())
        b.commit_transaction()
    finally:
        a.close(timeout=5)
        b.close()
    assert read(target, topic) == ["second-0", "second-1"]


@pytest.mark.compat(suite="transactions", client="kafka-python")
@STANDALONE
def test_kafka_python_coordinator_aborts_a_timed_out_transaction(target: Target) -> None:
    from kafka import KafkaProducer
    from kafka.errors import ProducerFencedError

    topic, tid = unique("kp-to"), unique("kp-to-id")
    create_topic(target.bootstrap, topic)
    p = KafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=tid, transaction_timeout_ms=1000)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, value=b"late-0").get(timeout=30)
        _wait_coordinator_abort(target.bootstrap, tid)
        # the coordinator's abort bumped the epoch: the EndTxn meets PRODUCER_FENCED (Kafka's answer)
        with pytest.raises(ProducerFencedError):
            p.commit_transaction()
    finally:
        p.close(timeout=5)
    assert read(target, topic) == []
    assert read(target, topic, "read_uncommitted") == ["late-0"]


@pytest.mark.compat(suite="transactions", client="kafka-python")
@STANDALONE
def test_kafka_python_send_offsets_to_transaction(target: Target) -> None:
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata

    src, out, group = unique("kp-src"), unique("kp-out"), unique("kp-g")
    create_topic(target.bootstrap, src, partitions=2)
    create_topic(target.bootstrap, out, partitions=2)
    p = KafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=unique("kp-ctp"))
    c = KafkaConsumer(src, bootstrap_servers=target.bootstrap, group_id=group, isolation_level="read_committed",
                      auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        p.init_transactions()

        def round_(values: list[str], commit: bool) -> None:
            _plain_produce(target.bootstrap, src, values, 2)
            got: list[str] = []
            deadline = time.monotonic() + 60
            while len(got) < len(values):
                assert time.monotonic() < deadline, got
                for records in c.poll(timeout_ms=500).values():
                    got += [r.value.decode() for r in records]
            assert sorted(got) == sorted(values)
            p.begin_transaction()
            for v in got:
                p.send(out, value=v.upper().encode())
            p.send_offsets_to_transaction({tp: OffsetAndMetadata(c.position(tp), "", -1) for tp in c.assignment()},
                                          c.group_metadata())
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()

        round_([f"v-{i}" for i in range(10)], commit=True)
        assert _committed(target.bootstrap, group, src, 2) == {0: 5, 1: 5}
        round_([f"w-{i}" for i in range(4)], commit=False)
    finally:
        c.close()
        p.close()
    # the aborted round left the group's offsets and the output as the commit did
    assert _committed(target.bootstrap, group, src, 2) == {0: 5, 1: 5}
    assert sorted(read(target, out)) == sorted(f"V-{i}" for i in range(10))


@pytest.mark.compat(suite="transactions", client="aiokafka")
@STANDALONE
def test_aiokafka_second_producer_fences_the_first(target: Target) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import ProducerFenced

    topic, tid = unique("ak-fence"), unique("ak-fence-id")
    create_topic(target.bootstrap, topic)

    async def scenario() -> None:
        a = AIOKafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=tid)
        b = AIOKafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=tid)
        await a.start()
        try:
            await a.begin_transaction()
            await a.send_and_wait(topic, value=b"first-0")
            await b.start()  # initializes: fences a
            with pytest.raises(ProducerFenced):
                await a.commit_transaction()
            async with b.transaction():
                for i in range(2):
                    await b.send(topic, value=f"second-{i}".encode())
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(scenario())
    assert read(target, topic) == ["second-0", "second-1"]


@pytest.mark.compat(suite="transactions", client="aiokafka")
@STANDALONE
def test_aiokafka_coordinator_aborts_a_timed_out_transaction(target: Target) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import ProducerFenced

    topic, tid = unique("ak-to"), unique("ak-to-id")
    create_topic(target.bootstrap, topic)

    async def scenario() -> None:
        p = AIOKafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=tid, transaction_timeout_ms=1000)
        await p.start()
        try:
            await p.begin_transaction()
            await p.send_and_wait(topic, value=b"late-0")
            await asyncio.to_thread(_wait_coordinator_abort, target.bootstrap, tid)
            with pytest.raises(ProducerFenced):  # the EndTxn's PRODUCER_FENCED, as on Kafka
                await p.commit_transaction()
        finally:
            await p.stop()

    asyncio.run(scenario())
    assert read(target, topic) == []
    assert read(target, topic, "read_uncommitted") == ["late-0"]


@pytest.mark.compat(suite="transactions", client="aiokafka")
@STANDALONE
def test_aiokafka_send_offsets_to_transaction(target: Target) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    src, out, group = unique("ak-src"), unique("ak-out"), unique("ak-g")
    create_topic(target.bootstrap, src, partitions=2)
    create_topic(target.bootstrap, out, partitions=2)

    async def scenario() -> None:
        p = AIOKafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=unique("ak-ctp"))
        c = AIOKafkaConsumer(src, bootstrap_servers=target.bootstrap, group_id=group,
                             isolation_level="read_committed", auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await p.start()
        await c.start()
        try:
            async def round_(values: list[str], commit: bool) -> None:
                await asyncio.to_thread(_plain_produce, target.bootstrap, src, values, 2)
                got: list[str] = []
                async with asyncio.timeout(60):
                    while len(got) < len(values):
                        for records in (await c.getmany(timeout_ms=500)).values():
                            got += [r.value.decode() for r in records if r.value is not None]
                assert sorted(got) == sorted(values)
                await p.begin_transaction()
                for v in got:
                    await p.send(out, value=v.upper().encode())
                await p.send_offsets_to_transaction({tp: await c.position(tp) for tp in c.assignment()}, group)
                if commit:
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()

            await round_([f"v-{i}" for i in range(10)], commit=True)
            assert await asyncio.to_thread(_committed, target.bootstrap, group, src, 2) == {0: 5, 1: 5}
            await round_([f"w-{i}" for i in range(4)], commit=False)
        finally:
            await c.stop()
            await p.stop()

    asyncio.run(scenario())
    # the aborted round left the group's offsets and the output as the commit did
    assert _committed(target.bootstrap, group, src, 2) == {0: 5, 1: 5}
    assert sorted(read(target, out)) == sorted(f"V-{i}" for i in range(10))
