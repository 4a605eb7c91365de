"""The pystdlib result on the test questions that share no grounding with a train/val question.

benchmarks/results/pipeline_pystdlib.json came from the generic synthesizer as of commit 3fcd8ab, which deduplicated
questions by text only: 31 of its 200 test questions were rewordings of a training question's grounding
(template, anchors, property). The synthesizer now keeps one wording per grounding. This script regenerates that
run's queries with the generator of 3fcd8ab (checked equal to the queries artifact), keeps the test questions whose
grounding no other split has, and recomputes Hit@1 and McNemar from the eval_metrics artifact's per-query rows:

    DAGSTER_HOME=$PWD/dagster_home python benchmarks/pystdlib_clean_test.py  # -> benchmarks/results/pipeline_pystdlib_clean_test.json
"""

import collections
import json
import pathlib
import random
import subprocess
import sys
import tempfile

src = subprocess.run(
    ["git", "show", "3fcd8ab:grasp_core/skb/generic_queries.py"], capture_output=True, text=True, check=True
).stdout
tmp = pathlib.Path(tempfile.mkdtemp())
(tmp / "old_gq.py").write_text(src)
sys.path.insert(0, str(tmp))
import old_gq  # noqa: E402
import pandas as pd  # noqa: E402

from grasp_core.eval.significance import mcnemar  # noqa: E402
from grasp_core.skb.format import read_skb  # noqa: E402
from grasp_core.skb.wording import load_wording  # noqa: E402

skb = read_skb("dagster_home/user_skbs/pystdlib")
w = load_wording("dagster_home/user_skbs/pystdlib", skb.schema, old_gq.property_rules(skb).term_fields)
rows = [q for q, _ in old_gq.generic_queries(skb, 1000, 0, wording=w)]
df = old_gq.queries_frame(rows, 0)
art = pd.read_parquet("dagster_home/artifacts/pystdlib/queries/queries.parquet")
assert list(art["query"]) == list(df["query"])
order = list(range(len(rows)))
random.Random("0-splits").shuffle(order)
groups = collections.defaultdict(set)
for pos, i in enumerate(order):
    r = rows[i]
    groups[(r.template, tuple(r.anchors), r.property)].add(df["split"][pos])
clean = [
    int(df["qid"][pos])
    for pos, i in enumerate(order)
    if df["split"][pos] == "test" and groups[(rows[i].template, tuple(rows[i].anchors), rows[i].property)] == {"test"}
]
p = pd.read_parquet("dagster_home/artifacts/pystdlib/eval_metrics/per_query_test.parquet")
p = p[p["qid"].isin(clean)]
hit = {s: g.sort_values("qid")["hit@1"].to_numpy() > 0 for s, g in p.groupby("setting")}
out = {
    "what": "pystdlib test questions whose grounding (template, anchors, property) no train/val question shares",
    "n_queries": len(clean),
    "hit@1": {s: round(100 * float(h.mean()), 1) for s, h in hit.items()},
    "mcnemar": {
        "served vs text": mcnemar(hit["served"], hit["text"])[1],
        "served+rerank vs served": mcnemar(hit["served+rerank"], hit["served"])[1],
    },
}
json.dump(out, open("benchmarks/results/pipeline_pystdlib_clean_test.json", "w"), indent=1)
print(json.dumps(out))
