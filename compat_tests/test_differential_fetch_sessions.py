"""Differential run: incremental fetch sessions (KIP-227) and diverging-epoch answers, the same
raw Fetch requests against Apache Kafka and Quire: which partitions full and incremental answers
carry, the session error codes, closing sessions (see known_differences.toml)."""

from __future__ import annotations

from typing import Any

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.wire import Wire, batch
from kafka_wire.messages.fetch import FetchRequest as F

pytestmark = pytest.mark.compat(suite="differential", client="raw protocol")


def _fetch(w: Wire, version: int, topic: Any, parts: dict[int, int], *, sid: int = 0, epoch: int = -1,
           forget: list[int] | None = None, last_fetched_epoch: int = -1) -> Any:
    fps = [F.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20,
                            last_fetched_epoch=last_fetched_epoch) for p, o in parts.items()]
    by_id = version >= 13
    topics = [F.FetchTopic(topic_id=topic, partitions=fps) if by_id else F.FetchTopic(topic=topic, partitions=fps)]
    forgotten = []
    if forget:
        forgotten = [F.ForgottenTopic(topic_id=topic, partitions=forget) if by_id
                     else F.ForgottenTopic(topic=topic, partitions=forget)]
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=50 << 20, session_id=sid, session_epoch=epoch,
            topics=topics if fps else [], forgotten_topics_data=forgotten)
    return w.call((1, version), req)


def _shape(resp: Any) -> tuple[int, bool, list[tuple[int, int, int, int]]]:
    """(error, has a session id, [(partition, error, high watermark, records bytes > 0)])."""
    parts = sorted((int(p.partition_index), int(p.error_code), int(p.high_watermark), int(bool(p.records)))
                   for t in resp.responses for p in t.partitions)
    return int(resp.error_code), resp.session_id != 0, parts


def fetch_sessions(bootstrap: str) -> Observations:
    topic = unique("d-sess")
    out: Observations = {}
    with Wire(bootstrap) as w:
        w.create(topic, partitions=3)
        assert w.produce(topic, 0, batch(2))[0] == 0
        full = _fetch(w, 12, topic, {0: 0, 1: 0, 2: 0}, epoch=0)
        sid = full.session_id
        out["full"] = _shape(full)
        out["incremental.no_news"] = _shape(_fetch(w, 12, topic, {0: 2}, sid=sid, epoch=1))
        assert w.produce(topic, 1, batch(3))[0] == 0
        out["incremental.news"] = _shape(_fetch(w, 12, topic, {}, sid=sid, epoch=2))
        out["incremental.same_epoch_again"] = _shape(_fetch(w, 12, topic, {}, sid=sid, epoch=2))
        out["incremental.unknown_partition"] = _shape(_fetch(w, 12, topic, {9: 0}, sid=sid, epoch=3))
        out["incremental.forget"] = _shape(_fetch(w, 12, topic, {}, sid=sid, epoch=4, forget=[2, 9]))
        out["incremental.forget_all"] = _shape(_fetch(w, 12, topic, {}, sid=sid, epoch=5, forget=[0, 1]))
        out["incremental.after_close"] = _shape(_fetch(w, 12, topic, {}, sid=sid, epoch=6))
        out["incremental.unknown_session"] = _shape(_fetch(w, 12, topic, {}, sid=123456789, epoch=1))
        out["incremental.session_zero"] = _shape(_fetch(w, 12, topic, {}, sid=0, epoch=1))
        tid = w.metadata([topic]).topics[0].topic_id
        sid = _fetch(w, 13, tid, {0: 0}, epoch=0).session_id
        out["v12_on_topic_id_session"] = _shape(_fetch(w, 12, topic, {}, sid=sid, epoch=1))
        out["sessionless_closes"] = _shape(_fetch(w, 13, tid, {0: 0}, sid=sid, epoch=-1))
        out["after_sessionless_close"] = _shape(_fetch(w, 13, tid, {}, sid=sid, epoch=1))
        # last_fetched_epoch: ahead of its epoch's end here -> diverging epoch, no records
        epoch = int(w.metadata([topic]).topics[0].partitions[0].leader_epoch)
        p = _fetch(w, 12, topic, {0: 5}, last_fetched_epoch=epoch).responses[0].partitions[0]
        out["diverging"] = (int(p.error_code), int(p.diverging_epoch.epoch) - epoch,
                            int(p.diverging_epoch.end_offset), bool(p.records))
        p = _fetch(w, 12, topic, {0: 1}, last_fetched_epoch=epoch).responses[0].partitions[0]
        out["not_diverging"] = (int(p.error_code), int(p.diverging_epoch.epoch), bool(p.records))
        p = _fetch(w, 12, topic, {0: 0}, last_fetched_epoch=epoch + 3).responses[0].partitions[0]
        out["unknown_epoch"] = int(p.error_code)
    return out


def test_fetch_sessions(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, fetch_sessions)
