#!/usr/bin/env python3
"""Generate kpax/proto/messages/_generated and kpax/proto/error_codes.py from Kafka's JSON specs.

Usage: ``tools/gen_proto.py --specs DIR [--check]`` (DIR: what tools/kafka_specs.py
builds from a kafka-clients jar; ``make generate`` does both).

Reads every ``*Request.json``/``*Response.json`` pair, the header specs and the
``data`` specs in DIR (JSON with ``//`` comments), plus ``errors.tsv``, and
writes Python: one module per API (request + response), ``headers.py``,
``data.py``, ``_schema.py`` (a compact field table the property tests build
their strategies from) and ``__init__.py`` (lazy: a module is imported when one of
its classes is first used, by name or through REQUESTS/RESPONSES). For each struct and each distinct
wire layout across versions it emits one straight-line encoder and one
decoder; fixed-width runs of fields are packed with a single precompiled
``struct.Struct``. Output is deterministic; ``--check`` compares instead of
writing and exits 1 naming the stale files.

Imports: the standard library only (the generated code imports kpax.proto).
"""

# ruff: noqa: E501  (the error-description table below has long lines)
from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "kpax" / "proto" / "messages" / "_generated"
ERRORS_OUT = ROOT / "kpax" / "proto" / "error_codes.py"
MAXV = 0x7FFF

FIXED = {
    "bool": ("?", 1, "bool", "False"),
    "int8": ("b", 1, "int", "0"),
    "int16": ("h", 2, "int", "0"),
    "uint16": ("H", 2, "int", "0"),
    "int32": ("i", 4, "int", "0"),
    "uint32": ("I", 4, "int", "0"),
    "int64": ("q", 8, "int", "0"),
    "float64": ("d", 8, "float", "0.0"),
    "uuid": ("16s", 16, "uuid.UUID", "ZERO_UUID"),
}
PRIMS = {*FIXED, "string", "bytes", "records"}


# --------------------------------------------------------------------- model

Range = tuple[int, int]


def parse_range(text: str | None) -> Range:
    if text is None or text == "none":
        return (1, 0)
    text = text.strip()
    if text.endswith("+"):
        return (int(text[:-1]), MAXV)
    if "-" in text:
        lo, hi = text.split("-")
        return (int(lo), int(hi))
    return (int(text), int(text))


def in_range(r: Range | None, v: int) -> bool:
    return r is not None and r[0] <= v <= r[1]


def range_text(r: Range) -> str:
    if r[0] > r[1]:
        return "none"
    if r[1] == MAXV:
        return f"{r[0]}+"
    return f"{r[0]}" if r[0] == r[1] else f"{r[0]}-{r[1]}"


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    if keyword.iskeyword(s) or s in {"unknown_tags", "encode", "decode"}:
        s += "_"
    return s


@dataclass
class Field:
    name: str
    attr: str
    type: str  # as in the spec: int32, string, []Foo, Foo, []int32
    versions: Range
    nullable: Range | None
    default: object
    ignorable: bool
    tag: int | None
    tagged: Range | None
    flexible: Range | None  # field-level override (RequestHeader.ClientId)
    map_key: bool
    struct: StructDef | None = None  # for struct / []struct types

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def base(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def ever_nullable(self) -> bool:
        n = self.nullable
        return n is not None and max(n[0], self.versions[0]) <= min(n[1], self.versions[1])


@dataclass
class StructDef:
    name: str  # spec name, e.g. MetadataRequestTopic
    qual: str  # MetadataRequest.MetadataRequestTopic (or MetadataRequest at top level)
    fields: list[Field] = field(default_factory=list)


@dataclass
class Spec:
    name: str
    kind: str  # request, response, header, data
    api_key: int | None
    versions: Range
    flexible: Range
    top: StructDef
    structs: list[StructDef]  # nested, children before parents


def strip_comments(text: str) -> str:
    out = []
    for line in text.splitlines():
        # `//` never occurs inside the specs' string values except in URLs; be careful.
        idx = _comment_index(line)
        out.append(line if idx < 0 else line[:idx])
    return "\n".join(out)


def _comment_index(line: str) -> int:
    in_str = False
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and in_str:
            i += 2
            continue
        if c == '"':
            in_str = not in_str
        elif not in_str and line.startswith("//", i):
            return i
        i += 1
    return -1


def load_spec(path: Path) -> Spec:
    raw = json.loads(strip_comments(path.read_text()))
    name = raw["name"]
    structs: dict[str, StructDef] = {}
    order: list[StructDef] = []
    common = {s["name"]: s for s in raw.get("commonStructs", [])}

    def build_fields(defs: list[dict[str, object]], owner: str) -> list[Field]:
        fields = []
        for d in defs:
            ftype = str(d["type"])
            f = Field(
                name=str(d["name"]),
                attr=snake(str(d["name"])),
                type=ftype,
                versions=parse_range(str(d["versions"])),
                nullable=parse_range(str(d["nullableVersions"]))
                if "nullableVersions" in d
                else None,
                default=d.get("default"),
                ignorable=bool(d.get("ignorable", False)),
                tag=int(str(d["tag"])) if "tag" in d else None,
                tagged=parse_range(str(d["taggedVersions"])) if "taggedVersions" in d else None,
                flexible=parse_range(str(d["flexibleVersions"]))
                if "flexibleVersions" in d
                else None,
                map_key=bool(d.get("mapKey", False)),
            )
            base = f.base
            if base not in PRIMS:
                sub = d.get("fields")
                if base in structs:
                    if sub is not None:
                        raise SystemExit(f"{path.name}: struct {base} defined twice")
                    f.struct = structs[base]
                else:
                    if sub is None:
                        if base not in common:
                            raise SystemExit(f"{path.name}: unknown type {base}")
                        sub = common[base]["fields"]
                    sd = StructDef(base, f"{name}.{base}")
                    structs[base] = sd
                    sd.fields = build_fields(sub, base)  # type: ignore[arg-type]
                    order.append(sd)
                    f.struct = sd
            fields.append(f)
        attrs = [f.attr for f in fields]
        if len(set(attrs)) != len(attrs):
            raise SystemExit(f"{path.name}: duplicate field names in {owner}")
        return fields

    top = StructDef(name, name)
    top.fields = build_fields(raw.get("fields", []), name)
    for sd in order:
        if sd.name == name:
            raise SystemExit(f"{path.name}: struct named like its message")
    return Spec(
        name=name,
        kind=raw["type"],
        api_key=raw.get("apiKey"),
        versions=parse_range(raw["validVersions"]),
        flexible=parse_range(raw.get("flexibleVersions", "none")),
        top=top,
        structs=order,
    )


# ------------------------------------------------------------ code emission


def api_name(spec: Spec) -> str:
    for suffix in ("Request", "Response"):
        if spec.name.endswith(suffix):
            return spec.name[: -len(suffix)]
    return spec.name


def alias(qual: str) -> str:
    return "_C_" + qual.replace(".", "_")


class ModuleGen:
    """Emits one module: classes, struct constants, encoders, decoders, tables."""

    def __init__(self) -> None:
        self.structs: dict[str, str] = {}  # format -> constant name
        self.funcs: dict[tuple[object, ...], int] = {}  # (qual, layout) -> id
        self.func_code: list[str] = []
        self.schema: dict[str, list[tuple[object, ...]]] = {}

    # ---- helpers
    def sconst(self, fmt: str) -> str:
        name = self.structs.get(fmt)
        if name is None:
            name = f"_S{len(self.structs)}"
            self.structs[fmt] = name
        return name

    # ---- python types and defaults
    def elem_type(self, f: Field) -> str:
        b = f.base
        if f.struct is not None:
            return f.struct.qual
        if b in FIXED:
            return FIXED[b][2]
        if b == "string":
            return "str"
        if b == "bytes":
            return "bytes"
        raise SystemExit(f"bad element type {b}")

    def py_type(self, f: Field) -> str:
        if f.base == "records" and not f.is_array:
            return "bytes | bytearray | memoryview | None"
        t = self.elem_type(f)
        if f.is_array:
            t = f"list[{t}]"
        if f.ever_nullable or self.default_is_null(f):
            t += " | None"
        return t

    def default_is_null(self, f: Field) -> bool:
        return f.default == "null" or (f.base == "records" and not f.is_array)

    def default_expr(self, f: Field) -> str:
        """A Python expression for the field's default (fresh for mutables)."""
        if self.default_is_null(f):
            return "None"
        if f.is_array:
            return "[]"
        if f.struct is not None:
            return f"{f.struct.qual}()"
        b = f.base
        d = f.default
        if b == "bool":
            return "True" if str(d).lower() == "true" else "False"
        if b in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
            return str(int(str(d), 0)) if d not in (None, "") else "0"
        if b == "float64":
            return repr(float(str(d))) if d not in (None, "") else "0.0"
        if b == "string":
            return repr(str(d)) if d is not None else "''"
        if b == "bytes":
            return "b''"
        if b == "uuid":
            return "ZERO_UUID"
        raise SystemExit(f"no default for {f.name}")

    def default_is_mutable(self, f: Field) -> bool:
        return not self.default_is_null(f) and (f.is_array or f.struct is not None)

    # ---- layouts
    def kind(self, f: Field, v: int, flexible: bool) -> tuple[object, ...]:
        """Wire kind of field f at version v."""
        compact = flexible and (f.flexible is None or in_range(f.flexible, v))
        nullable = in_range(f.nullable, v)
        b = f.base
        if f.is_array:
            if f.struct is not None:
                return ("astruct", compact, nullable, self.layout(f.struct, v, flexible))
            if b in FIXED and b != "uuid":
                return ("afixed", compact, nullable, FIXED[b][0], FIXED[b][1])
            return ("aprim", compact, nullable, b)
        if f.struct is not None:
            return ("struct", nullable, self.layout(f.struct, v, flexible))
        if b in FIXED:
            return ("fixed", b)
        return (b, compact, nullable)

    def layout(self, sd: StructDef, v: int, flexible: bool) -> int:
        entries: list[tuple[object, ...]] = []
        for f in sd.fields:
            if not in_range(f.versions, v):
                entries.append(("absent", f.attr, f.ignorable))
                continue
            k = self.kind(f, v, flexible)
            if f.tag is not None and flexible and in_range(f.tagged, v):
                entries.append(("tag", f.attr, f.tag, k))
            else:
                entries.append(("field", f.attr, k))
        key = (sd.qual, flexible, tuple(entries))
        fid = self.funcs.get(key)
        if fid is None:
            fid = len(self.funcs)
            self.funcs[key] = fid
            self.emit_encoder(fid, sd, flexible, entries)
            self.emit_decoder(fid, sd, flexible, entries)
        return fid

    # ---- encoders
    def emit_encoder(
        self, fid: int, sd: StructDef, flexible: bool, entries: list[tuple[object, ...]]
    ) -> None:
        byattr = {f.attr: f for f in sd.fields}
        lines = [f"def _e{fid}(buf: bytearray, o: {sd.qual}) -> None:"]
        run: list[tuple[Field, str]] = []

        def flush() -> None:
            if not run:
                return
            fmt = ">" + "".join(FIXED[f.base][0] for f, _ in run)
            args = ", ".join(
                f"o.{f.attr}.bytes" if f.base == "uuid" else f"o.{f.attr}" for f, _ in run
            )
            lines.append(f"    buf += {self.sconst(fmt)}.pack({args})")
            run.clear()

        tagged: list[tuple[Field, int, tuple[object, ...]]] = []
        for e in entries:
            f = byattr[str(e[1])]
            if e[0] == "absent":
                if e[2]:
                    continue
                flush()
                vr = range_text(f.versions)
                test = self.nondefault_test(f, f"o.{f.attr}")
                lines.append(f"    if {test}:")
                lines.append(f"        raise _absent({f.attr!r}, {sd.qual!r}, {vr!r})")
            elif e[0] == "tag":
                tagged.append((f, int(str(e[2])), e[3]))  # type: ignore[arg-type]
            else:
                k = e[2]
                assert isinstance(k, tuple)
                if k[0] == "fixed":
                    run.append((f, k[1]))
                    continue
                flush()
                lines.extend("    " + ln for ln in self.write_value(f, k, f"o.{f.attr}", "buf"))
        flush()
        if flexible:
            if not tagged:
                lines.append("    if o.unknown_tags:")
                lines.append("        write_tags(buf, [], o.unknown_tags)")
                lines.append("    else:")
                lines.append("        buf.append(0)")
            else:
                lines.append("    tg: list[tuple[int, bytes]] = []")
                for f, tag, k in sorted(tagged, key=lambda t: t[1]):
                    lines.append(f"    if {self.nondefault_test(f, f'o.{f.attr}')}:")
                    lines.append("        tb = bytearray()")
                    lines.extend(
                        "        " + ln for ln in self.write_value(f, k, f"o.{f.attr}", "tb")
                    )
                    lines.append(f"        tg.append(({tag}, bytes(tb)))")
                lines.append("    write_tags(buf, tg, o.unknown_tags)")
        if len(lines) == 1:
            lines.append("    pass")
        self.func_code.append("\n".join(lines))

    def nondefault_test(self, f: Field, expr: str) -> str:
        d = self.default_expr(f)
        if d == "None":
            return f"{expr} is not None"
        if d == "[]":
            return f"{expr} != []"
        if d == "False":
            return f"{expr}"
        return f"{expr} != {d}"

    def write_value(self, f: Field, k: tuple[object, ...], expr: str, buf: str) -> list[str]:
        what = f.attr
        t = k[0]
        if t == "fixed":
            code = FIXED[str(k[1])][0]
            val = f"{expr}.bytes" if k[1] == "uuid" else expr
            return [f"{buf} += {self.sconst('>' + code)}.pack({val})"]
        if t == "string":
            return [f"write_str({buf}, {expr}, {k[1]}, {k[2]}, {what!r})"]
        if t in ("bytes", "records"):
            return [f"write_bytes({buf}, {expr}, {k[1]}, {k[2]}, {what!r})"]
        if t == "struct":
            if k[1]:
                return [
                    f"if {expr} is None:",
                    f"    {buf}.append(255)",
                    "else:",
                    f"    {buf}.append(1)",
                    f"    _e{k[2]}({buf}, {expr})",
                ]
            return [f"_e{k[2]}({buf}, {expr})"]
        if t == "astruct":
            return [f"write_array({buf}, {expr}, {k[1]}, {k[2]}, {what!r}, _e{k[3]})"]
        if t == "afixed":
            return [f"write_fixed_array({buf}, {expr}, {k[1]}, {k[2]}, {what!r}, {k[3]!r})"]
        if t == "aprim":
            fn = {"string": "_wstr", "bytes": "_wbytes", "uuid": "write_uuid"}[str(k[3])]
            if fn != "write_uuid":
                fn += "_c" if k[1] else "_n"
            return [f"write_array({buf}, {expr}, {k[1]}, {k[2]}, {what!r}, {fn})"]
        raise SystemExit(f"cannot write {k}")

    # ---- decoders
    def read_value(
        self, f: Field, k: tuple[object, ...], target: str, data: str, pos: str
    ) -> list[str]:
        what = f.attr
        t = k[0]
        if t == "fixed":
            code = FIXED[str(k[1])][0]
            size = FIXED[str(k[1])][1]
            if k[1] == "uuid":
                return [f"{target} = _uuid({data}, {pos})", f"{pos} += 16"]
            return [
                f"{target} = {self.sconst('>' + code)}.unpack_from({data}, {pos})[0]",
                f"{pos} += {size}",
            ]
        if t == "string":
            return [f"{target}, {pos} = read_str({data}, {pos}, {k[1]}, {k[2]}, {what!r})"]
        if t == "bytes":
            return [f"{target}, {pos} = read_bytes({data}, {pos}, {k[1]}, {k[2]}, {what!r})"]
        if t == "records":
            return [f"{target}, {pos} = read_records({data}, {pos}, {k[1]}, {k[2]}, {what!r})"]
        if t == "struct":
            if k[1]:
                return [
                    f"if {data}[{pos}] >= 128:",
                    f"    {target} = None",
                    f"    {pos} += 1",
                    "else:",
                    f"    {target}, {pos} = _d{k[2]}({data}, {pos} + 1)",
                ]
            return [f"{target}, {pos} = _d{k[2]}({data}, {pos})"]
        if t == "astruct":
            return [
                f"{target}, {pos} = read_array({data}, {pos}, {k[1]}, {k[2]}, {what!r}, _d{k[3]})"
            ]
        if t == "afixed":
            return [
                f"{target}, {pos} = read_fixed_array("
                f"{data}, {pos}, {k[1]}, {k[2]}, {what!r}, {k[3]!r}, {k[4]})"
            ]
        if t == "aprim":
            fn = {"string": "_rstr", "bytes": "_rbytes", "uuid": "read_uuid"}[str(k[3])]
            if fn != "read_uuid":
                fn += "_c" if k[1] else "_n"
            return [f"{target}, {pos} = read_array({data}, {pos}, {k[1]}, {k[2]}, {what!r}, {fn})"]
        raise SystemExit(f"cannot read {k}")

    def emit_decoder(
        self, fid: int, sd: StructDef, flexible: bool, entries: list[tuple[object, ...]]
    ) -> None:
        byattr = {f.attr: f for f in sd.fields}
        lines = [f"def _d{fid}(data: memoryview, pos: int) -> tuple[{sd.qual}, int]:"]
        run: list[Field] = []
        kwargs: list[str] = []

        def flush() -> None:
            if not run:
                return
            fmt = ">" + "".join(FIXED[f.base][0] for f in run)
            size = sum(FIXED[f.base][1] for f in run)
            names = [f"x_{f.attr}" for f in run]
            lhs = ", ".join(names) + ("," if len(names) == 1 else "")
            lines.append(f"    {lhs} = {self.sconst(fmt)}.unpack_from(data, pos)")
            lines.append(f"    pos += {size}")
            for f in run:
                if f.base == "uuid":
                    lines.append(f"    x_{f.attr} = _uuid_b(x_{f.attr})")
            run.clear()

        tagged: list[tuple[Field, int, tuple[object, ...]]] = []
        for e in entries:
            f = byattr[str(e[1])]
            if e[0] == "absent":
                continue
            if e[0] == "tag":
                tagged.append((f, int(str(e[2])), e[3]))  # type: ignore[arg-type]
                continue
            k = e[2]
            assert isinstance(k, tuple)
            kwargs.append(f"{f.attr}=x_{f.attr}")
            if k[0] == "fixed":
                run.append(f)
                continue
            flush()
            lines.extend("    " + ln for ln in self.read_value(f, k, f"x_{f.attr}", "data", "pos"))
        flush()
        extra = ""
        if flexible:
            if not tagged:
                lines.append("    if data[pos] == 0:")
                lines.append("        x_tags = None")
                lines.append("        pos += 1")
                lines.append("    else:")
                lines.append("        x_tags, pos = read_tags(data, pos)")
            else:
                lines.append("    x_tags: dict[int, bytes] | None = None")
                lines.append("    kw: dict[str, Any] = {}")
                lines.append("    if data[pos] == 0:")
                lines.append("        pos += 1")
                lines.append("    else:")
                lines.append("        n, pos = read_uvarint(data, pos)")
                lines.append("        for _ in range(n):")
                lines.append("            tag, pos = read_uvarint(data, pos)")
                lines.append("            size, pos = read_uvarint(data, pos)")
                lines.append("            end = pos + size")
                lines.append("            if end > len(data):")
                lines.append("                raise _trunc_tag(tag)")
                first = True
                for f, tag, k in sorted(tagged, key=lambda t: t[1]):
                    lines.append(f"            {'if' if first else 'elif'} tag == {tag}:")
                    first = False
                    lines.append("                sub = data[:end]")
                    lines.extend(
                        "                " + ln
                        for ln in self.read_value(f, k, f"kw[{f.attr!r}]", "sub", "pos")
                    )
                    lines.append("                if pos != end:")
                    lines.append(f"                    raise _bad_tag({tag}, {f.attr!r})")
                lines.append("            else:")
                lines.append("                if x_tags is None:")
                lines.append("                    x_tags = {}")
                lines.append("                x_tags[tag] = bytes(data[pos:end])")
                lines.append("            pos = end")
                extra = ", **kw"
            kwargs.append("unknown_tags=x_tags")
        lines.append(f"    return {alias(sd.qual)}({', '.join(kwargs)}{extra}), pos")
        self.func_code.append("\n".join(lines))

    # ---- classes
    def class_code(self, sd: StructDef, indent: str, base: str, body: list[str]) -> list[str]:
        lines = [f"{indent}class {sd.name}({base}):"]
        lines.extend(body)
        attrs = [f.attr for f in sd.fields]
        slots = ", ".join(repr(a) for a in attrs) + ("," if len(attrs) == 1 else "")
        lines.append(f"{indent}    __slots__ = ({slots})")
        lines.append("")
        params = []
        assigns = []
        for f in sd.fields:
            t = self.py_type(f)
            if self.default_is_mutable(f):
                params.append(f"{f.attr}: {t} = _DEFAULT")
                assigns.append(
                    f"self.{f.attr} = {self.default_expr(f)} if {f.attr} is _DEFAULT else {f.attr}"
                )
            else:
                params.append(f"{f.attr}: {t} = {self.default_expr(f)}")
                assigns.append(f"self.{f.attr} = {f.attr}")
        params.append("unknown_tags: dict[int, bytes] | None = None")
        assigns.append("self.unknown_tags = unknown_tags")
        lines.append(f"{indent}    def __init__(")
        lines.append(f"{indent}        self,")
        lines.append(f"{indent}        *,")
        for p in params:
            lines.append(f"{indent}        {p},")
        lines.append(f"{indent}    ) -> None:")
        for a in assigns:
            lines.append(f"{indent}        {a}")
        lines.extend(self.map_key_helpers(sd, indent))
        return lines

    def map_key_helpers(self, sd: StructDef, indent: str) -> list[str]:
        """``<field>_by_<key>()`` dict views for arrays whose elements declare a mapKey."""
        lines: list[str] = []
        taken = {f.attr for f in sd.fields}
        for f in sd.fields:
            if not f.is_array or f.struct is None:
                continue
            keys = [k for k in f.struct.fields if k.map_key]
            if not keys:
                continue
            if len(keys) == 1:
                name = f"{f.attr}_by_{keys[0].attr}"
                ktype = self.py_type(keys[0])
                kexpr = f"e.{keys[0].attr}"
                what = f"its {keys[0].attr}"
            else:
                name = f"{f.attr}_by_key"
                ktype = f"tuple[{', '.join(self.py_type(k) for k in keys)}]"
                kexpr = f"({', '.join(f'e.{k.attr}' for k in keys)})"
                what = f"({', '.join(k.attr for k in keys)})"
            if name in taken:
                continue
            taken.add(name)
            lines.append("")
            lines.append(f"{indent}    def {name}(self) -> dict[{ktype}, {f.struct.qual}]:")
            lines.append(f'{indent}        """The elements of ``{f.attr}`` by {what}."""')
            lines.append(f"{indent}        return {{{kexpr}: e for e in self.{f.attr} or ()}}")
        return lines

    def schema_for(self, sd: StructDef) -> None:
        rows: list[tuple[object, ...]] = []
        for f in sd.fields:
            rows.append(
                (
                    f.attr,
                    f.type,
                    f.versions,
                    f.nullable if f.ever_nullable else None,
                    f.tag,
                    f.tagged,
                    f.struct.qual if f.struct is not None else None,
                    self.default_expr(f),
                    f.ignorable,
                    f.flexible,
                    f.name,
                )
            )
        self.schema[sd.qual] = rows

    def spec_classes(self, spec: Spec) -> list[str]:
        if spec.kind == "request":
            base = "Request"
        elif spec.kind == "response":
            base = "Response"
        else:
            base = "Data"
        flex = spec.flexible[0] if spec.flexible[0] <= spec.flexible[1] else None
        doc = (
            f'    """{spec.name} (versions {range_text(spec.versions)}'
            + (f", flexible from v{flex}" if flex is not None else ", never flexible")
            + ')."""'
        )
        body = [doc, ""]
        if spec.api_key is not None:
            body.append(f"    API_KEY: ClassVar[int] = {spec.api_key}")
        body.append(f"    API_NAME: ClassVar[str] = {api_name(spec)!r}")
        body.append(f"    MIN_VERSION: ClassVar[int] = {spec.versions[0]}")
        body.append(f"    MAX_VERSION: ClassVar[int] = {spec.versions[1]}")
        body.append(f"    FLEXIBLE_VERSION: ClassVar[int | None] = {flex}")
        if spec.kind == "request":
            resp = spec.name[: -len("Request")] + "Response"
            body.append(f"    RESPONSE: ClassVar[type[{resp}]]")
        elif spec.kind == "response":
            req = spec.name[: -len("Response")] + "Request"
            body.append(f"    REQUEST: ClassVar[type[{req}]]")
        body.append("")
        for sd in spec.structs:
            body.extend(self.class_code(sd, "    ", "Struct", [f'        """{sd.qual}."""', ""]))
            body.append("")
            self.schema_for(sd)
        self.schema_for(spec.top)
        return self.class_code(spec.top, "", base, body)

    def spec_tables(self, spec: Spec) -> list[str]:
        enc = []
        for v in range(spec.versions[0], spec.versions[1] + 1):
            flexible = in_range(spec.flexible, v)
            fid = self.layout(spec.top, v, flexible)
            enc.append(f"{v}: _e{fid}")
        dec = [e.replace("_e", "_d") for e in enc]
        return [
            f"{spec.name}._ENCODERS = {{{', '.join(enc)}}}",
            f"{spec.name}._DECODERS = {{{', '.join(dec)}}}",
        ]


HEADER = '''"""Generated by tools/gen_proto.py from Apache Kafka's JSON message specs: do not edit.

{doc}
"""

# ruff: noqa
from __future__ import annotations

import struct
import uuid
from typing import Any, ClassVar

from kpax.proto.api import Data, Request, Response, Struct
from kpax.proto.messages._generated._support import (
    _DEFAULT,
    _absent,
    _bad_tag,
    _rbytes_c,
    _rbytes_n,
    _rstr_c,
    _rstr_n,
    _trunc_tag,
    _uuid,
    _uuid_b,
    _wbytes_c,
    _wbytes_n,
    _wstr_c,
    _wstr_n,
)
from kpax.proto.primitives import (
    ZERO_UUID,
    read_array,
    read_bytes,
    read_fixed_array,
    read_records,
    read_str,
    read_tags,
    read_uuid,
    read_uvarint,
    write_array,
    write_bytes,
    write_fixed_array,
    write_str,
    write_tags,
    write_uuid,
)
'''


def render_module(specs: list[Spec], doc: str, names: list[str]) -> tuple[str, ModuleGen]:
    gen = ModuleGen()
    class_lines: list[str] = []
    for spec in specs:
        class_lines.extend(gen.spec_classes(spec))
        class_lines.append("")
        class_lines.append("")
    links = []
    for spec in specs:
        if spec.kind == "request":
            resp = spec.name[: -len("Request")] + "Response"
            links.append(f"{spec.name}.RESPONSE = {resp}")
            links.append(f"{resp}.REQUEST = {spec.name}")
    aliases = []
    for spec in specs:
        for sd in [*spec.structs, spec.top]:
            aliases.append(f"{alias(sd.qual)} = {sd.qual}")
    tables: list[str] = []
    for spec in specs:
        tables.extend(gen.spec_tables(spec))
    consts = [f"{n} = struct.Struct({fmt!r})" for fmt, n in gen.structs.items()]
    parts = [
        HEADER.format(doc=doc),
        f"__all__ = [{', '.join(repr(n) for n in names)}]",
        "",
        "\n".join(consts),
        "",
        "",
        "\n".join(class_lines).rstrip(),
        "",
        "",
        "\n".join(links),
        "",
        "\n".join(aliases),
        "",
        "",
        "\n\n\n".join(gen.func_code),
        "",
        "",
        "\n".join(tables),
        "",
    ]
    text = "\n".join(parts)
    text = re.sub(r"\n{4,}", "\n\n\n", text)
    return text, gen


SUPPORT = '''"""Generated by tools/gen_proto.py: small helpers shared by the generated modules.

Element readers/writers with fixed arguments (for arrays of strings/bytes),
error builders, and the mutable-default sentinel.
"""

# ruff: noqa
from __future__ import annotations

import uuid
from typing import Any

from kpax.proto.errors import InvalidMessageError, ProtocolError
from kpax.proto.primitives import read_bytes, read_str, write_bytes, write_str

#: Marks "use the spec default" for list and struct parameters (a fresh object each time).
_DEFAULT: Any = type("_DefaultType", (), {"__repr__": lambda self: "<default>"})()


def _absent(field: str, owner: str, versions: str) -> InvalidMessageError:
    return InvalidMessageError(
        f"field {field!r} of {owner} has a non-default value but exists only in versions {versions}"
    )


def _bad_tag(tag: int, field: str) -> ProtocolError:
    return ProtocolError(f"tagged field {tag} ({field}) does not match its declared size")


def _trunc_tag(tag: int) -> ProtocolError:
    return ProtocolError(f"tagged field {tag} runs past the end of the data")


def _uuid(data: memoryview, pos: int) -> uuid.UUID:
    if pos + 16 > len(data):
        raise ProtocolError("truncated uuid")
    return uuid.UUID(bytes=bytes(data[pos : pos + 16]))


def _uuid_b(raw: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=raw)


def _rstr_c(data: memoryview, pos: int) -> tuple[str | None, int]:
    return read_str(data, pos, True, False, "array element")


def _rstr_n(data: memoryview, pos: int) -> tuple[str | None, int]:
    return read_str(data, pos, False, False, "array element")


def _rbytes_c(data: memoryview, pos: int) -> tuple[bytes | None, int]:
    return read_bytes(data, pos, True, False, "array element")


def _rbytes_n(data: memoryview, pos: int) -> tuple[bytes | None, int]:
    return read_bytes(data, pos, False, False, "array element")


def _wstr_c(buf: bytearray, value: str) -> None:
    write_str(buf, value, True, False, "array element")


def _wstr_n(buf: bytearray, value: str) -> None:
    write_str(buf, value, False, False, "array element")


def _wbytes_c(buf: bytearray, value: bytes) -> None:
    write_bytes(buf, value, True, False, "array element")


def _wbytes_n(buf: bytearray, value: bytes) -> None:
    write_bytes(buf, value, False, False, "array element")
'''


def module_name(api: str) -> str:
    return snake(api).rstrip("_")


def specs_version(specs_dir: Path) -> str:
    """The Kafka release the specs come from: their ``VERSION`` file (tools/kafka_specs.py
    writes it), or "unknown" for a directory without one."""
    path = specs_dir / "VERSION"
    return path.read_text().strip() if path.is_file() else "unknown"


def generate(specs_dir: Path) -> tuple[dict[Path, str], list[str]]:
    files: dict[Path, str] = {}
    skipped: list[str] = []
    specs: dict[str, Spec] = {}
    for path in sorted(specs_dir.glob("*.json")):
        spec = load_spec(path)
        if spec.versions[0] > spec.versions[1]:
            skipped.append(spec.name)
            continue
        specs[spec.name] = spec
    schema: dict[str, list[tuple[object, ...]]] = {}
    exports: dict[str, list[str]] = {}
    requests: list[tuple[int, str]] = []
    for name in sorted(specs):
        spec = specs[name]
        if spec.kind != "request":
            continue
        resp = specs[name[: -len("Request")] + "Response"]
        mod = module_name(api_name(spec))
        names = [spec.name, resp.name]
        text, gen = render_module(
            [spec, resp],
            f"The {api_name(spec)} API (key {spec.api_key}): {spec.name} and {resp.name}.",
            names,
        )
        files[OUT_DIR / f"{mod}.py"] = text
        schema.update(gen.schema)
        exports[mod] = names
        assert spec.api_key is not None
        assert resp.name == spec.name.removesuffix("Request") + "Response"
        requests.append((spec.api_key, spec.name))
    for kind, mod, doc in (
        ("header", "headers", "Request and response headers."),
        ("data", "data", "Versioned data types: consumer protocol, control records, ..."),
    ):
        group = [specs[n] for n in sorted(specs) if specs[n].kind == kind]
        names = [s.name for s in group]
        text, gen = render_module(group, doc, names)
        files[OUT_DIR / f"{mod}.py"] = text
        schema.update(gen.schema)
        exports[mod] = names
    files[OUT_DIR / "_support.py"] = SUPPORT
    # schema table
    srows = [
        '"""Generated by tools/gen_proto.py: field table of every message and struct.',
        "",
        "Maps a class's qualified name to its fields as tuples:",
        "(attr, spec type, versions, nullable versions or None, tag or None,",
        " tagged versions or None, struct qualname or None, default expression,",
        " ignorable, field-level flexible versions or None, spec field name).",
        " Version ranges are",
        f" (lo, hi) pairs, hi = {MAXV} meaning open-ended. Tests build strategies from it.",
        '"""',
        "",
        "# ruff: noqa",
        "from __future__ import annotations",
        "",
        "SCHEMA: dict[str, list[tuple[object, ...]]] = {",
    ]
    for qual in sorted(schema):
        srows.append(f"    {qual!r}: [")
        for row in schema[qual]:
            srows.append(f"        {row!r},")
        srows.append("    ],")
    srows.append("}")
    srows.append("")
    files[OUT_DIR / "_schema.py"] = "\n".join(srows)
    # package init: lazy (PEP 562), a message module is imported when first used
    init = [INIT_HEAD]
    for mod in sorted(exports):
        init.append(
            f"    from kpax.proto.messages._generated.{mod} import {', '.join(exports[mod])}"
        )
    init.append("")
    init.append("#: The Apache Kafka release whose message specs this package was generated from.")
    init.append(f"KAFKA_SPECS_VERSION = {specs_version(specs_dir)!r}")
    init.append("")
    init.append("#: The module (in this package) of each class, imported on first use.")
    init.append("_MODULES: dict[str, str] = {")
    all_names: list[str] = []
    for mod in sorted(exports):
        for name in exports[mod]:
            init.append(f"    {name!r}: {mod!r},")
        all_names.extend(exports[mod])
    init.append("}")
    init.append(INIT_LAZY)
    init.append("#: Request classes by api key (a module is imported on first lookup).")
    init.append("REQUESTS: Mapping[int, type[Request]] = _ByApiKey({")
    for key, name in sorted(requests):
        init.append(f"    {key}: {name!r},")
    init.append("})")
    init.append("#: Response classes by api key (a module is imported on first lookup).")
    init.append("RESPONSES: Mapping[int, type[Response]] = _ByApiKey({")
    for key, name in sorted(requests):
        init.append(f"    {key}: {name.removesuffix('Request') + 'Response'!r},")
    init.append("})")
    all_names = sorted([*all_names, "KAFKA_SPECS_VERSION", "REQUESTS", "RESPONSES"])
    init.append("")
    init.append("__all__ = [")
    for n in all_names:
        init.append(f"    {n!r},")
    init.append("]")
    init.append("")
    files[OUT_DIR / "__init__.py"] = "\n".join(init)
    files[ERRORS_OUT] = render_errors(specs_dir / "errors.tsv")
    return files, skipped


INIT_HEAD = '''"""Generated by tools/gen_proto.py: every message class, and REQUESTS by api key.

A message module is imported when one of its classes is first used (PEP 562
``__getattr__``: ``from kpax.proto.messages import FetchRequest``, or a lookup in
REQUESTS/RESPONSES by api key), not when this package is: a process that uses a
few APIs does not pay for importing all of them.
"""

# ruff: noqa
from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, overload

from kpax.proto.api import Message, Request, Response

if TYPE_CHECKING:'''

INIT_LAZY = '''

def _load(name: str) -> Any:
    """The class ``name``, its module imported (once: the class is then a global here)."""
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULES))


# Not seen by type checkers, which take the names from the TYPE_CHECKING imports above
# (and so still report a misspelt one).
if not TYPE_CHECKING:
    __getattr__ = _load


_M = TypeVar("_M", bound=Message)
_T = TypeVar("_T")


class _ByApiKey(Mapping[int, type[_M]]):
    """Message classes by api key; a class's module is imported on its first lookup."""

    __slots__ = ("_loaded", "_names")

    def __init__(self, names: dict[int, str]) -> None:
        self._names = names
        self._loaded: dict[int, type[_M]] = {}

    def __getitem__(self, key: int) -> type[_M]:
        cls = self._loaded.get(key)
        if cls is None:
            cls = _load(self._names[key])
            self._loaded[key] = cls
        return cls

    @overload
    def get(self, key: int, /) -> type[_M] | None: ...
    @overload
    def get(self, key: int, /, default: type[_M] | _T) -> type[_M] | _T: ...
    def get(self, key: int, /, default: object = None) -> object:
        cls = self._loaded.get(key)
        if cls is not None:
            return cls
        return self[key] if key in self._names else default

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __iter__(self) -> Iterator[int]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return repr(dict(self))

'''


# --------------------------------------------------------------- error codes

# Our own one-line summary of each broker error code.
DESCRIPTIONS: dict[str, str] = {
    "UNKNOWN_SERVER_ERROR": "The broker hit an unexpected failure while handling the request.",
    "OFFSET_OUT_OF_RANGE": "The requested offset is outside the partition's log (before its start or after its end).",
    "CORRUPT_MESSAGE": "A record failed its CRC or size check, or is otherwise malformed.",
    "UNKNOWN_TOPIC_OR_PARTITION": "The broker does not host this topic or partition.",
    "INVALID_FETCH_SIZE": "The fetch size asked for is not valid.",
    "LEADER_NOT_AVAILABLE": "The partition has no leader right now, e.g. during an election.",
    "NOT_LEADER_OR_FOLLOWER": "This broker is neither leader nor follower of the partition: refresh metadata.",
    "REQUEST_TIMED_OUT": "The broker gave up waiting for the request to complete.",
    "BROKER_NOT_AVAILABLE": "The broker is not available.",
    "REPLICA_NOT_AVAILABLE": "A replica the request needs is not available.",
    "MESSAGE_TOO_LARGE": "A record batch is larger than the topic or broker allows.",
    "STALE_CONTROLLER_EPOCH": "The request carries an outdated controller epoch.",
    "OFFSET_METADATA_TOO_LARGE": "The metadata string attached to a committed offset is too long.",
    "NETWORK_EXCEPTION": "The broker lost a connection while handling the request.",
    "COORDINATOR_LOAD_IN_PROGRESS": "The coordinator is still loading its state; retry shortly.",
    "COORDINATOR_NOT_AVAILABLE": "The group or transaction coordinator is not available.",
    "NOT_COORDINATOR": "This broker is not the coordinator for the group or transactional id.",
    "INVALID_TOPIC_EXCEPTION": "The topic name is invalid, or the operation is not allowed on this (internal) topic.",
    "RECORD_LIST_TOO_LARGE": "The batch of records exceeds the configured segment size.",
    "NOT_ENOUGH_REPLICAS": "Fewer in-sync replicas than min.insync.replicas: the write was refused.",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": "The write was stored but too few in-sync replicas acknowledged it.",
    "INVALID_REQUIRED_ACKS": "The acks value is not one of -1, 0 or 1.",
    "ILLEGAL_GENERATION": "The group generation in the request is not the current one.",
    "INCONSISTENT_GROUP_PROTOCOL": "The member's protocol type or protocols do not match the group's.",
    "INVALID_GROUP_ID": "The group id is empty or otherwise invalid.",
    "UNKNOWN_MEMBER_ID": "The coordinator does not know this member id.",
    "INVALID_SESSION_TIMEOUT": "The session timeout is outside the broker's allowed range.",
    "REBALANCE_IN_PROGRESS": "The group is rebalancing; rejoin it.",
    "INVALID_COMMIT_OFFSET_SIZE": "The offset commit was rejected because of its size.",
    "TOPIC_AUTHORIZATION_FAILED": "The principal may not access this topic.",
    "GROUP_AUTHORIZATION_FAILED": "The principal may not access this group.",
    "CLUSTER_AUTHORIZATION_FAILED": "The principal may not perform this cluster-level operation.",
    "INVALID_TIMESTAMP": "A record timestamp is outside the range the topic accepts.",
    "UNSUPPORTED_SASL_MECHANISM": "The broker does not offer the requested SASL mechanism.",
    "ILLEGAL_SASL_STATE": "The request is not allowed in the current SASL exchange state.",
    "UNSUPPORTED_VERSION": "The broker does not support this version of the API.",
    "TOPIC_ALREADY_EXISTS": "A topic with this name already exists.",
    "INVALID_PARTITIONS": "The partition count is invalid.",
    "INVALID_REPLICATION_FACTOR": "The replication factor is invalid (e.g. larger than the broker count).",
    "INVALID_REPLICA_ASSIGNMENT": "The replica assignment is invalid.",
    "INVALID_CONFIG": "A configuration value is invalid.",
    "NOT_CONTROLLER": "This broker is not the active controller.",
    "INVALID_REQUEST": "The request is malformed or inconsistent; the broker log says more.",
    "UNSUPPORTED_FOR_MESSAGE_FORMAT": "The operation needs a newer record format than the topic uses.",
    "POLICY_VIOLATION": "The request breaks a broker-side create/alter policy.",
    "OUT_OF_ORDER_SEQUENCE_NUMBER": "The broker saw a producer sequence number out of order.",
    "DUPLICATE_SEQUENCE_NUMBER": "The broker already has a batch with this producer sequence number.",
    "INVALID_PRODUCER_EPOCH": "The producer epoch is older than the broker's current one.",
    "INVALID_TXN_STATE": "The transactional operation is not allowed in the current transaction state.",
    "INVALID_PRODUCER_ID_MAPPING": "The producer id does not match the transactional id.",
    "INVALID_TRANSACTION_TIMEOUT": "The transaction timeout exceeds transaction.max.timeout.ms.",
    "CONCURRENT_TRANSACTIONS": "Another transaction operation for this producer is still completing.",
    "TRANSACTION_COORDINATOR_FENCED": "A newer transaction coordinator has taken over.",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "The principal may not use this transactional id.",
    "SECURITY_DISABLED": "Security features are disabled on the broker.",
    "OPERATION_NOT_ATTEMPTED": "The broker skipped this part because another part of the request failed.",
    "KAFKA_STORAGE_ERROR": "A disk holding the partition failed on the broker.",
    "LOG_DIR_NOT_FOUND": "The requested log directory does not exist.",
    "SASL_AUTHENTICATION_FAILED": "SASL authentication failed (bad credentials or mechanism setup).",
    "UNKNOWN_PRODUCER_ID": "The broker has no state for this producer id (it may have expired).",
    "REASSIGNMENT_IN_PROGRESS": "A partition reassignment is already in progress.",
    "DELEGATION_TOKEN_AUTH_DISABLED": "Delegation token authentication is disabled.",
    "DELEGATION_TOKEN_NOT_FOUND": "No such delegation token.",
    "DELEGATION_TOKEN_OWNER_MISMATCH": "The principal does not own or renew this delegation token.",
    "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED": "Delegation token requests are not allowed on this channel or with these credentials.",
    "DELEGATION_TOKEN_AUTHORIZATION_FAILED": "The principal may not manage this delegation token.",
    "DELEGATION_TOKEN_EXPIRED": "The delegation token has expired.",
    "INVALID_PRINCIPAL_TYPE": "The principal type is not supported.",
    "NON_EMPTY_GROUP": "The group still has members, so it cannot be deleted.",
    "GROUP_ID_NOT_FOUND": "No such group.",
    "FETCH_SESSION_ID_NOT_FOUND": "The broker does not know this fetch session; start a new one.",
    "INVALID_FETCH_SESSION_EPOCH": "The fetch session epoch is not the expected one.",
    "LISTENER_NOT_FOUND": "The leader has no endpoint for the listener the request came in on.",
    "TOPIC_DELETION_DISABLED": "Topic deletion is disabled on the cluster.",
    "FENCED_LEADER_EPOCH": "The leader epoch in the request is older than the broker's.",
    "UNKNOWN_LEADER_EPOCH": "The leader epoch in the request is newer than the broker knows.",
    "UNSUPPORTED_COMPRESSION_TYPE": "The consumer's fetch version cannot read the topic's compression type.",
    "STALE_BROKER_EPOCH": "The broker epoch in the request is outdated.",
    "OFFSET_NOT_AVAILABLE": "The leader has no offset for this query yet (e.g. right after an election).",
    "MEMBER_ID_REQUIRED": "The group requires a member id: rejoin with the one given.",
    "PREFERRED_LEADER_NOT_AVAILABLE": "The preferred leader could not become leader.",
    "GROUP_MAX_SIZE_REACHED": "The group already has its maximum number of members.",
    "FENCED_INSTANCE_ID": "Another member with the same group.instance.id has fenced this one.",
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": "No eligible replica can lead the partition.",
    "ELECTION_NOT_NEEDED": "The partition already has the leader the election would pick.",
    "NO_REASSIGNMENT_IN_PROGRESS": "There is no reassignment to cancel.",
    "GROUP_SUBSCRIBED_TO_TOPIC": "The group still subscribes to the topic, so its offsets cannot be deleted.",
    "INVALID_RECORD": "A record failed broker-side validation (e.g. missing key on a compacted topic).",
    "UNSTABLE_OFFSET_COMMIT": "Offsets are pending in an open transaction; retry the fetch later.",
    "THROTTLING_QUOTA_EXCEEDED": "A controller mutation quota was exceeded.",
    "PRODUCER_FENCED": "A newer producer with the same transactional id has fenced this one.",
    "RESOURCE_NOT_FOUND": "A resource the request names does not exist.",
    "DUPLICATE_RESOURCE": "The request names the same resource twice.",
    "UNACCEPTABLE_CREDENTIAL": "The credential does not meet the broker's requirements.",
    "INCONSISTENT_VOTER_SET": "The voter set differs between the request and the receiver.",
    "INVALID_UPDATE_VERSION": "The update version is invalid.",
    "FEATURE_UPDATE_FAILED": "The feature update could not be applied.",
    "PRINCIPAL_DESERIALIZATION_FAILURE": "The forwarded request's principal could not be deserialized.",
    "SNAPSHOT_NOT_FOUND": "The requested metadata snapshot does not exist.",
    "POSITION_OUT_OF_RANGE": "The requested snapshot position is out of range.",
    "UNKNOWN_TOPIC_ID": "The broker does not know this topic id.",
    "DUPLICATE_BROKER_REGISTRATION": "Another live broker is already registered with this id.",
    "BROKER_ID_NOT_REGISTERED": "The broker id is not registered.",
    "INCONSISTENT_TOPIC_ID": "The topic id does not match the topic id in the log.",
    "INCONSISTENT_CLUSTER_ID": "The cluster id does not match this cluster's.",
    "TRANSACTIONAL_ID_NOT_FOUND": "No such transactional id.",
    "FETCH_SESSION_TOPIC_ID_ERROR": "Topic ids in the fetch session changed or are inconsistent.",
    "INELIGIBLE_REPLICA": "A replica proposed for the ISR is not eligible.",
    "NEW_LEADER_ELECTED": "A new leader was elected since the request was issued.",
    "OFFSET_MOVED_TO_TIERED_STORAGE": "The requested offset now lives in tiered storage.",
    "FENCED_MEMBER_EPOCH": "The member epoch is fenced by the coordinator: rejoin with epoch 0.",
    "UNRELEASED_INSTANCE_ID": "The static member's instance id has not been released yet.",
    "UNSUPPORTED_ASSIGNOR": "The coordinator does not support the requested assignor.",
    "STALE_MEMBER_EPOCH": "The member epoch is stale (an offset commit from an older epoch).",
    "MISMATCHED_ENDPOINT_TYPE": "The request was sent to the wrong kind of endpoint (broker or controller).",
    "UNSUPPORTED_ENDPOINT_TYPE": "This endpoint type does not support the request.",
    "UNKNOWN_CONTROLLER_ID": "The controller id is unknown.",
    "UNKNOWN_SUBSCRIPTION_ID": "The client telemetry subscription id is unknown or outdated.",
    "TELEMETRY_TOO_LARGE": "The pushed client telemetry is too large.",
    "INVALID_REGISTRATION": "The controller registration is invalid.",
    "TRANSACTION_ABORTABLE": "The transaction hit an error it can recover from by aborting.",
    "INVALID_RECORD_STATE": "The share-group record is not in a state allowing this operation.",
    "SHARE_SESSION_NOT_FOUND": "The broker does not know this share session.",
    "INVALID_SHARE_SESSION_EPOCH": "The share session epoch is not the expected one.",
    "FENCED_STATE_EPOCH": "The share-group state epoch is fenced.",
    "INVALID_VOTER_KEY": "The voter key does not match the receiver's.",
    "DUPLICATE_VOTER": "The voter is already in the voter set.",
    "VOTER_NOT_FOUND": "The voter is not in the voter set.",
    "INVALID_REGULAR_EXPRESSION": "The subscription regular expression is invalid.",
    "REBOOTSTRAP_REQUIRED": "The client must rebootstrap its metadata from the bootstrap servers.",
    "STREAMS_INVALID_TOPOLOGY": "The streams topology is invalid.",
    "STREAMS_INVALID_TOPOLOGY_EPOCH": "The streams topology epoch is invalid.",
    "STREAMS_TOPOLOGY_FENCED": "The streams topology was replaced by a newer one.",
    "SHARE_SESSION_LIMIT_REACHED": "The broker has reached its limit of share sessions.",
    "GROUP_DELETION_FAILED": "The coordinator could not delete the group; the per-group error message says why.",
    "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED": "The broker could not store the streams group's topology description.",
    "CONTROLLER_ID_NOT_REGISTERED": "No controller with this id is registered.",
}
AUTHN = {"SASL_AUTHENTICATION_FAILED", "ILLEGAL_SASL_STATE", "UNSUPPORTED_SASL_MECHANISM"}
#: Codes the consumer raises about a position in a partition: their classes
#: carry RecordPosition's ``topic_partition`` and ``offset``.
POSITIONED = {"OFFSET_OUT_OF_RANGE"}


def error_class_name(name: str) -> str:
    camel = "".join(p.capitalize() for p in name.lower().split("_"))
    if camel.endswith("Exception"):
        camel = camel[: -len("Exception")]
    if camel.endswith("Error"):
        return camel
    return camel + "Error"


def describe(name: str) -> str:
    text = DESCRIPTIONS.get(name)
    if text:
        return str(text)
    words = name.lower().replace("_", " ")
    return words[0].upper() + words[1:] + "."


def render_errors(path: Path) -> str:
    rows: list[tuple[int, str, bool]] = []
    for line in path.read_text().splitlines()[1:]:
        if not line.strip():
            continue
        c, n, r = line.split("\t")
        rows.append((int(c), n, r.strip() == "true"))
    out = [
        '"""Generated by tools/gen_proto.py from errors.tsv: one exception class per broker',
        "error code (NONE has none). Do not edit.",
        "",
        "Imports: kpax.proto.errors only.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from kpax.proto.errors import (",
        "    AuthenticationError,",
        "    AuthorizationError,",
        "    BrokerResponseError,",
        "    RecordPosition,",
        "    register_error,",
        ")",
        "",
    ]
    names = []
    for code, name, retriable in rows:
        if code == 0:
            continue
        cls = error_class_name(name)
        names.append(cls)
        bases = ["RecordPosition"] if name in POSITIONED else []
        bases.append("BrokerResponseError")
        if name.endswith("_AUTHORIZATION_FAILED"):
            bases.append("AuthorizationError")
        if name in AUTHN:
            bases.append("AuthenticationError")
        desc = describe(name)
        out.append("")
        out.append("@register_error")
        out.append(f"class {cls}({', '.join(bases)}):")
        out.append(f'    """{desc}"""')
        out.append("")
        out.append(f"    code = {code}")
        out.append(f"    name = {json.dumps(name)}")
        out.append(f"    retriable = {retriable}")
        line = f"    description = {json.dumps(desc)}"
        if len(line) > 100:  # what `ruff format` would do
            line = f"    description = (\n        {json.dumps(desc)}\n    )"
        out.append(line)
        out.append("")
    out.append("")
    out.append("__all__ = [")
    for n in sorted(names):
        out.append(f"    {json.dumps(n)},")
    out.append("]")
    out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", required=True, type=Path, help="kafka-message-specs directory")
    ap.add_argument("--check", action="store_true", help="fail if the committed output is stale")
    args = ap.parse_args(argv)
    files, skipped = generate(args.specs)
    if args.check:
        stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
        existing = set(OUT_DIR.glob("*.py"))
        extra = sorted(existing - set(files))
        if stale or extra:
            for p in stale:
                print(f"stale: {p.relative_to(ROOT)}", file=sys.stderr)
            for p in extra:
                print(f"not generated (remove it): {p.relative_to(ROOT)}", file=sys.stderr)
            print(
                "generated protocol code is out of date: run `make generate` and commit",
                file=sys.stderr,
            )
            return 1
        print(f"generated code up to date ({len(files)} files)")
        return 0
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for p in OUT_DIR.glob("*.py"):
        if p not in files:
            p.unlink()
    for p, text in sorted(files.items()):
        if not p.exists() or p.read_text() != text:
            p.write_text(text)
    print(f"wrote {len(files)} files; skipped (validVersions none): {', '.join(skipped)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
