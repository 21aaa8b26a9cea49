"""Differential run: the GROUP config resource against Apache Kafka 4.4 and Quire: the group
configs Kafka 4.4 added (streams.*, share.assignment.interval.ms, *.assignor.offload.enable),
refused with the same error codes and messages against the same broker limits, and described
with the same values, sources, types and broker synonyms. Only configs whose broker settings are
the same on both targets are compared (the targets' fast group settings differ for the consumer
session timeout and assignor offload)."""

from __future__ import annotations

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.wire import GROUP_RESOURCE, Wire
from kafka_wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest

pytestmark = pytest.mark.compat(suite="differential", client="raw protocol")

SET, DELETE = 0, 1
REFUSED: tuple[dict[str, str], ...] = (
    {"streams.num.standby.replicas": "3"},
    {"streams.num.standby.replicas": "-1"},
    {"streams.num.warmup.replicas": "21"},
    {"streams.session.timeout.ms": "1000"},
    {"streams.heartbeat.interval.ms": "16000"},
    {"streams.initial.rebalance.delay.ms": "-1"},
    {"streams.assignment.interval.ms": "16000"},
    {"streams.task.offset.interval.ms": "1000"},
    {"streams.acceptable.recovery.lag": "x"},
    {"streams.assignor.name": "foo"},
    {"streams.rack.aware.assignment.tags": "a,b,a"},
    {"share.assignment.interval.ms": "16000"},
    {"share.assignor.offload.enable": "maybe"},
    {"share.isolation.level": "READ_COMMITTED"},
    {"share.auto.offset.reset": "EARLIEST"},
    {"consumer.heartbeat.interval.ms": "20000"},
    {"consumer.assignment.interval.ms": "16000"},
    {"no.such.config": "1"},
)
ACCEPTED: tuple[dict[str, str], ...] = (
    {"streams.num.standby.replicas": "1", "streams.rack.aware.assignment.tags": "zone,rack",
     "streams.assignor.name": "sticky", "share.assignment.interval.ms": "2000"},
    {"share.assignor.offload.enable": "false", "streams.acceptable.recovery.lag": "99999999999",
     "streams.initial.rebalance.delay.ms": "0"},
)
DESCRIBED = [
    "streams.session.timeout.ms", "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
    "streams.initial.rebalance.delay.ms", "streams.assignment.interval.ms", "streams.assignor.offload.enable",
    "streams.task.offset.interval.ms", "streams.num.warmup.replicas", "streams.rack.aware.assignment.tags",
    "streams.acceptable.recovery.lag", "streams.assignor.name", "share.assignment.interval.ms",
    "share.assignor.offload.enable", "share.session.timeout.ms", "share.heartbeat.interval.ms",
    "share.isolation.level", "share.auto.offset.reset", "share.renew.acknowledge.enable",
    "errors.deadletterqueue.topic.name", "errors.deadletterqueue.copy.record.enable",
    "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms",
]


def group_configs_scenario(bootstrap: str) -> Observations:
    group = unique("d-gcfg")
    out: Observations = {}
    R = IncrementalAlterConfigsRequest
    with Wire(bootstrap) as w:

        def alter(configs: dict[str, str]) -> tuple[int, str | None]:
            r = w.call((44, 1), R(resources=[R.AlterConfigsResource(
                resource_type=GROUP_RESOURCE, resource_name=group,
                configs=[R.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in configs.items()])]))
            return int(r.responses[0].error_code), r.responses[0].error_message

        for i, configs in enumerate(REFUSED):
            out[f"refused_{i}:{','.join(configs)}"] = alter(configs)
        applied: dict[str, str] = {}
        for i, configs in enumerate(ACCEPTED):
            out[f"accepted_{i}"] = alter(configs)
            if out[f"accepted_{i}"][0] == 0:
                applied.update(configs)
        w.wait_group_configs(group, applied)
        # The group altered above, and one never altered (the defaults; internal configs hidden).
        for label, name in (("altered", group), ("untouched", unique("d-gcfg-none"))):
            res = w.describe_group_configs(name, DESCRIBED, synonyms=True)
            out[f"{label}:describe_error"] = int(res.error_code)
            for c in res.configs:
                out[f"{label}:{c.name}"] = (c.value, int(c.config_source), bool(c.read_only), int(c.config_type),
                                            [(s.name, s.value, int(s.source)) for s in c.synonyms])
            out[f"{label}:described_names"] = sorted(c.name for c in res.configs)
    return out


def test_group_configs(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, group_configs_scenario)
