"""The `quire` command: arguments of every role; each role's main is its own module here."""

from __future__ import annotations

import argparse
import sys

from gateway.errors import HandlerImportError
from quire import __version__, settings


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.ArgumentDefaultsHelpFormatter
    p = argparse.ArgumentParser(prog="quire", description="Kafka-compatible gateway over a replicated log store",
                                formatter_class=fmt)
    p.add_argument("--version", action="version", version=f"quire {__version__}")
    p.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING, ERROR")
    sub = p.add_subparsers(dest="command", required=True)
    # Every setting's flag comes from quire/settings.py, whose help shows key, variable and default.
    s = sub.add_parser("standalone", help="embedded metadata store, local bookies and one gateway",
                       description="Single-node Quire: embedded metadata store, bookie child processes and one "
                       "gateway. Settings: flags > QUIRE_* environment > --config file > defaults.")
    settings.add_arguments(s, settings.STANDALONE)
    s.add_argument("--host", default=None, help="shorthand: the host of --listen [default: 127.0.0.1]")
    s.add_argument("--port", type=int, default=None, help="shorthand: the port of --listen [default: 9092]")
    g = sub.add_parser("gateway", help="run one Kafka gateway of a cluster")
    settings.add_arguments(g, settings.GATEWAY)
    b = sub.add_parser("bookie", help="run a storage node (`quire bookie format ...`: give a wiped bookie a new identity)")
    b.add_argument("action", nargs="?", choices=["format"],
                   help="format: empty the bookie's directories and replace its cookie (the bookie must be stopped); "
                   "auto-recovery then refills it")
    settings.add_arguments(b, settings.BOOKIE)
    r = sub.add_parser("recovery", help="run an auto-recovery process: auditor candidate and replication worker")
    settings.add_arguments(r, settings.RECOVERY)
    a = sub.add_parser("admin", help="inspect topics, ledgers, bookies, gateways and groups", add_help=False)
    a.add_argument("args", nargs=argparse.REMAINDER)
    m = sub.add_parser("migrate", help="copy Kafka topics into Quire at their original offsets (a PySpark job)",
                       add_help=False)
    m.add_argument("args", nargs=argparse.REMAINDER)
    return p


def _split_admin(argv: list[str]) -> tuple[list[str], list[str], str] | None:
    """(global options, everything after the command, the command) when the command is admin
    or migrate: their arguments go to their own parsers untouched."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--log-level":
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return (argv[:i], argv[i + 1:], a) if a in ("admin", "migrate") else None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    split = _split_admin(argv)
    args = parser.parse_args(argv if split is None else [*split[0], split[2]])
    from quire.logs import setup_logging

    setup_logging(args.log_level)
    if split is not None and split[2] == "migrate":
        from pipeline.migrate import main as migrate_main

        return migrate_main(split[1])
    if split is not None:
        from quire.admin import main as admin_main

        return admin_main(split[1])
    from quire.malloc import tune_malloc

    tune_malloc(reuse_heap=args.command == "bookie")  # before the servers allocate their buffers
    try:
        if args.command == "gateway":
            from quire.gateway import main as gateway_main

            return gateway_main(args)
        if args.command == "standalone":
            from quire.standalone import main as standalone_main

            return standalone_main(args)
        if args.command == "bookie":
            from quire.bookie import main as bookie_main

            return bookie_main(args)
        if args.command == "recovery":
            from quire.recovery import main as recovery_main

            return recovery_main(args)
    except settings.SettingsError as e:
        print(f"quire {args.command}: {e}", file=sys.stderr)
        return 2
    except HandlerImportError as e:  # a broken install, not a setting: exit 1
        print(f"quire {args.command}: {e}", file=sys.stderr)
        return 1
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
