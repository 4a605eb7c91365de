"""Search-box training questions: bare-name look-ups and findings lists, generated from the KB, train/val only."""

from difflib import SequenceMatcher

import pytest

from grasp_core.questions.intent_queries import intent_queries
from grasp_core.sources.synth import build_synth_skb
from grasp_core.textnorm import normalize


@pytest.fixture(scope="module")
def skb():
    return build_synth_skb("prime", "tiny")


def test_questions_are_seeded_train_and_val_only_and_answered_by_the_graph(skb):
    df = intent_queries(skb, 80, seed=0, first_qid=1000)
    assert df.equals(intent_queries(skb, 80, seed=0, first_qid=1000))  # same KB and seed, same questions
    assert set(df["split"]) == {"train", "val"} and df["qid"].tolist() == list(range(1000, 1000 + len(df)))
    assert df["query"].map(normalize).is_unique
    kinds = df["template"].str.split(">").str[0]
    assert set(kinds) == {"intent:lookup", "intent:findings"}
    types = skb.nodes["type"].astype(str).to_numpy()
    node_names = skb.nodes["name"].astype(str).tolist()
    names = {i: {normalize(n)} | {normalize(a) for a in skb.aliases_of(i)} for i, n in enumerate(node_names)}
    neighbours: dict[int, set[int]] = {}
    for s, d in zip(skb.edges["src"], skb.edges["dst"]):
        neighbours.setdefault(int(s), set()).add(int(d))
        neighbours.setdefault(int(d), set()).add(int(s))
    for row in df.itertuples():
        target = row.template.split(">")[1]
        assert 1 <= len(row.answer_ids) <= 20 and all(types[g] == target for g in row.answer_ids)
        if row.template.startswith("intent:lookup"):
            # the question holds a gold node's name or alias, but for one slip of a letter
            q = normalize(row.query)
            assert any(
                SequenceMatcher(None, n, q).find_longest_match().size >= len(n) // 2 - 1
                for g in row.answer_ids
                for n in names[g]
            )
        else:  # every gold node shares the findings: one common neighbour set of at least two nodes
            common = set.intersection(*(neighbours[g] for g in row.answer_ids))
            assert len(common) >= 2


def test_no_questions_when_none_are_asked_for(skb):
    assert len(intent_queries(skb, 0, seed=0, first_qid=0)) == 0
