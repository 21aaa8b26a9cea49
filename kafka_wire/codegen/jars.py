"""The generator's input: Apache Kafka's JSON schemas, read from pinned jars on Maven Central.

`kafka-clients` carries the wire protocol's schemas (`common/message/*.json`); the coordinator
jars carry the record schemas of Kafka's internal topics. Each jar is pinned by version and
SHA-256, downloaded once into a cache (`$QUIRE_CACHE` or `~/.cache/quire`, under `jars/`) and
verified on every download, so a clone needs nothing beside it.

`python3 -m kafka_wire.codegen.jars` fetches them all (the install and test scripts run it).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

KAFKA_VERSION = "4.4.0"
MAVEN_CENTRAL = os.environ.get("QUIRE_MAVEN_REPO", "https://repo1.maven.org/maven2")
SCHEMA_DIR_IN_JAR = "common/message/"


@dataclass(frozen=True)
class Jar:
    group: str
    artifact: str
    version: str
    sha256: str
    include: tuple[str, ...]  # file-name globs of the schemas taken from common/message/

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def url(self) -> str:
        return f"{MAVEN_CENTRAL}/{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"


JARS: tuple[Jar, ...] = (
    Jar("org.apache.kafka", "kafka-clients", KAFKA_VERSION,
        "1ab07317eb6633241392449d329dbdc5d9251e6ffc4926860f42dd966e88bdf9", ("*.json",)),
    # `__consumer_offsets` records of the classic group protocol (record types 1-2; type 0, the
    # Legacy* schemas, has type 1's layout), of the consumer group protocol (KIP-848, types
    # 3-8 and 16) and the share groups' metadata and members (types 11 and 10). The other share
    # and the streams group records are not written by this coordinator.
    Jar("org.apache.kafka", "kafka-group-coordinator", KAFKA_VERSION,
        "3fc830ace54f6a13f9f536bc0564bf39a68797365a4c4b194bd7db4fb893b2bc",
        ("OffsetCommitKey.json", "OffsetCommitValue.json", "GroupMetadataKey.json", "GroupMetadataValue.json",
         "ConsumerGroup*.json", "ShareGroupMetadataKey.json", "ShareGroupMetadataValue.json",
         "ShareGroupMemberMetadataKey.json", "ShareGroupMemberMetadataValue.json")),
    # `__transaction_state` records.
    Jar("org.apache.kafka", "kafka-transaction-coordinator", KAFKA_VERSION,
        "1d5324d59776d6b7f324cfdc87647b1e88f9823332201c0324e7ae9f210d915d", ("TransactionLog*.json",)),
)


class JarError(RuntimeError):
    pass


def cache_dir() -> Path:
    base = os.environ.get("QUIRE_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "quire") / "jars"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(jar: Jar) -> Path:
    """The cached jar, downloaded (and checked against its pinned SHA-256) if missing."""
    path = cache_dir() / jar.file_name
    if path.is_file():
        # A cached jar is trusted only while it still matches its pin (e.g. after a pin change).
        if _sha256(path) == jar.sha256:
            return path
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{jar.file_name}.")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(jar.url, timeout=120) as resp:
            while chunk := resp.read(1 << 20):
                out.write(chunk)
        got = _sha256(tmp)
        if got != jar.sha256:
            raise JarError(f"{jar.url}: SHA-256 {got} does not match the pinned {jar.sha256}")
        tmp.replace(path)
    except OSError as e:
        raise JarError(f"cannot download {jar.url}: {e}") from e
    finally:
        tmp.unlink(missing_ok=True)
    return path


def fetch_all() -> list[Path]:
    return [fetch(jar) for jar in JARS]


def read_schemas(jars: tuple[Jar, ...] = JARS) -> dict[str, str]:
    """Schema file name -> JSON text, from every pinned jar (fetched if needed)."""
    out: dict[str, str] = {}
    for jar in jars:
        with zipfile.ZipFile(fetch(jar)) as zf:
            for member in zf.namelist():
                name = member[len(SCHEMA_DIR_IN_JAR):]
                if not member.startswith(SCHEMA_DIR_IN_JAR) or "/" in name:
                    continue
                if any(fnmatch(name, pat) for pat in jar.include):
                    if name in out:
                        raise JarError(f"{name} is in more than one pinned jar")
                    out[name] = zf.read(member).decode("utf-8")
    return out


def main() -> int:
    try:
        for path in fetch_all():
            print(path)
    except JarError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
