"""The entity table (paper §3.1, Figure A8): the query's mentions, each linked to its most similar nodes.

Every row has an id (``E1``, ``E2``, …) that a plan anchor may reference instead of copying a name
(``{"var": "a1", "ref": "E2", "match_mode": "name"}``, ``docs/design.md``). Attribute rows carry no links.
The table renders to the text block the planner reads; ``to_json``/``from_json`` store it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Role = Literal["anchor", "target", "attribute"]


@dataclass(frozen=True)
class Link:
    node_id: int
    name: str
    score: float  # cosine similarity of the mention to the node's name
    degree: int


@dataclass(frozen=True)
class EntityRow:
    ref: str  # "E1", "E2", ...
    mention: str
    role: Role
    types: tuple[str, ...]  # predicted (and rule-added) node types
    links: dict[str, tuple[Link, ...]] = field(default_factory=dict)  # node type -> top links
    parent: int | None = None  # index of the longer mention this one is nested in

    def to_json(self) -> dict:
        return {
            "ref": self.ref,
            "mention": self.mention,
            "role": self.role,
            "types": list(self.types),
            "links": {
                t: [[link.node_id, link.name, round(link.score, 4), link.degree] for link in ls]
                for t, ls in self.links.items()
            },
            "parent": self.parent,
        }

    @classmethod
    def from_json(cls, obj: dict) -> EntityRow:
        return cls(
            ref=obj["ref"],
            mention=obj["mention"],
            role=obj["role"],
            types=tuple(obj["types"]),
            links={
                t: tuple(Link(int(a), str(b), float(c), int(d)) for a, b, c, d in ls) for t, ls in obj["links"].items()
            },
            parent=obj.get("parent"),
        )


@dataclass(frozen=True)
class EntityTable:
    rows: tuple[EntityRow, ...] = ()

    def row(self, ref: str) -> EntityRow | None:
        return next((r for r in self.rows if r.ref == ref), None)

    def require_row(self, ref: str) -> EntityRow:
        """The row ``ref`` names (a ref already checked against this table)."""
        row = self.row(ref)
        if row is None:
            raise KeyError(f"entity table has no row {ref!r} (rows: {self.refs})")
        return row

    @property
    def refs(self) -> list[str]:
        return [r.ref for r in self.rows]

    def render(self, compact: bool = False) -> str:
        """The text block the planner reads: one line per row, then one indented line per linked type.

        ``compact`` (short-context planners) keeps one line per row with each linked type's best cosine."""
        if not self.rows:
            return "(no entities found)"
        lines = []
        for r in self.rows:
            nested = f" nested_in=E{r.parent + 1}" if r.parent is not None else ""
            if compact:
                best = " ".join(f"{t}={links[0].score:.2f}" for t, links in r.links.items() if links)
                lines.append(
                    " ".join(filter(None, (r.ref, f'"{r.mention}"', r.role, best or "|".join(r.types)))) + nested
                )
                continue
            lines.append(f'{r.ref} "{r.mention}" role={r.role} types={"|".join(r.types)}{nested}')
            for t, links in r.links.items():
                shown = "; ".join(f"{link.name} (sim={link.score:.2f}, deg={link.degree})" for link in links)
                lines.append(f"  {t}: {shown}")
        return "\n".join(lines)

    def to_json(self) -> list[dict]:
        return [r.to_json() for r in self.rows]

    @classmethod
    def from_json(cls, obj: list[dict]) -> EntityTable:
        return cls(tuple(EntityRow.from_json(r) for r in obj))
