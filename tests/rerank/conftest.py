"""A handmade SKB (7 nodes, 3 relations) with 2-d document vectors, shared by the reranker tests."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import torch

from grasp_core.rerank.config import CausalLMScorerConfig
from grasp_core.rerank.scorers import QWEN3_PREFIX, QWEN3_SUFFIX, reranker_instruction
from grasp_core.skb.format import SKB, validate
from grasp_core.skb.schema import Relation, Schema

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DEFINITION = "A heritable disorder of connective tissue that affects the heart, eyes, blood vessels and skeleton."


def _unit(angle_deg: float) -> list[float]:
    a = np.deg2rad(angle_deg)
    return [float(np.cos(a)), float(np.sin(a))]


@pytest.fixture(scope="session")
def tiny_skb() -> SKB:
    schema = Schema(
        "tiny",
        {"disease": ("definition", "synonyms"), "gene": ("summary",), "phenotype": ("definition",)},
        (
            Relation("associated with", "gene", "disease"),
            Relation("phenotype present", "disease", "phenotype"),
            Relation("parent-child", "phenotype", "phenotype"),
        ),
    )
    nodes = pd.DataFrame(
        {
            "node_id": range(7),
            "key": [f"N{i}" for i in range(7)],
            "type": ["disease", "gene", "gene", "phenotype", "phenotype", "phenotype", "disease"],
            "name": [
                "Marfan syndrome",
                "FBN1",
                "TGFBR2",
                "Tall stature",
                "Lens dislocation",
                "Aortic dilatation",
                "Loeys-Dietz syndrome",
            ],
            "definition": [
                DEFINITION,
                None,
                None,
                "Height above average.",
                "Displacement of the lens.",
                None,
                "An aortic aneurysm syndrome.",
            ],
            "synonyms": ["MFS; Marfan's syndrome type 1", None, None, None, None, None, None],
            "summary": [None, "Fibrillin 1 encodes a glycoprotein.", None, None, None, None, None],
        }
    )
    edges = pd.DataFrame(
        {
            "src": [1, 2, 2, 0, 0, 0, 6, 3],
            "rel": ["associated with"] * 3 + ["phenotype present"] * 4 + ["parent-child"],
            "dst": [0, 0, 6, 3, 4, 5, 5, 4],
        }
    )
    queries = pd.DataFrame({"qid": [], "split": [], "query": [], "answer_ids": []})
    skb = SKB(schema, nodes, edges, queries)
    validate(skb)
    return skb


@pytest.fixture(scope="session")
def doc_vectors() -> np.ndarray:
    """Angles to the query vector [1, 0]: TGFBR2 (10°) before FBN1 (40°); Aortic dilatation (5°) before Tall
    stature (20°) before Lens dislocation (60°)."""
    angles = [0, 40, 10, 20, 60, 5, 30]
    return np.array([_unit(a) for a in angles], np.float32)


@pytest.fixture(scope="session")
def minilm_tokenizer():
    from transformers import AutoTokenizer

    from grasp_core.embed.encoder import minilm_path

    return AutoTokenizer.from_pretrained(str(minilm_path()))


# the query and documents the tiny tokenizer's vocabulary is trained on (the scorer tests use them)
QWEN_DOCS = [
    "disease: Marfan syndrome\ndefinition: a disorder of connective tissue",
    "gene: FBN1",
    "phenotype: Tall stature\ndefinition: height above average\nparent-child: Lens dislocation",
]
QWEN_QUERY = "which disease causes tall stature and lens dislocation"


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory):
    """A 2-layer Qwen3 (hidden 32) and a word-level tokenizer trained here, saved as a model directory."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    from tests.tiny_models import tiny_qwen3_config

    specials = ["[PAD]", "[UNK]", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    corpus = [
        QWEN3_PREFIX,
        QWEN3_SUFFIX,
        reranker_instruction(),
        QWEN_QUERY,
        *QWEN_DOCS,
        "<Instruct>: <Query>: <Document>: yes no",
    ]
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=specials))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", eos_token="<|im_end|>"
    )
    torch.manual_seed(0)
    config = tiny_qwen3_config(tok.get_vocab_size(), 512)
    path = tmp_path_factory.mktemp("tiny_qwen3")
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def qwen_sample() -> tuple[str, list[str]]:
    return QWEN_QUERY, QWEN_DOCS


@pytest.fixture(scope="session")
def qwen_cfg(tiny_qwen3):
    """CPU float32 scorer settings for the tiny Qwen3."""

    def make(**kw) -> CausalLMScorerConfig:
        defaults = dict(
            model_path=str(tiny_qwen3), dtype="float32", device="cpu", gradient_checkpointing=False, batch_size=2
        )
        return CausalLMScorerConfig(**{**defaults, **kw})

    return make


@pytest.fixture(scope="session")
def minilm_builder(tiny_skb):
    """A document builder over the tiny SKB with real MiniLM document vectors and query encoder (64-token inputs)."""
    from grasp_core.embed.config import EncoderConfig
    from grasp_core.embed.encoder import load_encoder
    from grasp_core.rerank.config import DocumentConfig
    from grasp_core.rerank.documents import CandidateDocumentBuilder

    encoder = load_encoder(EncoderConfig())
    vectors = encoder.encode(tiny_skb.documents(), max_tokens=512)
    return CandidateDocumentBuilder(tiny_skb, vectors, DocumentConfig(max_input_tokens=64), encoder=encoder)
