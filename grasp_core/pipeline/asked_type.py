"""The asked-type model of a dataset, fit on its training queries: a reranker feature and a plan chooser feature.

Both the reranker step and the planner rounds fit it (deterministic: the same model in every process), so neither
asset depends on the other.
"""

from __future__ import annotations

import numpy as np

from grasp_core.components import Components
from grasp_core.rerank.asked_type import AskedType, fit_asked_type
from grasp_core.text.mfar import QUERY_MAX_TOKENS

ASKED_MAX_TOKENS = QUERY_MAX_TOKENS  # the query vectors the reranker's features read (mFAR's encoder and limit)


def fit_asked_type_model(components: Components) -> tuple[AskedType, dict]:
    """The asked-type model on the training queries' gold types, with its accuracy on val (a metric)."""
    types, gold = list(components.skb.schema.node_types), components.skb.query_target_types()
    out = {}
    for split in ("train", "val"):
        rows = (components.skb.queries["split"] == split).to_numpy()
        texts = components.skb.queries["query"][rows].tolist()
        out[split] = (np.asarray(components.encoder.encode(texts, ASKED_MAX_TOKENS)), texts, gold[rows].tolist())
    asked = fit_asked_type(*out["train"], types, components.profile.asked_type, components.skb.type_names())
    vectors, texts, labels = out["val"]
    accuracy = float(np.mean([p == g for p, g in zip(asked.predict(vectors, texts), labels)])) if labels else 0.0
    return asked, {"asked_type_val_accuracy": round(100 * accuracy, 1)}
