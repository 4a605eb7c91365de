"""The question synthesizers' settings: the STaRK protocol (:mod:`grasp_core.questions.querygen`) and the generic
synthesizer for any schema (:mod:`grasp_core.questions.generic_queries`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class QueryGenConfig:
    max_answers: int = field(default=20, metadata={"help": "keep queries with 1..max_answers gold answers"})
    max_anchor_degree: int = field(
        default=1000, metadata={"help": "drop groundings whose every anchor has more neighbours on its first hop"}
    )
    max_frontier: int = field(default=5000, metadata={"help": "drop groundings whose walk reaches more nodes"})
    property_tries: int = field(default=4, metadata={"help": "properties tried per grounding"})
    tries_per_template: int = field(
        default=20, metadata={"help": "groundings of a drawn template before another template is drawn"}
    )
    max_attempts_per_query: int = field(default=60, metadata={"help": "groundings tried per requested query"})
    no_property_prob: float = field(
        default=0.3, metadata={"help": "ask without a property when the relation alone gives 1..max_answers"}
    )
    alias_prob: float = field(default=0.25, metadata={"help": "name an anchor by an alias/synonym when it has one"})
    paraphrase_prob: float = field(default=0.25, metadata={"help": "lightly paraphrase an anchor name"})
    typed_anchor_prob: float = field(default=0.4, metadata={"help": "say the anchor's type before its name"})
    distractor_prob: float = field(default=0.3, metadata={"help": "prefix a distractor context sentence"})


@dataclass(frozen=True)
class GenericConfig:
    max_hops: int = field(default=3, metadata={"help": "longest metapath, in hops"})
    kind_weights: tuple[float, float, float, float] = field(
        default=(0.35, 0.25, 0.1, 0.3),
        metadata={"help": "how often a 1-hop, 2-hop, 3-hop and intersection template is drawn"},
    )
    min_queries: int = field(default=30, metadata={"help": "fail when the SKB yields fewer distinct queries"})
    stale_attempts: int = field(
        default=5000, metadata={"help": "stop after this many groundings in a row gave no new query"}
    )
