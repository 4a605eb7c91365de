import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import Encoder, batch_tensors, load_encoder, minilm_path, resolve_dtype
from grasp_core.errors import MissingModelError

TEXTS = ["retina", "a drug approved for topical ocular use in adults " * 8, "", "type 2 diabetes", "x"]


def test_minilm_matches_the_shipped_sentence_transformer(encoder):
    ours = encoder.encode(TEXTS, max_tokens=256)
    reference = SentenceTransformer(str(minilm_path()), device="cpu").encode(TEXTS, normalize_embeddings=True)
    assert ours.dtype == np.float32 and ours.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(ours, reference, atol=1e-5)  # sentence-transformers pads to the batch's longest
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert encoder.dim == 384 and encoder.identity == "all-MiniLM-L6-v2|pooling=mean|dim=384"


def test_minilm_gives_a_sentence_transformers_pipeline_vectors_bit_for_bit(encoder):
    """Same tokens at the same padded length: our BERT, pooling and normalization are the Transformer, Pooling
    and Normalize modules' (so embeddings built by either serve the other)."""
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    transformer = Transformer(str(minilm_path()))
    reference = SentenceTransformer(modules=[transformer, Pooling(384, pooling_mode="mean"), Normalize()]).eval()
    texts = [*TEXTS, "Ångström café 漢字 naïve", "ÉCOLE Straße ﬁ ½"]
    for length in (8, 64):
        ids = encoder.token_ids(texts, length)
        assert ids == transformer.tokenizer(texts, truncation=True, max_length=length)["input_ids"]
        input_ids, mask = batch_tensors(ids, length, encoder.tokenizer.pad_id)
        with torch.inference_mode():
            theirs = reference({"input_ids": input_ids, "attention_mask": mask})["sentence_embedding"]
            assert torch.equal(encoder.model(input_ids, mask), theirs)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_encode_keeps_input_order_and_is_exactly_batch_invariant(dtype):
    encoder = load_encoder(EncoderConfig(dtype=dtype, batch_size=2))
    texts = [*TEXTS, "retinal detachment", "a drug approved for topical use", "tall stature", "night blindness"]
    one_by_one = np.stack([encoder.encode([t], 64)[0] for t in texts])
    if dtype == "bfloat16" or not torch.cpu._is_amx_tile_supported():
        np.testing.assert_array_equal(encoder.encode(texts, 64), one_by_one)  # bit for bit, whatever the batch
    else:  # float32 on a CPU with AMX: MKL's addmm follows the batch's row count (grasp_core/embed/encoder.py)
        np.testing.assert_allclose(encoder.encode(texts, 64), one_by_one, rtol=0, atol=1e-6)
    ids = encoder.token_ids(texts, 64)
    lengths, batches = [len(i) for i in ids], encoder._batches(ids, 64)
    assert all(len(rows) <= 2 and all(length - 8 < lengths[i] <= length for i in rows) for length, rows in batches)
    assert all(length % 8 == 0 for length, _ in batches)  # one padded length per text, whatever its batch
    assert sorted(i for _, rows in batches for i in rows) == list(range(len(texts)))
    assert encoder.encode([], 64).shape == (0, 384)


def test_bfloat16_vectors_do_not_depend_on_how_many_texts_share_the_batch():
    """oneDNN's AMX kernels did (up to 1.3e-3 for batches of 3-16): importing grasp_core caps oneDNN below AMX."""
    import os

    assert os.environ["ONEDNN_MAX_CPU_ISA"] == "AVX512_CORE_BF16"
    encoder = load_encoder(EncoderConfig(dtype="bfloat16"))
    texts = [f"which drug targets gene {i} and protein {3 * i} in the retina" for i in range(24)]
    alone = np.stack([encoder.encode([t], 64)[0] for t in texts])
    for n in (3, 8, 13, 24):
        np.testing.assert_array_equal(encoder.encode(texts[:n], 64), alone[:n], err_msg=f"a batch of {n}")


def test_encode_truncates_at_max_tokens(encoder):
    long = "retina " + "completely unrelated words about shipping containers " * 20
    short = encoder.cut(long, 8).text  # the 6 word pieces that fit beside [CLS] and [SEP]
    assert encoder.cut(long, 8).note == f"read 6 of {len(encoder.tokenizer.offsets(long))} tokens"
    np.testing.assert_allclose(encoder.encode([long], 8), encoder.encode([short], 64), atol=1e-5)
    assert not np.allclose(encoder.encode([long], 8), encoder.encode([long], 256), atol=1e-3)


def test_each_token_sequence_is_encoded_once_while_remembering(encoder, monkeypatch):
    """The answer path's stages read the same questions (text branch and reranker at 512 tokens, the planner at 64)
    and the executor re-reads the extractor's mentions: inside ``remembering`` the model runs once per token
    sequence, with the vectors it gives outside the block."""
    questions = ["which genes cause night blindness?", "a drug approved for topical ocular use in adults " * 8]
    plain = {limit: encoder.encode(questions, limit) for limit in (512, 64)}
    alone = encoder.encode(["retina"], 64)
    ran: list[list[str]] = []
    encode = encoder._encode
    monkeypatch.setattr(encoder, "_encode", lambda texts, *a: ran.append(list(texts)) or encode(texts, *a))
    with Encoder.remembering():
        for limit in (512, 64, 512):
            np.testing.assert_array_equal(encoder.encode(questions, limit), plain[limit])
        np.testing.assert_array_equal(encoder.encode(["retina", questions[0], "retina"], 64)[0], alone[0])
        encoder.encode(["retina"], 512)  # one token sequence at both limits
    # the short question is one token sequence at both limits; the long one is cut at 64, so it is another
    ids = lambda texts, limit: encoder.token_ids(texts, limit)  # noqa: E731  (what _encode is given)
    assert ran == [ids(questions, 512), ids(questions[1:], 64), ids(["retina"], 64)]
    encoder.encode(questions[:1], 512)  # after the block nothing is remembered
    assert ran[-1] == ids(questions[:1], 512)


def test_similar_texts_are_closer(encoder):
    v = encoder.encode(["diabetes medication", "metformin treats type 2 diabetes", "a red bicycle"], 64)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_bfloat16_encoder_is_close_to_float32_and_says_so_in_its_identity(encoder):
    bf16 = load_encoder(EncoderConfig(dtype="bfloat16"))
    assert bf16.identity == "all-MiniLM-L6-v2|pooling=mean|dim=384|dtype=bfloat16" != encoder.identity
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    assert next(encoder.model.parameters()).dtype == torch.float32  # its own model, the float32 one is untouched
    ours, full = bf16.encode(TEXTS, 256), encoder.encode(TEXTS, 256)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(ours * full, axis=1)) > 0.99
    native = torch.ops.mkldnn._is_mkldnn_bf16_supported()
    assert resolve_dtype("auto", "cpu") == (torch.bfloat16 if native else torch.float32)
    assert resolve_dtype("float32", "cuda") == torch.float32
    with pytest.raises(ValueError, match="EncoderConfig.dtype"):
        resolve_dtype("int8", "cpu")


def test_load_encoder_is_cached():
    assert load_encoder(EncoderConfig()) is load_encoder(EncoderConfig())


def test_missing_model_path_names_the_setting(tmp_path):
    with pytest.raises(MissingModelError, match="EncoderConfig.model_path"):
        load_encoder(EncoderConfig(model_path=str(tmp_path / "nope")))


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory):
    """A randomly initialized 2-layer Qwen3 with a word-level tokenizer, saved like a Hugging Face model."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3Model

    from tests.tiny_models import tiny_qwen3_config

    path = tmp_path_factory.mktemp("qwen3")
    words = "<pad> <unk> <eos> the a retina drug gene disease eye of for treats protein".split()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")
    fast.save_pretrained(path)
    torch.manual_seed(0)
    config = tiny_qwen3_config(len(words), 128)
    Qwen3Model(config).save_pretrained(path)
    return path


def test_last_token_pooling_is_the_last_real_tokens_hidden_state(tiny_qwen3):
    from transformers import AutoModel

    enc = load_encoder(EncoderConfig(model_path=str(tiny_qwen3), pooling="last_token", batch_size=2))
    texts = ["the drug treats the disease of the eye", "retina", "gene protein"]
    vectors = enc.encode(texts, max_tokens=32)
    assert vectors.shape == (3, 32) and enc.identity.endswith("|pooling=last_token|dim=32")
    model = AutoModel.from_pretrained(tiny_qwen3).eval()
    for text, v in zip(texts, vectors):
        ids = torch.tensor([enc.token_ids([text], 32)[0]])
        with torch.no_grad():
            last = model(input_ids=ids).last_hidden_state[0, -1]
        np.testing.assert_allclose(v, (last / last.norm()).numpy(), atol=1e-4)
    mean = load_encoder(EncoderConfig(model_path=str(tiny_qwen3), pooling="mean")).encode(texts, 32)
    assert not np.allclose(mean, vectors, atol=1e-2)


def test_a_saved_encoder_loads_back_with_the_same_vectors(encoder, tmp_path):
    """What a fine-tuned mFAR query encoder does: save, then load_encoder on the directory."""
    encoder.save(tmp_path / "query_encoder")
    again = load_encoder(EncoderConfig(model_path=str(tmp_path / "query_encoder")))
    np.testing.assert_array_equal(again.encode(TEXTS, 64), encoder.encode(TEXTS, 64))
