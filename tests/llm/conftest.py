from __future__ import annotations

import pytest
import torch

from grasp_core.planner.config import TinyModelConfig
from grasp_core.planner.lm.tiny_model import build_tiny_qwen3, save_model
from grasp_core.planner.lm.tokenizer import train_planner_tokenizer
from tests.llm.helpers import SCHEMA, corpus

TINY = TinyModelConfig(
    hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=128, max_positions=1024
)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """On a loaded 2-core machine OpenMP threads spin against each other (measured 20x slower generation)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory):
    return train_planner_tokenizer(corpus(), 800, tmp_path_factory.mktemp("tok") / "tokenizer", schema=SCHEMA)


@pytest.fixture(scope="session")
def model_dir(tokenizer, tmp_path_factory):
    return save_model(build_tiny_qwen3(tokenizer, TINY), tokenizer, tmp_path_factory.mktemp("model") / "planner")
