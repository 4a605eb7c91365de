"""The tiny planner's tokenizer: a byte-level BPE trained offline on the SKB's own text.

The ``cpu`` planner is trained from scratch (``docs/design.md``), so its vocabulary can be fitted to the job:
BPE merges learnt from the SKB text, rendered prompts and plan JSON make JSON punctuation (``{"``, ``":"``,
``","``, ``"},{"``) and the plan keys single tokens, and every node type, relation name and entity-table ref
(``E1`` … ``E20``) of the schema is added as a whole-word token, so the model emits a schema name in one step
and the plan grammar (``grasp_core.planner.lm.grammar``) masks it in one step.

Byte-level means every string is encodable (no unknown token) and decoding is exact; training is
deterministic for the same texts in the same order. The chat template is :data:`grasp_core.llm.chat.CHAT_TEMPLATE`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from grasp_core.io import atomic_dir
from grasp_core.llm.chat import CHAT_TEMPLATE
from grasp_core.skb.schema import Schema

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
MAX_REFS = 20  # E1..E20 become single tokens; tables longer than this still work, with two-token refs
MODEL_MAX_LENGTH = 1024


def schema_tokens(schema: Schema) -> list[str]:
    """Strings that must be single tokens: node types, relation names and entity-table refs."""
    return sorted(set(schema.node_types) | set(schema.relation_names)) + [f"E{i}" for i in range(1, MAX_REFS + 1)]


def train_planner_tokenizer(
    texts: Iterable[str], vocab_size: int, out_dir: str | Path, *, schema: Schema | None = None
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` and save it (atomically) as a transformers tokenizer in ``out_dir``.

    ``vocab_size`` counts the BPE vocabulary with the special tokens; the schema's whole-word tokens
    (:func:`schema_tokens`, when ``schema`` is given) are added on top of it.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = [PAD, BOS, EOS, *ROLE_TOKENS]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    if schema is not None:
        tok.add_tokens([AddedToken(t, single_word=True, normalized=False) for t in schema_tokens(schema)])
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        padding_side="left",
        model_max_length=MODEL_MAX_LENGTH,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )
    with atomic_dir(out_dir) as tmp:
        wrapped.save_pretrained(tmp)
    return wrapped
