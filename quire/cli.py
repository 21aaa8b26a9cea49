"""The `quire` command: arguments of every role; each role's main is its own module here."""

from __future__ import annotations

import argparse
import sys

from quire import __version__


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="quire", description="Kafka-compatible gateway over a replicated log store")
    p.add_argument("--version", action="version", version=f"quire {__version__}")
    p.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING (default), ERROR")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("standalone", help="embedded metadata store, local bookies and one gateway")
    s.add_argument("--data-dir", default="./quire-data")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=9092)
    s.add_argument("--bookies", type=int, default=1, help="bookie child processes (E=WQ=min(N,3), AQ=min(N,2))")

    g = sub.add_parser("gateway", help="run one Kafka gateway of a cluster")
    g.add_argument("--meta", required=True, help="zk://host:port/chroot or embedded:///dir")
    g.add_argument("--listen", default="127.0.0.1:9092", help="HOST:PORT to listen on")
    g.add_argument("--advertise", default=None, help="HOST:PORT clients are told (default: --listen)")
    g.add_argument("--id", type=int, default=None, help="node id (default: allocated, stable per address)")
    g.add_argument("--rack", default=None)
    g.add_argument("--replication", default="3/3/2", help="E/WQ/AQ of partition ledgers (default 3/3/2)")
    g.add_argument("--num-partitions", type=int, default=1, help="partitions of auto-created topics")
    g.add_argument("--no-auto-create", action="store_true", help="auto.create.topics.enable=false")
    g.add_argument("--data-dir", default=None, help="reported as the gateway's log dir")
    g.add_argument("--offsets-topic-partitions", type=int, default=None,
                   help="offsets.topic.num.partitions: consumer-group coordinator shards (default 16)")
    g.add_argument("--group-initial-rebalance-delay-ms", type=int, default=None,
                   help="group.initial.rebalance.delay.ms (default 3000)")
    g.add_argument(
        "--session-timeout", type=float, default=10.0,
        help="metadata-store session timeout in seconds: how fast a dead gateway's partitions move",
    )

    b = sub.add_parser("bookie", help="run a storage node")
    b.add_argument("--dir", required=True, help="ledger storage directory")
    b.add_argument("--journal-dir", default=None, help="journal directory (default: DIR/journal)")
    b.add_argument("--host", default="127.0.0.1")
    b.add_argument("--port", type=int, required=True)
    b.add_argument("--meta", required=True, help="embedded:///dir or zk://host:port/chroot")
    b.add_argument("--rack", default=None)
    b.add_argument("--no-fsync", action="store_true", help="UNSAFE, benchmarks only: ack adds without fdatasync")
    b.add_argument("--journal-batch-wait", type=float, default=None, help="seconds to gather a journal batch")
    b.add_argument("--flush-interval", type=float, default=None, help="seconds between checkpoints")
    b.add_argument("--write-cache-mb", type=float, default=None, help="write cache size; adds wait beyond it")

    a = sub.add_parser("admin", help="inspect topics, ledgers and bookies", add_help=False)
    a.add_argument("args", nargs=argparse.REMAINDER)
    return p


def _split_admin(argv: list[str]) -> tuple[list[str], list[str]] | None:
    """(global options, everything after "admin") when the command is admin: its arguments go
    to gateway.admin.main untouched."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--log-level":
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return (argv[:i], argv[i + 1:]) if a == "admin" else None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    split = _split_admin(argv)
    args = parser.parse_args(argv if split is None else [*split[0], "admin"])
    from quire.logs import setup_logging

    setup_logging(args.log_level)
    if split is not None:
        from quire.admin import main as admin_main

        return admin_main(split[1])
    if args.command == "gateway":
        from quire.gateway import main as gateway_main

        return gateway_main(args)
    if args.command == "standalone":
        from gateway.app import run_async
        from quire.standalone import run_standalone

        run_async(run_standalone(args.data_dir, args.host, args.port, args.bookies, log_level=args.log_level))
        return 0
    if args.command == "bookie":
        from quire.bookie import run_bookie

        return run_bookie(
            data_dir=args.dir,
            journal_dir=args.journal_dir,
            host=args.host,
            port=args.port,
            meta_url=args.meta,
            rack=args.rack,
            no_fsync=args.no_fsync,
            journal_batch_wait=args.journal_batch_wait,
            flush_interval=args.flush_interval,
            write_cache_mb=args.write_cache_mb,
        )
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
