"""`quire gateway`: one gateway process of a cluster (the wiring is gateway/app.py)."""

from __future__ import annotations

import argparse
from typing import Any

from coordinator.group.config import GroupConfig
from coordinator.share.config import ShareConfig
from coordinator.txn.config import TxnConfig
from gateway.config import CleanerSettings, GatewayConfig
from quire import settings as st
from quire.realtime import apply_realtime
from store.heap import settle_heap
from store.metrics import start_metrics
from store.tasks import run_async


def build_config(r: st.Resolved, role: str, **fixed: Any) -> GatewayConfig:
    """The GatewayConfig of resolved settings (`fixed`: what the role decides itself, e.g. the
    standalone's embedded metadata store and replication)."""
    host, port = st.hostport(r.get_value("listeners"), "listeners (--listen)")
    adv = r.get_value("advertised.listeners")
    adv_host, adv_port = st.hostport(adv, "advertised.listeners (--advertise)") if adv else (None, None)
    e, wq, aq = fixed.pop("replication", None) or st.replication(r.get_value("quire.replication"))
    topic_defaults = {s.topic_config: str(r.get_value(s.key)).lower() if s.type is bool else str(r.get_value(s.key))
                      for s in st.for_role(role) if s.topic_config and r[s.key].source != "default"}
    kwargs: dict[str, Any] = dict(
        meta_url=r.get("quire.meta", st.Value("", "default")).value or "", listen_host=host, listen_port=port,
        advertised_host=adv_host, advertised_port=adv_port, node_id=r.get_value("node.id"),
        rack=r.get_value("broker.rack"), data_dir=r.get_value("quire.data.dir"),
        ensemble_size=e, write_quorum=wq, ack_quorum=aq, default_replication_factor=wq,
        num_partitions=r.get_value("num.partitions"), auto_create_topics=r.get_value("auto.create.topics.enable"),
        delete_topic_enable=r.get_value("delete.topic.enable"),
        message_max_bytes=r.get_value("message.max.bytes"),
        socket_request_max_bytes=r.get_value("socket.request.max.bytes"),
        fetch_session_cache_slots=r.get_value("max.incremental.fetch.session.cache.slots"),
        meta_session_timeout_s=r.get_value("quire.meta.session.timeout.s"),
        offsets_topic_partitions=r.get_value("offsets.topic.num.partitions"),
        group={s.group_field: r.get_value(s.key) for s in st.for_role(role) if s.group_field},
        transaction_partition_verification=r.get_value("transaction.partition.verification.enable"),
        share=ShareConfig(
            **{s.share_field: r.get_value(s.key) for s in st.for_role(role) if s.share_field},
            redelivery_backoff_min_ms=r.get_value("quire.share.redelivery.backoff.min.ms"),
            redelivery_backoff_max_ms=r.get_value("quire.share.redelivery.backoff.max.ms"),
            redelivery_backoff_multiplier=r.get_value("quire.share.redelivery.backoff.multiplier"),
        ),
        txn=TxnConfig(
            state_log_num_partitions=r.get_value("transaction.state.log.num.partitions"),
            state_log_segment_bytes=r.get_value("transaction.state.log.segment.bytes"),
            max_timeout_ms=r.get_value("transaction.max.timeout.ms"),
            id_expiration_ms=r.get_value("transactional.id.expiration.ms"),
            abort_timed_out_interval_ms=r.get_value("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            remove_expired_interval_ms=r.get_value("transaction.remove.expired.transaction.cleanup.interval.ms"),
        ),
        cache_mb=r.get_value("quire.cache.mb"), topic_defaults=topic_defaults,
        import_enable=r.get_value("quire.import.enable"),
        cleaner=CleanerSettings(
            enable=r.get_value("log.cleaner.enable"),
            dedupe_buffer_bytes=r.get_value("log.cleaner.dedupe.buffer.size"),
            io_max_bytes_per_s=r.get_value("log.cleaner.io.max.bytes.per.second"),
            backoff_ms=r.get_value("log.cleaner.backoff.ms")),
        offload=st.offload_settings(r, fixed.get("data_dir") or r.get_value("quire.data.dir")),
        offload_deletion_lag_ms=r.get_value("quire.offload.deletion.lag.ms"),
        offload_cleanup_margin_ms=r.get_value("quire.offload.cleanup.margin.ms"),
        offload_max_concurrent_ledgers=r.get_value("quire.offload.max.concurrent.ledgers"),
    )
    kwargs.update(fixed)
    shown = {k: v for k, v in (("node.id", kwargs["node_id"]), ("quire.meta", kwargs["meta_url"]),
                               ("quire.replication", f"{e}/{wq}/{aq}"))}
    try:
        GroupConfig(**kwargs["group"]).check()
        kwargs["share"].check()
        return GatewayConfig(**kwargs, broker_settings=st.described(r, role, shown))
    except ValueError as err:
        raise st.SettingsError(str(err)) from None


def main(args: argparse.Namespace) -> int:
    from gateway import app

    r = st.resolve(st.GATEWAY, args, file=args.config)
    if not r.get_value("quire.meta"):
        raise st.SettingsError("quire gateway needs a metadata store: --meta zk://host:port/chroot (or quire.meta)")
    config = build_config(r, st.GATEWAY)
    apply_realtime(r.get_value("quire.realtime.priority"))  # before any thread starts: they inherit it
    start_metrics(st.metrics(r))
    run_async(app.run_gateway(config, on_ready=lambda _server: settle_heap()))
    return 0
