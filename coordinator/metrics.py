"""The group coordinator's Prometheus metrics, computed on scrape: groups by state (Kafka's
GroupMetadataManager gauges; classic groups by classic state, consumer-protocol groups apart) and consumer lag per group and topic (kafka_exporter's name)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from coordinator.group.consumer_group import ConsumerGroupState
from coordinator.group.group import Group, GroupState

_PREFIX = "kafka_coordinator_group_groupmetadatamanager_"
# Kafka's NumGroups<State> gauges.
_BY_STATE = {
    GroupState.STABLE: "numgroupsstable",
    GroupState.PREPARING_REBALANCE: "numgroupspreparingrebalance",
    GroupState.COMPLETING_REBALANCE: "numgroupscompletingrebalance",
    GroupState.EMPTY: "numgroupsempty",
    GroupState.DEAD: "numgroupsdead",
}


def group_metrics(groups: Iterable[Group], lag: Mapping[tuple[str, str], int]) -> Iterator[Metric]:
    """Gauges for the groups coordinated here and the lag (group, topic) -> messages of the
    partitions owned here (each partition's owner reports it: summed over gateways it is whole)."""
    counts = dict.fromkeys(_BY_STATE, 0)
    consumer = dict.fromkeys(ConsumerGroupState, 0)
    total = 0
    for g in groups:
        if g.consumer is not None:
            consumer[g.consumer.state] += 1
        else:
            counts[g.state] += 1
        total += 1
    family = GaugeMetricFamily(_PREFIX + "numgroups", "Consumer groups coordinated by this gateway")
    family.add_metric([], total)
    yield family
    for state, name in _BY_STATE.items():
        family = GaugeMetricFamily(_PREFIX + name, f"Consumer groups in state {state.value}")
        family.add_metric([], counts[state])
        yield family
    # Kafka's consumer-group-count{state} of the consumer group protocol (KIP-848).
    family = GaugeMetricFamily(_PREFIX + "consumergroupcount", "Consumer-protocol groups by state",
                               labels=["state"])
    for cstate, n in consumer.items():
        family.add_metric([cstate.value.lower()], n)
    yield family
    lag_family = GaugeMetricFamily(
        "kafka_consumergroup_lag_sum", "Messages after the group's committed offsets, by group and topic",
        labels=["consumergroup", "topic"],
    )
    for (group, topic), n in sorted(lag.items()):
        lag_family.add_metric([group, topic], n)
    yield lag_family
