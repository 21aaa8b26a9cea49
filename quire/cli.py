"""The `quire` command: one entry point for every role (bookie, gateway, standalone, admin)."""

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
    s.add_argument("--bookies", type=int, default=1)

    b = sub.add_parser("bookie", help="run a storage node")
    b.add_argument("--dir", required=True, help="ledger storage directory")
    b.add_argument("--journal-dir", default=None, help="journal directory (default: DIR/journal)")
    b.add_argument("--host", default="127.0.0.1")
    b.add_argument("--port", type=int, required=True)
    b.add_argument("--meta", required=True, help="embedded:///dir or zk://host:port/chroot")
    b.add_argument("--rack", default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from quire.logs import setup_logging

    setup_logging(args.log_level)
    if args.command == "standalone":
        # The gateway does not exist yet (issue M1 4 of 6): report the version and exit.
        print(f"quire {__version__}: standalone gateway not built yet")
        return 0
    if args.command == "bookie":
        from store.bookie.server import run_bookie

        return run_bookie(
            data_dir=args.dir,
            journal_dir=args.journal_dir,
            host=args.host,
            port=args.port,
            meta_url=args.meta,
            rack=args.rack,
        )
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
