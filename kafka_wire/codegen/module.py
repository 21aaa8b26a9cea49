"""Whole generated files: one module per API (request + response), per header, per data schema,
and the registry in kafka_wire/messages/__init__.py."""

from __future__ import annotations

from kafka_wire.codegen.emit import (
    HEADER,
    _Ctx,
    cls_ref,
    default_expr,
    emit_decoder,
    emit_encoder,
    is_mutable_default,
    positional,
    py_type,
    tagged_at,
)
from kafka_wire.codegen.schema import MessageDef, StructDef, load_all, snake

_IMPORTS = """\
from __future__ import annotations

from struct import Struct as _S
from struct import pack
from uuid import UUID

from kafka_wire.primitives import (
    NO_TAGS,
    ZERO_UUID,
    EncodeError,
    FieldInfo,
    Records,
    Struct,
    TaggedFields,
    decode_tagged,
    not_in_version,
    null_error,
    pack_i32,
    r_alen,
    r_bytes,
    r_calen,
    r_cbytes,
    r_crecs,
    r_cstr,
    r_fixed_array,
    r_recs,
    r_str,
    r_tags,
    tagged_payload,
    truncated,
    w_bytes,
    w_cbytes,
    w_cstr,
    w_nbytes,
    w_ncbytes,
    w_ncstr,
    w_nstr,
    w_str,
    w_tags,
    w_uvarint,
)

_new = object.__new__
"""


def module_name(msg: MessageDef) -> str:
    base = msg.name
    for suffix in ("Request", "Response"):
        if msg.kind in ("request", "response") and base.endswith(suffix):
            base = base[: -len(suffix)]
    return snake(base)


def present_versions(msg: MessageDef) -> dict[str, list[int]]:
    """For each struct, the message versions in which it can appear."""
    out: dict[str, set[int]] = {}

    def walk(sd: StructDef, v: int) -> None:
        out.setdefault(sd.name, set()).add(v)
        for f in sd.fields:
            if f.struct is not None and (positional(f, v) or tagged_at(msg, f, v)):
                walk(f.struct, v)

    for v in msg.versions():
        walk(msg.root, v)
    return {k: sorted(vs) for k, vs in out.items()}


def _class_source(msg: MessageDef, sd: StructDef, indent: str) -> list[str]:
    is_root = sd is msg.root
    lines = [f"{indent}class {sd.name if not is_root else msg.name}(Struct):"]
    i2 = indent + "    "
    ver = f"{msg.valid[0]}-{msg.valid[1]}"
    flex_min = msg.flexible_min()
    doc = f"{msg.name} (versions {ver}" + (f", flexible from {flex_min})" if flex_min is not None else ")")
    if not is_root:
        doc = f"{sd.name} in {doc}"
    lines.append(f'{i2}"""{doc}."""')
    lines.append("")
    slots = [f.attr for f in sd.fields] + ["unknown_tagged_fields"]
    lines.append(f"{i2}__slots__ = ({', '.join(repr(s) for s in slots)},)")
    if is_root:
        lines.append(f"{i2}API_KEY = {msg.api_key!r}")
        lines.append(f"{i2}MIN_VERSION = {msg.valid[0]}")
        lines.append(f"{i2}MAX_VERSION = {msg.valid[1]}")
        lines.append(f"{i2}FLEXIBLE_MIN = {flex_min!r}")
        lines.append(f"{i2}LATEST_UNSTABLE = {msg.latest_unstable!r}")
    lines.append("")
    for f in sd.fields:
        lines.append(f"{i2}{f.attr}: {py_type(msg, f)}")
    lines.append(f"{i2}unknown_tagged_fields: TaggedFields")
    if is_root:
        for nested in msg.structs:
            lines.append("")
            lines += _class_source(msg, nested, i2)
    lines.append("")
    params = []
    for f in sd.fields:
        d = "..." if is_mutable_default(msg, f) else default_expr(msg, f)
        params.append(f"{f.attr}: {py_type(msg, f)} = {d}")
    params.append("unknown_tagged_fields: TaggedFields = NO_TAGS")
    lines.append(f"{i2}def __init__(self, *, {', '.join(params)}) -> None:")
    for f in sd.fields:
        if is_mutable_default(msg, f):
            lines.append(f"{i2}    self.{f.attr} = {default_expr(msg, f)} if {f.attr} is ... else {f.attr}")
        else:
            lines.append(f"{i2}    self.{f.attr} = {f.attr}")
    lines.append(f"{i2}    self.unknown_tagged_fields = unknown_tagged_fields")
    return lines


def _field_infos(msg: MessageDef, sd: StructDef) -> str:
    items = []
    for f in sd.fields:
        hi = f.versions.hi_or(msg.valid[1])
        nul = None
        if ever_any := [v for v in msg.versions() if v in f.nullable]:
            nul = (ever_any[0], ever_any[-1])
        struct = cls_ref(msg, f.struct) if f.struct is not None else "None"
        items.append(f"FieldInfo({f.attr!r}, {f.type!r}, ({f.versions.lo}, {hi}), {nul!r}, {f.tag!r}, "
                     f"{f.ignorable!r}, {struct})")
    inner = "".join(f"\n    {it}," for it in items)
    return f"{cls_ref(msg, sd)}._FIELDS = ({inner}\n)" if items else f"{cls_ref(msg, sd)}._FIELDS = ()"


def render_module(msgs: list[MessageDef]) -> str:
    ctx = _Ctx()
    tables: list[str] = []
    classes: list[str] = []
    for msg in msgs:
        classes += [*_class_source(msg, msg.root, ""), "", ""]
        present = present_versions(msg)
        dec: dict[tuple[str, int], str] = {}
        enc: dict[tuple[str, int], str] = {}

        def build(sd: StructDef, v: int, msg: MessageDef = msg, dec: dict[tuple[str, int], str] = dec,
                  enc: dict[tuple[str, int], str] = enc) -> None:
            if (sd.name, v) in dec:
                return
            for f in sd.fields:
                if f.struct is not None and (positional(f, v) or tagged_at(msg, f, v)):
                    build(f.struct, v)
            dec[(sd.name, v)] = emit_decoder(msg, sd, v, ctx, dec)
            enc[(sd.name, v)] = emit_encoder(msg, sd, v, ctx, enc)

        for v in msg.versions():
            build(msg.root, v)
        for sd in [msg.root, *msg.structs]:
            vs = present.get(sd.name, [])
            ref = cls_ref(msg, sd)
            tables.append(f"{ref}._DEC = {{{', '.join(f'{v}: {dec[(sd.name, v)]}' for v in vs)}}}")
            tables.append(f"{ref}._ENC = {{{', '.join(f'{v}: {enc[(sd.name, v)]}' for v in vs)}}}")
            tables.append(_field_infos(msg, sd))
    files = ", ".join(m.file for m in msgs)
    fmts = [f"{name} = _S({'>' + codes!r})" for codes, name in sorted(ctx.formats.items(), key=lambda t: t[1])]
    parts = [HEADER.format(files=files), '"""Kafka ' + " / ".join(m.name for m in msgs) + ' codecs."""', "",
             _IMPORTS, *fmts, "", "", "\n".join(classes).rstrip() + "\n", "",
             "\n\n".join(ctx.funcs), "", "\n".join(tables), ""]
    return "\n".join(parts)


def render_registry(msgs: list[MessageDef]) -> str:
    apis: dict[int, dict[str, MessageDef]] = {}
    others: list[MessageDef] = []
    for m in msgs:
        if m.kind in ("request", "response") and m.api_key is not None:
            apis.setdefault(m.api_key, {})[m.kind] = m
        else:
            others.append(m)
    rows = []
    for key in sorted(apis):
        req = apis[key]["request"]
        resp = apis[key]["response"]
        name = req.name[: -len("Request")]
        unstable = req.latest_unstable or resp.latest_unstable
        rows.append(f"    ({key}, {name!r}, {module_name(req)!r}, {req.name!r}, {resp.name!r}, {req.valid[0]}, "
                    f"{req.valid[1]}, {req.flexible_min()!r}, {unstable!r}),")
    data = [f"    {m.name!r}: ({module_name(m)!r}, {m.kind!r})," for m in others]
    return "\n".join([
        HEADER.format(files="all *.json"),
        '"""Registry of the generated modules. Import one with kafka_wire.api, which loads lazily."""',
        "",
        "# (api_key, name, module, request class, response class, min version, max version,",
        "#  first flexible version or None, latest version unstable)",
        "APIS: tuple[tuple[int, str, str, str, str, int, int, int | None, bool], ...] = (",
        *rows,
        ")",
        "",
        "# headers and data schemas: class name -> (module, schema type)",
        "OTHERS: dict[str, tuple[str, str]] = {",
        *data,
        "}",
        "",
    ])


def generate(schemas: dict[str, str]) -> dict[str, str]:
    """File name (within kafka_wire/messages) -> source, from {schema file name: JSON text}."""
    msgs = load_all(schemas)
    by_module: dict[str, list[MessageDef]] = {}
    for m in msgs:
        by_module.setdefault(module_name(m), []).append(m)
    out: dict[str, str] = {"__init__.py": render_registry(msgs)}
    for mod, ms in sorted(by_module.items()):
        ms.sort(key=lambda m: {"request": 0, "response": 1}.get(m.kind, 2))
        out[f"{mod}.py"] = render_module(ms)
    return out
