"""`python3 -m kafka_wire.codegen [--check] [--schemas DIR]`: write (or check) kafka_wire/messages from the
schemas in the pinned Kafka jars (kafka_wire/codegen/jars.py), or from a folder of schemas."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kafka_wire.codegen.jars import JarError, read_schemas
from kafka_wire.codegen.module import generate
from kafka_wire.codegen.schema import read_schema_dir

OUTPUT_DIR = Path(__file__).resolve().parents[1] / "messages"


def stale_files(files: dict[str, str], out_dir: Path) -> list[str]:
    """Generated files that are missing, differ, or should not be there."""
    stale = [name for name, text in files.items()
             if not (out_dir / name).is_file() or (out_dir / name).read_text(encoding="utf-8") != text]
    if out_dir.is_dir():
        stale += [p.name for p in out_dir.glob("*.py") if p.name not in files]
    return sorted(stale)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m kafka_wire.codegen", description=__doc__)
    ap.add_argument("--check", action="store_true", help="exit 1 listing stale files instead of writing")
    ap.add_argument("--schemas", type=Path, default=None,
                    help="read the schemas from this folder instead of the pinned jars")
    ap.add_argument("--out", type=Path, default=OUTPUT_DIR)
    args = ap.parse_args(argv)
    if args.schemas is not None:
        if not args.schemas.is_dir():
            print(f"schema folder not found: {args.schemas}", file=sys.stderr)
            return 2
        schemas = read_schema_dir(args.schemas)
    else:
        try:
            schemas = read_schemas()
        except JarError as e:
            print(e, file=sys.stderr)
            return 2
    files = generate(schemas)
    stale = stale_files(files, args.out)
    if args.check:
        for name in stale:
            print(f"stale: {args.out / name}")
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name in stale:
        path = args.out / name
        if name in files:
            path.write_text(files[name], encoding="utf-8")
        else:
            path.unlink()
    print(f"wrote {len(stale)} of {len(files)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
