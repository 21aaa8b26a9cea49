"""Kafka's message schemas (`*.json` with `//` comments) loaded into a small typed model."""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Widths of the fixed-size primitives on the wire, and their struct format codes.
FIXED_SIZES = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
               "float64": 8, "uuid": 16}
STRUCT_CODES = {"bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
                "int64": "q", "float64": "d", "uuid": "16s"}
VAR_TYPES = {"string", "bytes", "records"}
PRIMITIVES = set(FIXED_SIZES) | VAR_TYPES

# Attribute names that would shadow the generated classes' methods, or read badly.
_RESERVED = {"encode", "decode", "decode_from", "encode_into", "unknown_tagged_fields"}
# Friendlier names the rest of the project uses for the request header.
FIELD_RENAMES = {("RequestHeader", "RequestApiKey"): "api_key",
                 ("RequestHeader", "RequestApiVersion"): "api_version"}
# RequestHeader v0 (no client id) is still spoken by ControlledShutdown v0; the schema lists 1-2.
VALID_VERSION_OVERRIDES = {"RequestHeader": (0, 2)}


def strip_comments(text: str) -> str:
    """Remove `//` line comments, leaving `//` inside JSON strings alone."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class Versions:
    """A version range; hi is None for an open range ("N+"), lo > hi means none."""

    lo: int
    hi: int | None

    @staticmethod
    def parse(text: str | None) -> Versions:
        if text is None or text == "none":
            return Versions(1, 0)
        text = text.strip()
        if text.endswith("+"):
            return Versions(int(text[:-1]), None)
        if "-" in text:
            a, b = text.split("-")
            return Versions(int(a), int(b))
        return Versions(int(text), int(text))

    def hi_or(self, default: int) -> int:
        return default if self.hi is None else self.hi

    def __contains__(self, v: object) -> bool:
        return isinstance(v, int) and v >= self.lo and (self.hi is None or v <= self.hi)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    if keyword.iskeyword(s) or s in _RESERVED:
        s += "_"
    return s


@dataclass
class FieldDef:
    name: str  # schema name, e.g. "ThrottleTimeMs"
    attr: str  # python attribute, e.g. "throttle_time_ms"
    type: str  # "int32", "string", "[]int32", "[]Topic", "Topic"
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    ignorable: bool
    default: Any  # raw schema default (string) or None
    flexible_override: Versions | None
    struct: StructDef | None = None  # element/struct type when the type names a struct

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.struct is not None


@dataclass
class StructDef:
    name: str  # class name within the message, e.g. "TopicProduceData"
    fields: list[FieldDef] = field(default_factory=list)


@dataclass
class MessageDef:
    name: str  # "ProduceRequest"
    kind: str  # request / response / header / data
    api_key: int | None
    valid: tuple[int, int]
    flexible: Versions
    latest_unstable: bool
    root: StructDef
    structs: list[StructDef]  # every nested struct, parents before children, each once
    file: str

    def versions(self) -> range:
        return range(self.valid[0], self.valid[1] + 1)

    def flexible_min(self) -> int | None:
        for v in self.versions():
            if v in self.flexible:
                return v
        return None


def _parse_fields(msg_name: str, raw_fields: list[dict[str, Any]], common: dict[str, StructDef],
                  structs: list[StructDef], seen: dict[str, StructDef]) -> list[FieldDef]:
    out: list[FieldDef] = []
    attrs: set[str] = set()
    for rf in raw_fields:
        attr = FIELD_RENAMES.get((msg_name, rf["name"])) or snake(rf["name"])
        if attr in attrs:
            raise ValueError(f"{msg_name}: duplicate attribute {attr}")
        attrs.add(attr)
        tag = rf.get("tag")
        # A tagged-only field may omit "versions": it then exists in its tagged versions.
        versions = rf.get("versions", rf.get("taggedVersions") if tag is not None else None)
        f = FieldDef(
            name=rf["name"], attr=attr, type=rf["type"], versions=Versions.parse(versions),
            nullable=Versions.parse(rf.get("nullableVersions")),
            tagged=Versions.parse(rf.get("taggedVersions")) if tag is not None else Versions(1, 0),
            tag=tag, ignorable=bool(rf.get("ignorable", False)), default=rf.get("default"),
            flexible_override=Versions.parse(rf["flexibleVersions"]) if "flexibleVersions" in rf else None,
        )
        elem = f.elem
        if elem not in PRIMITIVES:
            if "fields" in rf:
                if elem in seen:
                    raise ValueError(f"{msg_name}: struct {elem} defined twice")
                sd = StructDef(elem)
                seen[elem] = sd
                structs.append(sd)
                sd.fields = _parse_fields(msg_name, rf["fields"], common, structs, seen)
                f.struct = sd
            elif elem in common:
                f.struct = common[elem]
            else:
                raise ValueError(f"{msg_name}: unknown type {f.type}")
        out.append(f)
    return out


def load_message(file: str, text: str) -> MessageDef:
    raw = json.loads(strip_comments(text))
    name = raw["name"]
    structs: list[StructDef] = []
    seen: dict[str, StructDef] = {}
    common: dict[str, StructDef] = {}
    for cs in raw.get("commonStructs", []):
        sd = StructDef(cs["name"])
        common[cs["name"]] = sd
        seen[cs["name"]] = sd
    # Common structs may refer to each other: create them all first, then fill in their fields.
    for cs in raw.get("commonStructs", []):
        sd = common[cs["name"]]
        structs.append(sd)
        sd.fields = _parse_fields(name, cs["fields"], common, structs, seen)
    root = StructDef(name)
    root.fields = _parse_fields(name, raw.get("fields", []), common, structs, seen)
    vv = Versions.parse(raw["validVersions"])
    valid = VALID_VERSION_OVERRIDES.get(name, (vv.lo, vv.hi if vv.hi is not None else vv.lo))
    return MessageDef(
        name=name, kind=raw["type"], api_key=raw.get("apiKey"), valid=valid,
        flexible=Versions.parse(raw.get("flexibleVersions")),
        latest_unstable=bool(raw.get("latestVersionUnstable", False)), root=root, structs=structs,
        file=file,
    )


def load_all(schemas: dict[str, str]) -> list[MessageDef]:
    """Every schema of {file name: JSON text}, in file-name order."""
    return [load_message(name, schemas[name]) for name in sorted(schemas)]


def read_schema_dir(schema_dir: Path) -> dict[str, str]:
    """{file name: JSON text} of a folder of schemas (an alternative input to the pinned jars)."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(schema_dir.glob("*.json"))}
