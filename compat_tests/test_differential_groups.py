"""Differential run: a classic consumer group driven step by step over the raw protocol (two
members, join/sync/heartbeat/commit/leave) against Apache Kafka and Quire: error codes for
stale generations and unknown members, generations, leaders, group states and assignments."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.wire import RETRIABLE_COORDINATOR, Wire, assignment, subscription

pytestmark = pytest.mark.compat(suite="differential", client="raw protocol")

MEMBER_ID_REQUIRED = 79


def _in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    return t, out


def _join(w: Wire, group: str, metadata: bytes) -> tuple[int, str]:
    """A new member's two-step join (KIP-394): the first JoinGroup hands out the member id."""
    deadline = time.monotonic() + 30
    while True:
        r = w.join(group, protocols=(("range", metadata),))
        if int(r.error_code) not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return int(r.error_code), r.member_id


def group_lifecycle(bootstrap: str) -> Observations:
    topic, group = unique("d-grp"), unique("d-g")
    meta_a, meta_b = subscription([topic], b"member-a"), subscription([topic], b"member-b")
    all_parts = assignment({topic: [0, 1]}, b"")
    only = {p: assignment({topic: [p]}, b"") for p in (0, 1)}
    out: Observations = {}

    def blob(data: Any) -> str:
        """Metadata/assignment bytes with this run's topic name normalised away."""
        return bytes(data).replace(topic.encode(), b"<topic>").hex()

    with Wire(bootstrap) as a, Wire(bootstrap) as b, Wire(bootstrap) as admin:
        admin.create(topic, partitions=2)
        out["find_coordinator"] = admin.find_coordinator(group)
        out["describe.unknown_group"] = _group_view(admin.describe_group(group), {}, blob)
        out["heartbeat.unknown_group"] = admin.heartbeat(group, 1, "nobody")

        err, a_id = _join(a, group, meta_a)
        out["a.first_join"] = err == MEMBER_ID_REQUIRED and bool(a_id)
        ja = a.join(group, a_id, protocols=(("range", meta_a),))
        out["a.join"] = (int(ja.error_code), int(ja.generation_id), ja.leader == a_id, ja.protocol_name,
                         sorted((m.member_id == a_id, blob(m.metadata)) for m in ja.members))
        sa = a.sync(group, ja.generation_id, a_id, {a_id: all_parts})
        out["a.sync"] = (int(sa.error_code), blob(sa.assignment), sa.protocol_name)
        names = {a_id: "a"}
        out["describe.one_member"] = _group_view(admin.describe_group(group), names, blob)
        out["commit.gen1"] = a.commit(group, ja.generation_id, a_id, topic, {0: 5, 1: 7})

        # B joins: A learns about the rebalance from its heartbeat and rejoins.
        err, b_id = _join(b, group, meta_b)
        names[b_id] = "b"
        out["b.first_join"] = err == MEMBER_ID_REQUIRED and bool(b_id)
        tb, jb_out = _in_thread(lambda: b.join(group, b_id, protocols=(("range", meta_b),)))
        hb = _wait_heartbeat(a, group, ja.generation_id, a_id)
        out["a.heartbeat_during_rebalance"] = hb
        out["describe.preparing"] = admin.describe_group(group).group_state
        ja2 = a.join(group, a_id, protocols=(("range", meta_a),))
        tb.join(30)
        jb = jb_out[0]
        out["join2"] = (int(ja2.error_code), int(jb.error_code), int(ja2.generation_id), int(jb.generation_id),
                        ja2.leader == a_id, jb.leader == a_id, len(ja2.members), len(jb.members),
                        sorted((names[m.member_id], blob(m.metadata)) for m in ja2.members))
        gen2 = int(ja2.generation_id)
        tsb, sb_out = _in_thread(lambda: b.sync(group, gen2, b_id))
        sa2 = a.sync(group, gen2, a_id, {a_id: only[0], b_id: only[1]})
        tsb.join(30)
        out["sync2"] = (int(sa2.error_code), blob(sa2.assignment), int(sb_out[0].error_code), blob(sb_out[0].assignment))
        out["describe.stable_two"] = _group_view(admin.describe_group(group), names, blob)

        out["heartbeat.ok"] = a.heartbeat(group, gen2, a_id)
        out["heartbeat.stale_generation"] = a.heartbeat(group, gen2 - 1, a_id)
        out["heartbeat.future_generation"] = a.heartbeat(group, gen2 + 1, a_id)
        out["heartbeat.unknown_member"] = a.heartbeat(group, gen2, "not-a-member")
        out["sync.stale_generation"] = int(a.sync(group, gen2 - 1, a_id, {}).error_code)
        out["commit.stale_generation"] = a.commit(group, gen2 - 1, a_id, topic, {0: 9})
        out["commit.unknown_member"] = a.commit(group, gen2, "not-a-member", topic, {0: 9})
        out["commit.gen2"] = b.commit(group, gen2, b_id, topic, {1: 11})
        out["commit.unknown_partition"] = b.commit(group, gen2, b_id, topic, {5: 1})
        out["fetch_offsets"] = admin.fetch_offsets(group, topic, [0, 1, 2])
        groups = admin.list_groups()
        out["list_groups"] = (int(groups.error_code),
                              [(g.protocol_type, g.group_state) for g in groups.groups if g.group_id == group])

        # B leaves: A must rejoin alone, then leaves too and the group is empty.
        out["b.leave"] = b.leave(group, b_id)
        out["leave.unknown_member"] = b.leave(group, "not-a-member")
        out["a.heartbeat_after_leave"] = _wait_heartbeat(a, group, gen2, a_id)
        ja3 = a.join(group, a_id, protocols=(("range", meta_a),))
        out["join3"] = (int(ja3.error_code), int(ja3.generation_id) - gen2, ja3.leader == a_id, len(ja3.members))
        sa3 = a.sync(group, ja3.generation_id, a_id, {a_id: all_parts})
        out["sync3"] = (int(sa3.error_code), blob(sa3.assignment))
        out["a.leave"] = a.leave(group, a_id)
        out["describe.empty"] = _group_view(admin.describe_group(group), names, blob)
        out["fetch_offsets.after_leave"] = admin.fetch_offsets(group, topic, [0, 1])
    return out


def _wait_heartbeat(w: Wire, group: str, generation: int, member: str) -> int:
    """The first heartbeat answer that is not NONE (the rebalance is noticed), within 10 s."""
    deadline = time.monotonic() + 10
    while True:
        err = w.heartbeat(group, generation, member)
        if err != 0 or time.monotonic() > deadline:
            return err
        time.sleep(0.05)


def _group_view(g: Any, names: dict[str, str], blob: Any = bytes) -> Observations:
    return {
        "error": int(g.error_code),
        "state": g.group_state,
        "protocol_type": g.protocol_type,
        "protocol": g.protocol_data,
        "members": sorted(
            (names.get(m.member_id, "?"), blob(m.member_metadata), blob(m.member_assignment), m.client_id,
             bool(m.client_host))
            for m in g.members
        ),
    }


def test_group_lifecycle(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, group_lifecycle)
