"""`quire gateway`: one gateway process of a cluster (the wiring is gateway/app.py)."""

from __future__ import annotations

import argparse

from gateway.config import GatewayConfig


def hostport(value: str, what: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise SystemExit(f"quire: {what} must be HOST:PORT, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def main(args: argparse.Namespace) -> int:
    from gateway import app

    host, port = hostport(args.listen, "--listen")
    adv_host, adv_port = hostport(args.advertise, "--advertise") if args.advertise else (None, None)
    try:
        e, wq, aq = (int(x) for x in args.replication.split("/"))
        config = GatewayConfig(
            meta_url=args.meta, listen_host=host, listen_port=port, advertised_host=adv_host,
            advertised_port=adv_port, node_id=args.id, rack=args.rack, data_dir=args.data_dir,
            ensemble_size=e, write_quorum=wq, ack_quorum=aq, default_replication_factor=wq,
            num_partitions=args.num_partitions, auto_create_topics=not args.no_auto_create,
            meta_session_timeout_s=args.session_timeout,
            offsets_topic_partitions=args.offsets_topic_partitions,
            group_initial_rebalance_delay_ms=args.group_initial_rebalance_delay_ms,
        )
    except ValueError as err:
        raise SystemExit(f"quire gateway: {err}") from None
    app.run_async(app.run_gateway(config))
    return 0
