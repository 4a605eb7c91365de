"""The three synthetic datasets' shapes (:mod:`grasp_core.sources.synth` builds them): node types and their text
fields, node and per-relation edge counts at STaRK's full size, topics and named scales."""

from __future__ import annotations

from dataclasses import dataclass, field

from grasp_core.errors import GraspError
from grasp_core.skb.schema import Relation, Schema
from grasp_core.sources import synth_text as W

KINDS = ("amazon", "mag", "prime")


@dataclass(frozen=True)
class RelationSpec:
    name: str
    src: str
    dst: str
    full_edges: int = field(metadata={"help": "edge count at scale 1.0 (STaRK's row count)"})
    coherence: float = field(default=0.7, metadata={"help": "probability that dst is drawn from src's topic"})
    one_per_src: bool = field(default=False, metadata={"help": "each source node gets at most one edge"})


@dataclass(frozen=True)
class DatasetSpec:
    kind: str
    node_types: dict[str, tuple[str, ...]]  # type -> text fields (schema order)
    full_nodes: dict[str, int]
    relations: tuple[RelationSpec, ...]
    topics: tuple[str, ...]
    named_scales: dict[str, float]  # tiny (a few hundred nodes), small (~5-10k nodes), full

    @property
    def schema(self) -> Schema:
        rels = tuple(dict.fromkeys(Relation(r.name, r.src, r.dst) for r in self.relations))
        return Schema(f"synth-{self.kind}", dict(self.node_types), rels)


_PRIME_RELATIONS = (  # PrimeKG kg.csv row counts per (display relation, type pair)
    RelationSpec("ppi", "gene/protein", "gene/protein", 642_150),
    RelationSpec("carrier", "drug", "gene/protein", 1_728),
    RelationSpec("enzyme", "drug", "gene/protein", 10_634),
    RelationSpec("target", "drug", "gene/protein", 32_760),
    RelationSpec("transporter", "drug", "gene/protein", 6_184),
    RelationSpec("contraindication", "drug", "disease", 61_350),
    RelationSpec("indication", "drug", "disease", 18_776),
    RelationSpec("off-label use", "drug", "disease", 5_136),
    RelationSpec("synergistic interaction", "drug", "drug", 2_672_628),
    RelationSpec("associated with", "gene/protein", "disease", 160_822),
    RelationSpec("associated with", "effect/phenotype", "gene/protein", 6_660),
    RelationSpec("parent-child", "disease", "disease", 64_388),
    RelationSpec("parent-child", "effect/phenotype", "effect/phenotype", 37_472),
    RelationSpec("parent-child", "biological_process", "biological_process", 105_772),
    RelationSpec("parent-child", "molecular_function", "molecular_function", 27_148),
    RelationSpec("parent-child", "cellular_component", "cellular_component", 9_690),
    RelationSpec("parent-child", "exposure", "exposure", 4_140),
    RelationSpec("parent-child", "pathway", "pathway", 5_070),
    RelationSpec("parent-child", "anatomy", "anatomy", 28_064),
    RelationSpec("phenotype absent", "disease", "effect/phenotype", 2_386),
    RelationSpec("phenotype present", "disease", "effect/phenotype", 300_634),
    RelationSpec("side effect", "drug", "effect/phenotype", 129_568),
    RelationSpec("interacts with", "molecular_function", "gene/protein", 139_060),
    RelationSpec("interacts with", "cellular_component", "gene/protein", 166_804),
    RelationSpec("interacts with", "biological_process", "gene/protein", 289_610),
    RelationSpec("interacts with", "exposure", "gene/protein", 2_424),
    RelationSpec("interacts with", "exposure", "biological_process", 3_250),
    RelationSpec("interacts with", "exposure", "molecular_function", 90),
    RelationSpec("interacts with", "exposure", "cellular_component", 20),
    RelationSpec("interacts with", "pathway", "gene/protein", 85_292),
    RelationSpec("linked to", "exposure", "disease", 4_608),
    RelationSpec("expression present", "anatomy", "gene/protein", 3_036_406),
    RelationSpec("expression absent", "anatomy", "gene/protein", 39_774),
)
_PRIME_DEFINED = ("source", "definition")
SPECS: dict[str, DatasetSpec] = {
    "prime": DatasetSpec(
        kind="prime",
        node_types={
            "disease": ("source", "definition", "symptoms", "causes"),
            "gene/protein": ("source", "alias", "type_of_gene", "summary", "interpro"),
            "molecular_function": _PRIME_DEFINED,
            "drug": ("source", "description", "indication", "mechanism_of_action", "category"),
            "pathway": ("source", "summation"),
            "anatomy": _PRIME_DEFINED,
            "effect/phenotype": _PRIME_DEFINED,
            "biological_process": _PRIME_DEFINED,
            "cellular_component": _PRIME_DEFINED,
            "exposure": _PRIME_DEFINED,
        },
        full_nodes={
            "disease": 17_080,
            "gene/protein": 27_671,
            "molecular_function": 11_169,
            "drug": 7_957,
            "pathway": 2_516,
            "anatomy": 14_035,
            "effect/phenotype": 15_311,
            "biological_process": 28_642,
            "cellular_component": 4_176,
            "exposure": 818,
        },
        relations=_PRIME_RELATIONS,
        topics=tuple(W.PRIME_TOPICS),
        named_scales={"tiny": 0.003, "small": 0.05, "full": 1.0},
    ),
    # Amazon: product count and total edges are STaRK's; the brand/category/colour split of the remaining
    # 78,350 nodes and the per-relation edge split are approximations (STaRK publishes only totals).
    "amazon": DatasetSpec(
        kind="amazon",
        node_types={
            "product": ("brand", "description", "features", "reviews"),
            "brand": (),
            "category": (),
            "color": (),
        },
        full_nodes={"product": 957_192, "brand": 75_504, "category": 1_034, "color": 1_812},
        relations=(
            RelationSpec("also_buy", "product", "product", 2_300_000),
            RelationSpec("also_view", "product", "product", 2_883_802),
            RelationSpec("has_brand", "product", "brand", 900_000, coherence=0.95, one_per_src=True),
            RelationSpec("has_category", "product", "category", 2_800_000, coherence=0.97),
            RelationSpec("has_color", "product", "color", 560_000, coherence=0.0, one_per_src=True),
        ),
        topics=tuple(W.AMAZON_DOMAINS),
        named_scales={"tiny": 0.0003, "small": 0.007, "full": 1.0},
    ),
    # MAG: node counts are STaRK's; the edge split is ogbn-mag's proportions scaled to STaRK's total.
    "mag": DatasetSpec(
        kind="mag",
        node_types={
            "paper": ("abstract", "publication_date", "venue"),
            "author": ("paper_count", "citation_count"),
            "institution": ("paper_count", "citation_count"),
            "field_of_study": ("paper_count", "citation_count"),
        },
        full_nodes={"paper": 700_244, "author": 1_104_554, "institution": 8_740, "field_of_study": 59_430},
        relations=(
            RelationSpec("author___writes___paper", "author", "paper", 13_479_000),
            RelationSpec("paper___cites___paper", "paper", "paper", 10_217_000),
            RelationSpec("paper___has_topic___field_of_study", "paper", "field_of_study", 14_157_000, coherence=0.9),
            RelationSpec("author___affiliated_with___institution", "author", "institution", 1_949_116),
        ),
        topics=tuple(W.MAG_AREAS),
        named_scales={"tiny": 0.0002, "small": 0.004, "full": 1.0},
    ),
}


def resolve_scale(kind: str, scale: str | float) -> float:
    """A named scale (``tiny``, ``small``, ``full``) or a fraction in (0, 1] of the real STaRK size."""
    spec = spec_of(kind)
    if isinstance(scale, str):
        if scale in spec.named_scales:
            return spec.named_scales[scale]
        try:
            scale = float(scale)
        except ValueError:
            raise GraspError(f"unknown scale {scale!r}: use one of {list(spec.named_scales)} or a fraction") from None
    if not 0 < float(scale) <= 1:
        raise GraspError(f"scale must be a fraction in (0, 1], got {scale}")
    return float(scale)


def spec_of(kind: str) -> DatasetSpec:
    if kind not in SPECS:
        raise GraspError(f"unknown synthetic SKB kind {kind!r}: expected one of {list(SPECS)}")
    return SPECS[kind]
