"""Search-box training questions: bare-name look-ups and findings lists, generated from the KB, train/val only."""

import random
from difflib import SequenceMatcher

import pytest

from grasp_core.questions.intent_queries import findings_lists, intent_queries
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


def test_a_list_with_a_finding_the_target_lacks_is_answered_by_the_targets_with_the_most(skb):
    types = skb.nodes["type"].astype(str).to_numpy()
    e = skb.edges

    def over(relation: str) -> dict[int, set[int]]:
        out: dict[int, set[int]] = {}
        for s, d in zip(e.loc[e["rel"] == relation, "src"], e.loc[e["rel"] == relation, "dst"]):
            out.setdefault(int(s), set()).add(int(d))
            out.setdefault(int(d), set()).add(int(s))
        return out

    lists = findings_lists(skb, 60, random.Random(0), stray=1.0)
    assert lists
    strays = 0
    for listed, gold, relation, target in lists:
        near = over(relation)
        assert len(set(listed)) == len(listed) and all(types[g] == target for g in gold)
        matched = {len(near[g] & set(listed)) for g in gold}
        assert len(matched) == 1 and min(matched) >= 2  # every gold node has the same share, at least two
        rivals = {t for f in listed for t in near.get(f, ()) if types[t] == target} - set(gold)
        assert all(len(near[t] & set(listed)) < min(matched) for t in rivals)  # ... and the largest
        strays += min(matched) < len(listed)
    assert strays >= len(lists) // 2  # most lists name a finding no gold node has
    for listed, gold, relation, _ in findings_lists(skb, 60, random.Random(0), stray=0.0):
        assert all(set(listed) <= over(relation)[g] for g in gold)
