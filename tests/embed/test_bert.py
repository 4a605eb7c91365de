import pytest
import torch

from grasp_core.embed.bert import BertConfig, BertEncoder
from grasp_core.embed.encoder import batch_tensors, minilm_path


@pytest.fixture(scope="module")
def reference():
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(minilm_path())).eval()


def test_token_vectors_are_transformers_bert_models_bit_for_bit(reference, encoder):
    ours = BertEncoder.load(minilm_path()).eval()
    texts = ["retina", "a drug approved for topical ocular use in adults " * 8, "", "Ångström café 漢字 naïve"]
    for length in (8, 16, 64):
        input_ids, mask = batch_tensors(encoder.token_ids(texts, length), length, 0)
        with torch.inference_mode():
            padded = reference(input_ids=input_ids, attention_mask=mask).last_hidden_state
            assert torch.equal(ours(input_ids, mask), padded)
            alone = input_ids[:1, : int(mask[0].sum())]  # nothing padded: no mask at all
            assert torch.equal(ours(alone, torch.ones_like(alone)), reference(input_ids=alone).last_hidden_state)


def test_save_and_load_round_trip(tmp_path):
    torch.manual_seed(0)
    model = BertEncoder(
        BertConfig(
            vocab_size=50,
            hidden_size=8,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=16,
            max_position_embeddings=32,
        )
    ).eval()
    model.save(tmp_path)
    again = BertEncoder.load(tmp_path).eval()
    ids = torch.tensor([[1, 5, 7, 2, 0]])
    assert torch.equal(again(ids, (ids > 0).long()), model(ids, (ids > 0).long()))


def test_an_unsupported_model_is_refused_in_one_line(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert", "hidden_act": "relu"}')
    with pytest.raises(ValueError, match="only gelu activations"):
        BertConfig.read(tmp_path)


def test_loading_draws_no_weights_and_refuses_a_checkpoint_missing_one(tmp_path):
    from safetensors.torch import load_file, save_file

    config = BertConfig(
        vocab_size=50,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=32,
    )
    BertEncoder(config).save(tmp_path)
    state = torch.random.get_rng_state()
    BertEncoder.load(tmp_path)
    assert torch.equal(torch.random.get_rng_state(), state)  # nothing drawn: every weight is read
    assert not torch.equal(BertEncoder(config).encoder.layer[0].intermediate.dense.weight, torch.zeros(16, 8))
    weights = load_file(tmp_path / "model.safetensors")
    del weights["encoder.layer.0.intermediate.dense.weight"]
    save_file(weights, tmp_path / "model.safetensors")
    with pytest.raises(RuntimeError, match="Missing key"):  # so a weight left undrawn is never used
        BertEncoder.load(tmp_path)
