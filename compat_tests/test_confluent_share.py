"""KIP-932 share groups with confluent-kafka's ShareConsumer (confluent-kafka 2.16 over
librdkafka 2.16, still marked "Preview" by librdkafka) on `quire standalone`: consumers sharing
one partition in implicit acknowledgement mode, and explicit RELEASE and REJECT with the
delivery count."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from compat_tests.support.clients import create_topic, unique
from tests.support.gateway import StandaloneFactory, StandaloneGateway

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("this confluent-kafka has no ShareConsumer (2.16+)", allow_module_level=True)

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource  # noqa: E402

pytestmark = pytest.mark.compat(suite="share-groups", client="confluent-kafka")
DEADLINE_S = 60


@pytest.fixture
def gw(standalone_factory: StandaloneFactory) -> StandaloneGateway:
    return standalone_factory()


def _setup(bs: str, topic: str, group: str, count: int) -> None:
    create_topic(bs, topic, partitions=1)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 2000})  # several batches
    for i in range(count):
        p.produce(topic, value=f"v-{i}".encode(), partition=0)
    assert p.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)


def _consumer(bs: str, group: str, mode: str) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": bs, "group.id": group, "share.acknowledgement.mode": mode})


def test_share_consumers_split_one_partition_implicit_mode(gw: StandaloneGateway) -> None:
    bs, topic, group, count = f"{gw.host}:{gw.port}", unique("ck"), unique("sg"), 600
    _setup(bs, topic, group, count)
    seen: list[tuple[str, int, str, int]] = []
    lock, done = threading.Lock(), threading.Event()
    failures: list[BaseException] = []

    def run(name: str) -> None:
        try:
            c = _consumer(bs, group, "implicit")
            c.subscribe([topic])
            deadline = time.monotonic() + DEADLINE_S
            while not done.is_set() and time.monotonic() < deadline:
                for m in c.poll(0.5):
                    assert m.error() is None, m.error()
                    with lock:
                        seen.append((name, m.offset(), m.value().decode(), m.delivery_count()))
                        if len({o for _, o, _, _ in seen}) >= count:
                            done.set()
            c.commit_sync(30)  # implicit mode: the last poll's records are accepted here
            c.close()
        except BaseException as e:
            failures.append(e)
            done.set()

    threads = [threading.Thread(target=run, args=(f"c{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    # Disjoint and together everything, each a first delivery.
    assert Counter(o for _, o, _, _ in seen) == Counter(range(count))
    assert sorted(v for _, _, v, _ in seen) == sorted(f"v-{i}" for i in range(count))
    assert {n for _, _, _, n in seen} == {1}


def test_explicit_release_comes_back_counted_and_reject_never(gw: StandaloneGateway) -> None:
    bs, topic, group, count = f"{gw.host}:{gw.port}", unique("ck"), unique("sg"), 20
    _setup(bs, topic, group, count)
    c = _consumer(bs, group, "explicit")
    c.subscribe([topic])
    deliveries: list[tuple[int, int]] = []
    deadline = time.monotonic() + DEADLINE_S
    # Even offsets: RELEASEd on the first delivery, ACCEPTed on the second; odd ones REJECTed.
    while time.monotonic() < deadline and len(deliveries) < count + count // 2:
        msgs = c.poll(0.5)
        for m in msgs:
            assert m.error() is None, m.error()
            deliveries.append((m.offset(), m.delivery_count()))
            if m.offset() % 2:
                c.acknowledge(m, AcknowledgeType.REJECT)
            else:
                c.acknowledge(m, AcknowledgeType.RELEASE if m.delivery_count() == 1 else AcknowledgeType.ACCEPT)
        if msgs:
            assert all(e is None for e in c.commit_sync(30).values())
    # Nothing more: every record is accepted or rejected (archived).
    assert list(c.poll(2.0)) == []
    c.close()
    per_offset: dict[int, list[int]] = {}
    for o, n in deliveries:
        per_offset.setdefault(o, []).append(n)
    assert per_offset == {o: [1] if o % 2 else [1, 2] for o in range(count)}
