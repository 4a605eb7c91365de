"""The LLM teacher against a real OpenAI-compatible endpoint on 127.0.0.1 (answers from a Python function)."""

import json

import pytest

from grasp_core.errors import LLMEndpointError
from grasp_core.llm.backends import OpenAICompatibleLLM
from grasp_core.llm.config import EndpointConfig
from grasp_core.planner.teachers.llm import LLMTeacher, teacher_guidance
from grasp_core.planner.teachers.programmatic import json_text
from tests.llm.openai_server import OpenAIServer


def _query_of(messages) -> str:
    return messages[-1]["content"].rsplit("Query: ", 1)[1].strip()


def test_llm_teacher_plans_retries_and_counts_invalid_plans(world, monkeypatch):
    qids = [q for q in world.train if world.taught[q].plan is not None][:9]
    by_text = {world.queries[q].strip(): q for q in qids}
    bad, flaky = set(qids[:2]), set(qids[2:4])  # bad: never a plan; flaky: prose first, the plan when asked again
    asked: dict[int, int] = {}

    def answer(messages):
        qid = by_text[_query_of(messages)]
        asked[qid] = asked.get(qid, 0) + 1
        if qid in bad or (qid in flaky and asked[qid] == 1):
            return "The answer is probably a drug."
        return "<think>schema first</think>" + json_text(world.taught[qid].plan)

    monkeypatch.setenv("GRASP_TEST_KEY", "sk-local")
    with OpenAIServer(answer, fail_first=2) as server:
        cfg = EndpointConfig(server.url, "teacher", api_key_env="GRASP_TEST_KEY", retries=2, backoff_s=0.01)
        teacher = LLMTeacher(world.skb.schema, "synth-prime", OpenAICompatibleLLM.from_config(cfg, "t"), world.executor)
        out = teacher.teach(
            [world.queries[q] for q in qids], [world.tables[q] for q in qids], [world.gold[q] for q in qids]
        )

    for qid, plan in zip(qids, out):
        if qid in bad:
            assert plan.plan is None and plan.n_tried == 3  # greedy + 2 retries
            continue
        taught = world.taught[qid]
        assert json.loads(json_text(plan.plan)) == json.loads(json_text(taught.plan))
        assert (plan.gold_rank, plan.n_candidates) == (taught.gold_rank, taught.n_candidates)
        assert plan.n_tried == (2 if qid in flaky else 1)
    assert (teacher.invalid, teacher.retried, dict(teacher.errors)) == (2, 4, {"json": 2})
    assert server.failed == 2 and len(server.requests) == 2 + 9 + 4 + 2  # 503s, greedy, first retry, second retry
    assert set(server.keys) == {"Bearer sk-local"}
    system = server.requests[-1]["messages"][0]["content"]
    assert system.startswith('You are the retrieval planner of a knowledge base "synth-prime"')
    assert teacher_guidance(world.skb.schema, "synth-prime") in system and "drug -[" in system
    assert {r["temperature"] for r in server.requests[:11]} == {0.0} and server.requests[-1]["temperature"] == 0.7


def test_endpoint_timeouts_are_retried_then_name_the_url():
    with OpenAIServer(lambda m: "{}", slow_marker="slow", slow_s=1.0) as server:
        llm = OpenAICompatibleLLM(server.url, "m", timeout_s=0.2, retries=1, backoff_s=0.01)
        with pytest.raises(LLMEndpointError, match=r"unreachable after 2 attempts \(ReadTimeout"):
            llm.generate(["slow please"])
        assert llm.generate(["fast"]) == [["{}"]]
    assert len(server.requests) == 3


def test_no_endpoint_configured_is_a_clear_error():
    with pytest.raises(Exception, match=r"teacher_endpoint.base_url is not set"):
        OpenAICompatibleLLM.from_config(EndpointConfig(), "teacher_endpoint")
