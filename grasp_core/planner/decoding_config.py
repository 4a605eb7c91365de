"""How plans are decoded: the plan grammar's limits and the generation settings (kept apart from the grammar and
generation code, so reading a profile imports no llguidance or transformers)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PlanGrammarConfig:
    max_anchors: int = field(
        default=4, metadata={"help": "Most anchors in one plan (the cpu candidates intersect up to 4 findings)."}
    )
    max_hops: int = field(default=3, metadata={"help": "Most hops on one anchor's path to the target."})
    text_anchors: bool = field(
        default=True, metadata={"help": "Allow free-text doc-mode anchors besides refs to entity-table rows."}
    )
    max_text_chars: int = field(default=100, metadata={"help": "Longest free-text anchor, in characters."})
    max_relevance_chars: int = field(default=200, metadata={"help": "Longest relevance_text, in characters."})


@dataclass(frozen=True)
class InferenceSettings:
    max_new_tokens: int = field(default=700, metadata={"help": "longest plan generated"})
    retries: int = field(default=2, metadata={"help": "extra samples when a plan fails"})
    retry_temperature: float = field(default=0.7, metadata={"help": "temperature of the retries"})
    constrained: bool = field(default=True, metadata={"help": "constrain decoding to the plan grammar (local models)"})
    compact_prompt: bool = field(
        default=False, metadata={"help": "terse schema listing in the system prompt (short-context models)"}
    )
    grammar: PlanGrammarConfig = field(
        default_factory=PlanGrammarConfig,
        metadata={"help": "what constrained decoding allows; training targets follow it"},
    )
