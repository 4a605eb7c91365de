"""Candidate documents: exact text, neighbour order, per-field cap and the 2048-token budget trimming."""

from __future__ import annotations

import numpy as np
import pytest

from grasp_core.errors import GraspError
from grasp_core.rerank.config import DocumentConfig
from grasp_core.rerank.documents import CandidateDocumentBuilder

QUERY = np.array([1.0, 0.0], np.float32)
HEAD = "disease: Marfan syndrome"
DEFINITION = (
    "definition: A heritable disorder of connective tissue that affects the heart, eyes, blood vessels and skeleton."
)
SYNONYMS = "synonyms: MFS; Marfan's syndrome type 1"
GENES = "associated with: TGFBR2; FBN1"


def n_tokens(text, tokenizer) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_documents_list_fields_then_neighbours_by_query_similarity(tiny_skb, doc_vectors, minilm_tokenizer):
    builder = CandidateDocumentBuilder(tiny_skb, doc_vectors)
    docs = builder.build(QUERY, [0, 3, 2], minilm_tokenizer)
    assert docs == [
        "\n".join(
            [HEAD, DEFINITION, SYNONYMS, GENES, "phenotype present: Aortic dilatation; Tall stature; Lens dislocation"]
        ),
        "phenotype: Tall stature\ndefinition: Height above average.\nparent-child: Lens dislocation\n"
        "phenotype present: Marfan syndrome",
        "gene: TGFBR2\nassociated with: Marfan syndrome; Loeys-Dietz syndrome",
    ]
    # another query direction reverses the neighbour order
    flipped = builder.build(np.array([0.0, 1.0], np.float32), [0], minilm_tokenizer)[0]
    assert flipped.endswith(
        "associated with: FBN1; TGFBR2\nphenotype present: Lens dislocation; Tall stature; Aortic dilatation"
    )


def test_neighbour_and_field_caps(tiny_skb, doc_vectors, minilm_tokenizer):
    builder = CandidateDocumentBuilder(tiny_skb, doc_vectors, DocumentConfig(max_field_tokens=4, max_neighbours=1))
    assert builder.build(QUERY, [0], minilm_tokenizer) == [
        "disease: Marfan syndrome\ndefinition: A heritable\nsynonyms: MFS; Mar\nassociated with: TGFBR2\n"
        "phenotype present: Aortic dilatation"
    ]


@pytest.mark.parametrize(
    "budget, expected",
    [
        # 71 tokens untrimmed; one token over drops the last neighbour of the last relation line
        (70, [HEAD, DEFINITION, SYNONYMS, GENES, "phenotype present: Aortic dilatation; Tall stature"]),
        # dropping a line's last neighbour drops the line
        (62, [HEAD, DEFINITION, SYNONYMS, GENES]),
        (41, [HEAD, DEFINITION, SYNONYMS]),
        # then fields are shortened longest first: the definition loses tokens, the shorter synonyms stay whole
        (35, [HEAD, "definition: A heritable disorder of connective tissue that affects the heart, eyes", SYNONYMS]),
        # both fields over the common cap are cut to it
        (25, [HEAD, "definition: A heritable disorder of connect", "synonyms: MFS; Marfan's"]),
        # only the head line is left, and cut
        (4, ["disease: Marfan"]),
    ],
)
def test_budget_trimming(tiny_skb, doc_vectors, minilm_tokenizer, budget, expected):
    prompt = 100  # tokens the reranker prompt spends outside the document
    builder = CandidateDocumentBuilder(tiny_skb, doc_vectors, DocumentConfig(max_input_tokens=budget + prompt))
    doc = builder.build(QUERY, [0], minilm_tokenizer, prompt_tokens=prompt)[0]
    assert doc == "\n".join(expected)
    assert n_tokens(doc, minilm_tokenizer) <= budget


def test_untrimmed_document_is_71_tokens(tiny_skb, doc_vectors, minilm_tokenizer):
    builder = CandidateDocumentBuilder(tiny_skb, doc_vectors, DocumentConfig(max_input_tokens=71))
    assert n_tokens(builder.build(QUERY, [0], minilm_tokenizer)[0], minilm_tokenizer) == 71


def test_bad_inputs_raise_grasp_errors(tiny_skb, doc_vectors, minilm_tokenizer):
    with pytest.raises(GraspError, match="7 nodes"):
        CandidateDocumentBuilder(tiny_skb, doc_vectors[:3])
    builder = CandidateDocumentBuilder(tiny_skb, doc_vectors, DocumentConfig(max_input_tokens=10))
    with pytest.raises(GraspError, match="prompt alone"):
        builder.build(QUERY, [0], minilm_tokenizer, prompt_tokens=10)
    with pytest.raises(GraspError, match="encoder"):
        builder.embed_queries(["q"])


def test_query_vectors_come_from_the_real_encoder(tiny_skb, doc_vectors):
    from grasp_core.embed.config import EncoderConfig
    from grasp_core.embed.encoder import load_encoder

    encoder = load_encoder(EncoderConfig())
    builder = CandidateDocumentBuilder(tiny_skb, doc_vectors, encoder=encoder)
    vecs = builder.embed_queries(["marfan syndrome", "tall people"])
    assert vecs.shape == (2, encoder.dim) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
