"""`quire standalone` restarts: after SIGTERM (clean) and after SIGKILL, the same data dir brings
back every topic (same ids, partitions, configs) and every acknowledged message."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from kafka_wire.messages.metadata import MetadataRequest, MetadataResponse
from tests.support.gateway import RawKafka, StandaloneFactory, StandaloneGateway

pytestmark = pytest.mark.timeout(240)
T = 20.0


def _topics(gw: StandaloneGateway) -> dict[str, tuple[int, str]]:
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    md = admin.list_topics(timeout=T)
    out = {}
    for name, t in md.topics.items():
        if name.startswith("__"):
            continue  # internal topics (consumer groups) come and go with other features
        cfg = next(iter(admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)]).values())).result(
            T
        )
        out[name] = (len(t.partitions), cfg["retention.ms"].value)
    return out


def _topic_ids(gw: StandaloneGateway) -> dict[str, object]:
    with RawKafka(gw.bootstrap) as c:
        resp = c.request(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    assert isinstance(resp, MetadataResponse)
    return {t.name: t.topic_id for t in resp.topics if t.name and not t.name.startswith("__")}


def _produce(gw: StandaloneGateway, topic: str, start: int, n: int) -> None:
    p = Producer({"bootstrap.servers": gw.bootstrap, "acks": "all", "enable.idempotence": False})
    errors: list[object] = []
    for i in range(start, start + n):
        p.produce(
            topic,
            key=b"%d" % i,
            value=b"value-%d" % i,
            partition=i % 2,
            on_delivery=lambda e, _m: errors.append(e) if e is not None else None,
        )
    assert p.flush(T) == 0
    assert errors == []


def _consume_all(gw: StandaloneGateway, topic: str, expect: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": "restart-test", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < expect and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().retriable() or not m.error().fatal():
                    continue
                raise KafkaException(m.error())
            got.append(m.value())
    finally:
        c.close()
    return got


def _wait_topics(gw: StandaloneGateway, want: dict[str, tuple[int, str]]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            got = _topics(gw)
        except KafkaException:
            got = {}
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert got == want


def test_restart_keeps_topics_and_messages(standalone_factory: StandaloneFactory) -> None:
    gw = standalone_factory()
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    for f in admin.create_topics(
        [NewTopic("keep-a", 2, 1, config={"retention.ms": "86400000"}), NewTopic("keep-b", 5, 1)]
    ).values():
        f.result(T)
    before = _topics(gw)
    assert before == {"keep-a": (2, "86400000"), "keep-b": (5, "604800000")}
    ids = _topic_ids(gw)
    _produce(gw, "keep-a", 0, 200)

    assert gw.stop() == 0, gw.output()[-3000:]  # SIGTERM: a clean exit
    gw.start()
    _wait_topics(gw, before)
    assert _topic_ids(gw) == ids
    _produce(gw, "keep-a", 200, 100)
    values = _consume_all(gw, "keep-a", 300)
    assert sorted(values) == sorted(b"value-%d" % i for i in range(300))

    gw.kill()  # SIGKILL: the bookies get SIGTERM; acknowledged data must survive
    gw.start()
    _wait_topics(gw, before)
    values = _consume_all(gw, "keep-a", 300)
    assert sorted(values) == sorted(b"value-%d" % i for i in range(300))
