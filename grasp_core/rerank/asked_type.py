"""The asked answer type: which node type a question asks for ("which genes …", "what is the term for …").

A multinomial logistic regression on the query vector (the frozen encoder's, as the text branch embeds the
query), trained on the training queries' gold types (a query whose answers span several types is left out).
It is a reranker feature (the candidate's type's probability), never a filter. Stored as ``asked_type.json``
in the reranker artifact (types, weights, bias); prediction is one matrix product, so serving needs no sklearn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grasp_core.io import read_json, write_json

FILE = "asked_type.json"


@dataclass(frozen=True)
class AskedTypeConfig:
    c: float = field(default=1.0, metadata={"help": "inverse L2 regularization strength of the logistic regression"})
    max_iter: int = field(default=1000, metadata={"help": "solver iterations (lbfgs)"})


@dataclass
class AskedType:
    types: list[str]
    weights: np.ndarray  # float32 [T, D]
    bias: np.ndarray  # float32 [T]

    def proba(self, vectors: np.ndarray) -> np.ndarray:
        """[n, T] probabilities of each type for query vectors [n, D] (a single [D] vector gives [1, T])."""
        logits = np.atleast_2d(vectors).astype(np.float32) @ self.weights.T + self.bias
        logits -= logits.max(1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(1, keepdims=True)

    def predict(self, vectors: np.ndarray) -> list[str]:
        return [self.types[i] for i in self.proba(vectors).argmax(1)]

    def save(self, directory: Path) -> None:
        write_json(
            Path(directory) / FILE,
            {"types": self.types, "weights": self.weights.tolist(), "bias": self.bias.tolist()},
        )

    @classmethod
    def load(cls, directory: Path) -> AskedType | None:
        """The model saved in ``directory``, or None when it has none (a reranker trained before it existed)."""
        file = Path(directory) / FILE
        if not file.exists():
            return None
        obj = read_json(file)
        return cls(obj["types"], np.asarray(obj["weights"], np.float32), np.asarray(obj["bias"], np.float32))


def fit_asked_type(
    vectors: np.ndarray, labels: Sequence[str], types: Sequence[str], cfg: AskedTypeConfig = AskedTypeConfig()
) -> AskedType:
    """Fit on query vectors and their gold types (labels outside ``types``, e.g. ``mixed``, are left out); a type
    no training query asks for gets probability ~0. Needs at least two types among the labels."""
    from sklearn.linear_model import LogisticRegression

    keep = np.array([label in types for label in labels])
    x, y = np.asarray(vectors, np.float32)[keep], np.asarray(labels, dtype=object)[keep]
    seen = sorted(set(y))
    weights = np.zeros((len(types), x.shape[1]), np.float32)
    bias = np.full(len(types), -30.0, np.float32)
    if len(seen) < 2:  # one type only: it is always the asked one
        bias[list(types).index(seen[0]) if seen else 0] = 0.0
        return AskedType(list(types), weights, bias)
    model = LogisticRegression(C=cfg.c, max_iter=cfg.max_iter).fit(x, y)
    coef, intercept = model.coef_, model.intercept_
    if len(seen) == 2:  # sklearn keeps one row for two classes: class 1 vs class 0
        coef, intercept = np.stack([-coef[0] / 2, coef[0] / 2]), np.array([-intercept[0] / 2, intercept[0] / 2])
    for row, t in enumerate(model.classes_):
        weights[list(types).index(t)], bias[list(types).index(t)] = coef[row], intercept[row]
    return AskedType(list(types), weights, bias)
