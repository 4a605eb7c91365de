"""The entity extractors' settings: the gazetteer, the LLM extractor, and linking mentions to nodes (profile sections
``gazetteer``, ``llm_extractor``). Kept apart from the extractors, so reading a profile imports no model code."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LinkingConfig:
    top_k: int = field(default=3, metadata={"help": "Nodes kept per node type for each mention (paper: 3)."})
    near_exact: float = field(
        default=0.99, metadata={"help": "A non-predicted type is added when its best cosine reaches this."}
    )
    extra_type_margin: float = field(
        default=0.02,
        metadata={"help": "... or when its best cosine beats the predicted types' best by at least this much."},
    )
    name_max_tokens: int = field(default=64, metadata={"help": "Token limit when embedding a mention (names)."})
    max_exact: int = field(
        default=10, metadata={"help": "Exact (name or alias) matches kept per type, before the dense ones."}
    )


@dataclass(frozen=True)
class GazetteerConfig:
    max_ngram: int = field(default=6, metadata={"help": "Longest n-gram (tokens) looked up in the gazetteer."})
    min_chars: int = field(default=3, metadata={"help": "One-token names shorter than this are not matched."})
    max_types: int = field(default=2, metadata={"help": "Types assigned to a mention, from its matched nodes."})
    head_words: tuple[str, ...] = field(
        default=("syndrome", "disease", "disorder"),
        metadata={
            "help": "A name holding one of these words is also matched by what precedes it ('marfan' = 'Marfan "
            "syndrome') and by the name up to it ('usher syndrome' = 'Usher syndrome, type I'), where no name is "
            "the shorter string."
        },
    )
    head_min_share: float = field(
        default=0.5,
        metadata={"help": "A head without its head word needs one after it in this share of the names holding it."},
    )
    typo_min_chars: int = field(
        default=5,
        metadata={
            "help": "Query words of this many letters or more that no name holds are matched one edit away (0: off)."
        },
    )
    lookup_frames: tuple[str, ...] = field(
        default=(
            "what is {}",
            "what are {}",
            "what's {}",
            "tell me about {}",
            "tell me more about {}",
            "info on {}",
            "info about {}",
            "information on {}",
            "information about {}",
            "define {}",
            "definition of {}",
            "meaning of {}",
            "explain {}",
            "describe {}",
            "about {}",
            "look up {}",
            "search for {}",
            "show me {}",
            "{} info",
            "{} information",
            "{} definition",
            "{} meaning",
            "{} overview",
        ),
        metadata={
            "help": "Wordings that ask for the node a name names ('{}' the name; a leading a/an/the and a node-type "
            "word before or after the name are read too: 'what is a cataract', 'BRCA2 gene'): such a question is "
            "answered with the named nodes first, as a bare name is."
        },
    )
    nested: bool = field(default=True, metadata={"help": "Keep matches nested in longer ones (with a parent)."})
    fuzzy: bool = field(default=True, metadata={"help": "Embed unmatched multi-word spans and search the name index."})
    fuzzy_min_tokens: int = field(default=2, metadata={"help": "Shortest span (tokens) tried by fuzzy matching."})
    fuzzy_min_cosine: float = field(default=0.85, metadata={"help": "Cosine a fuzzy span needs with its best node."})
    descriptive: bool = field(
        default=True,
        metadata={"help": "Also embed descriptive spans (stopwords inside: 'ringing in the ears') and link them."},
    )
    descriptive_max_tokens: int = field(default=10, metadata={"help": "Longest descriptive span (tokens)."})
    descriptive_min_cosine: float = field(
        default=0.7,
        metadata={"help": "Cosine a descriptive span needs with its best node (a weak link keeps its similarity)."},
    )
    target_window: int = field(
        default=3, metadata={"help": "A type word at most this many tokens after a request cue is a target."}
    )
    batch_size: int = field(default=1024, metadata={"help": "Queries per encoder/linking batch."})
    linking: LinkingConfig = field(default_factory=LinkingConfig, metadata={"help": "Entity-linking settings."})


@dataclass(frozen=True)
class LLMExtractorConfig:
    num_demos: int = field(default=4, metadata={"help": "Demonstrations in the prompt (paper: 4)."})
    max_types: int = field(default=2, metadata={"help": "Types kept per mention (paper: one or two)."})
    example_names: int = field(default=3, metadata={"help": "Example node names per type listed in the rules."})
    rules: tuple[str, ...] = field(default=(), metadata={"help": "Extra SKB-specific rules for the prompt."})
    batch_size: int = field(default=64, metadata={"help": "Queries per generate() call."})
    max_new_tokens: int = field(default=512, metadata={"help": "Longest answer (the JSON list of mentions)."})
