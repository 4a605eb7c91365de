"""The SKB schema: node types with their text fields, and typed relations (``docs/design.md``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grasp_core.errors import SKBFormatError
from grasp_core.io import read_json, write_json


@dataclass(frozen=True)
class Relation:
    """One relation type between two node types. Edges are undirected at query time."""

    name: str
    src: str
    dst: str


@dataclass(frozen=True)
class Schema:
    name: str
    node_types: dict[str, tuple[str, ...]]  # node type -> its text fields, in document order
    relations: tuple[Relation, ...]

    @property
    def relation_names(self) -> list[str]:
        return sorted({r.name for r in self.relations})

    @property
    def text_fields(self) -> list[str]:
        """Every text field of every type, once, in first-seen order (the nodes.parquet columns)."""
        seen: dict[str, None] = {}
        for fields in self.node_types.values():
            seen.update(dict.fromkeys(fields))
        return list(seen)

    def connects(self, rel: str, type_a: str, type_b: str) -> bool:
        """True when ``rel`` links ``type_a`` and ``type_b`` in either direction."""
        return any(r.name == rel and (r.src, r.dst) in ((type_a, type_b), (type_b, type_a)) for r in self.relations)

    def neighbour_types(self, rel: str, node_type: str) -> list[str]:
        """Types reachable from ``node_type`` over ``rel`` (undirected)."""
        out = []
        for r in self.relations:
            if r.name != rel:
                continue
            if r.src == node_type:
                out.append(r.dst)
            if r.dst == node_type:
                out.append(r.src)
        return sorted(set(out))

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "node_types": {t: {"text_fields": list(f)} for t, f in self.node_types.items()},
            "relations": [{"name": r.name, "src": r.src, "dst": r.dst} for r in self.relations],
        }

    @classmethod
    def from_json(cls, obj: dict, file: str = "schema.json") -> Schema:
        if not isinstance(obj, dict):
            raise SKBFormatError(file, "expected a JSON object")
        for key in ("name", "node_types", "relations"):
            if key not in obj:
                raise SKBFormatError(file, f"missing key {key!r}")
        if not isinstance(obj["node_types"], dict) or not obj["node_types"]:
            raise SKBFormatError(file, "'node_types' must be a non-empty object {type: {\"text_fields\": [...]}}")
        if not isinstance(obj["relations"], list):
            raise SKBFormatError(file, '\'relations\' must be a list of {"name", "src", "dst"} objects')
        node_types: dict[str, tuple[str, ...]] = {}
        for t, spec in obj["node_types"].items():
            fields = spec.get("text_fields") if isinstance(spec, dict) else None
            if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
                raise SKBFormatError(file, f"node type {t!r}: 'text_fields' must be a list of strings")
            reserved = {"node_id", "key", "type", "name"} & set(fields)
            if reserved:
                raise SKBFormatError(file, f"node type {t!r}: text field names {sorted(reserved)} are reserved")
            node_types[t] = tuple(fields)
        relations = []
        for i, r in enumerate(obj["relations"]):
            if not isinstance(r, dict) or not {"name", "src", "dst"} <= set(r):
                raise SKBFormatError(file, "a relation needs 'name', 'src' and 'dst'", row=i)
            if not isinstance(r["name"], str) or not r["name"]:
                raise SKBFormatError(file, f"relation name {r['name']!r} must be a non-empty string", row=i)
            for end in ("src", "dst"):
                if r[end] not in node_types:
                    raise SKBFormatError(file, f"relation {r['name']!r}: unknown {end} node type {r[end]!r}", row=i)
            relations.append(Relation(r["name"], r["src"], r["dst"]))
        if len(set(relations)) != len(relations):
            raise SKBFormatError(file, "duplicate relation entries")
        for what, names in (("node types", node_types), ("relations", {r.name for r in relations})):
            by_fold: dict[str, str] = {}
            for name in sorted(names):  # graph stores fold the case of table names
                if name.casefold() in by_fold:
                    raise SKBFormatError(file, f"{what} {by_fold[name.casefold()]!r} and {name!r} differ only in case")
                by_fold[name.casefold()] = name
        return cls(obj["name"], node_types, tuple(relations))

    def save(self, path: str | Path) -> None:
        write_json(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Schema:
        path = Path(path)
        if not path.exists():
            raise SKBFormatError(str(path), "file is missing")
        try:
            obj = read_json(path)
        except ValueError as exc:
            raise SKBFormatError(str(path), f"not valid JSON ({exc})") from exc
        return cls.from_json(obj, str(path))
