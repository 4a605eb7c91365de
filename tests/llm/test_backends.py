from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from grasp_core.errors import GraspError, LLMEndpointError, MissingModelError
from grasp_core.llm.backends import OpenAICompatibleLLM, TransformersLLM, strip_thinking
from grasp_core.planner.lm.grammar import PlanGrammar
from grasp_core.planner.lm.prompt import build_planner_messages
from tests.llm.helpers import QUERY, SCHEMA, TABLE


@pytest.fixture(scope="module")
def llm(model_dir):
    return TransformersLLM(model_dir)


def test_missing_model_path_names_the_setting(tmp_path):
    with pytest.raises(MissingModelError, match="planner.model_path"):
        TransformersLLM(tmp_path / "nope", setting="planner.model_path")


def test_missing_adapter_path_names_the_setting(model_dir, tmp_path):
    with pytest.raises(MissingModelError, match="adapter_path"):
        TransformersLLM(model_dir, adapter_path=tmp_path / "nope")


def test_greedy_generation_is_batched_left_padded_and_deterministic(llm):
    chats = [
        build_planner_messages(SCHEMA, TABLE, q, compact=True) for q in (QUERY, "short", "a somewhat longer query text")
    ]
    batched = llm.generate(chats, n=2, max_new_tokens=12)
    assert [len(g) for g in batched] == [2, 2, 2] and all(g[0] == g[1] for g in batched)
    alone = [llm.generate([c], max_new_tokens=12)[0][0] for c in chats]
    assert [g[0] for g in batched] == alone  # padding does not change what a prompt generates
    assert (
        llm.generate(["<|bos|>plain text prompt"], max_new_tokens=5)[0][0]
        == llm.generate(["<|bos|>plain text prompt"], max_new_tokens=5)[0][0]
    )


def test_sampling_returns_n_different_completions(llm):
    torch.manual_seed(0)
    out = llm.generate(
        [build_planner_messages(SCHEMA, TABLE, QUERY, compact=True)], n=4, temperature=1.0, max_new_tokens=16
    )
    assert len(out) == 1 and len(out[0]) == 4 and len(set(out[0])) > 1


def test_constraint_needs_one_constraint_per_prompt(llm):
    with pytest.raises(GraspError, match="one constraint per prompt"):
        llm.generate(["a", "b"], constraint=[PlanGrammar(SCHEMA, TABLE)])


def test_peft_adapter_is_loaded(model_dir, tmp_path, llm):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    peft_model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(model_dir), LoraConfig(r=4, target_modules="all-linear")
    )
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # a trained adapter, so that it changes the outputs
    peft_model.save_pretrained(tmp_path / "adapter")
    adapted = TransformersLLM(model_dir, adapter_path=tmp_path / "adapter")
    ids = llm.tokenizer("<|bos|>hello", return_tensors="pt")
    with torch.no_grad():
        assert not torch.allclose(adapted.model(**ids).logits, llm.model(**ids).logits)


def test_strip_thinking():
    assert strip_thinking('<think>\nhmm {}\n</think>\n\n{"a":1}') == '{"a":1}'
    assert strip_thinking('{"a":"<think>"}') == '{"a":"<think>"}'


# ------------------------------------------------------------------ the OpenAI-compatible endpoint (a local stub)
class _Stub(BaseHTTPRequestHandler):
    requests: list[dict] = []
    fail_first: int = 0
    status: int = 200

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        if type(self).fail_first > 0:
            type(self).fail_first -= 1
            return self._send(503, {"error": "warming up"})
        if type(self).status != 200:
            return self._send(type(self).status, {"error": "bad request"})
        user = body["messages"][-1]["content"]
        n = min(body["n"], 2)  # like some servers: fewer choices than asked
        choices = [
            {"index": i, "message": {"role": "assistant", "content": f"<think>x</think>echo {i}: {user}"}}
            for i in range(n)
        ]
        self._send(200, {"choices": choices})

    def _send(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server(monkeypatch):
    _Stub.requests, _Stub.fail_first, _Stub.status = [], 0, 200
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("TEST_LLM_KEY", "sekrit")
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_http_backend_speaks_chat_completions(server):
    llm = OpenAICompatibleLLM(server, "teacher-27b", api_key_env="TEST_LLM_KEY", backoff_s=0.01)
    chat = [{"role": "system", "content": "be a planner"}, {"role": "user", "content": "q1"}]
    out = llm.generate([chat, "q2"], n=3, temperature=0.7, max_new_tokens=50)
    assert out == [["echo 0: q1", "echo 1: q1", "echo 0: q1"], ["echo 0: q2", "echo 1: q2", "echo 0: q2"]]
    first = next(r for r in _Stub.requests if r["messages"] == chat and r["n"] == 3)
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sekrit"
    assert (first["model"], first["temperature"], first["max_tokens"]) == ("teacher-27b", 0.7, 50)
    assert first["chat_template_kwargs"] == {"enable_thinking": False}
    assert sorted(r["n"] for r in _Stub.requests if r["messages"] == chat) == [1, 3]  # asked again for the missing one


def test_http_backend_retries_transient_errors(server):
    _Stub.fail_first = 2
    llm = OpenAICompatibleLLM(server, "m", retries=3, backoff_s=0.01)
    assert llm.generate(["q"]) == [["echo 0: q"]]
    assert len(_Stub.requests) == 3


def test_http_backend_gives_up_with_a_clear_error(server):
    _Stub.fail_first = 10
    with pytest.raises(LLMEndpointError, match="unreachable after 3 attempts.*HTTP 503"):
        OpenAICompatibleLLM(server, "m", retries=2, backoff_s=0.01).generate(["q"])
    _Stub.fail_first, _Stub.status = 0, 400
    with pytest.raises(LLMEndpointError, match="rejected the request.*HTTP 400"):
        OpenAICompatibleLLM(server, "m", backoff_s=0.01).generate(["q"])
    assert len(_Stub.requests) == 3 + 1  # a 400 is not retried


def test_http_backend_unreachable_and_no_constraint():
    llm = OpenAICompatibleLLM("http://127.0.0.1:9/v1", "m", retries=1, backoff_s=0.01, timeout_s=2)
    with pytest.raises(LLMEndpointError, match=r"127\.0\.0\.1:9/v1/chat/completions is unreachable.*Connect"):
        llm.generate(["q"])
    with pytest.raises(GraspError, match="cannot enforce the plan grammar"):
        llm.generate(["q"], constraint=[PlanGrammar(SCHEMA, TABLE)])


def test_generation_stops_at_the_model_context(llm, monkeypatch):
    limit = llm.model.config.max_position_embeddings
    prompt = "<|bos|>" + "drug " * ((limit - 20) // 2)
    n_prompt = len(llm.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert n_prompt < limit
    lengths, generate = [], llm.model.generate

    def counted(**kwargs):  # the generated sequences' lengths (decoded text re-tokenizes to other counts)
        out = generate(**kwargs)
        lengths.append(out.shape[1])
        return out

    monkeypatch.setattr(llm.model, "generate", counted)
    assert llm.generate([prompt], max_new_tokens=700)[0][0] is not None
    assert lengths and lengths[0] <= limit
    with pytest.raises(GraspError, match="does not fit"):
        llm.generate(["<|bos|>" + "drug " * (limit + 5)])


def test_from_model_wraps_a_model_in_memory_and_keeps_its_mode(llm, model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir).train()
    wrapped = TransformersLLM.from_model(model, AutoTokenizer.from_pretrained(model_dir))
    chat = build_planner_messages(SCHEMA, TABLE, QUERY, compact=True)
    assert wrapped.generate([chat], max_new_tokens=10) == llm.generate([chat], max_new_tokens=10)
    assert model.training
