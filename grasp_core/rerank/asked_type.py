"""The asked answer type: which node type a question asks for ("which genes …", "what is the term for …").

A multinomial logistic regression on two views of the question, trained on the training queries' gold types
(a query whose answers span several types is left out):

* the query vector (the frozen encoder's, as the text branch embeds the query): what the question is about;
* its **request words**: the first ``cue_window`` content words of the question and the first ``cue_window``
  after each request cue ("which", "what", "find", "list", …; stopwords and cues themselves skipped), as binary
  features over the words that open at least ``cue_min_count`` training queries this way. A question says what
  it wants right after it asks ("Which *conditions* is the FBN1 gene associated with?"); the vector alone is
  dominated by what it names (the gene), and the request words carry the asked type across registers. The
  vocabulary is learned from the training queries, so any SKB's own type nouns ("conditions", "symptoms",
  "papers", "brands") become features without a lexicon.

It is a reranker feature (the candidate's type's probability), never a filter. Stored as ``asked_type.json``
in the reranker artifact (types, vocabulary, weights, bias); prediction is one matrix product, so serving needs
no sklearn. Training is deterministic (lbfgs, no sampling).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grasp_core.entities.gazetteer import REQUEST_CUES, STOPWORDS
from grasp_core.io import read_json, write_json
from grasp_core.textnorm import tokenize

FILE = "asked_type.json"


@dataclass(frozen=True)
class AskedTypeConfig:
    c: float = field(default=3.0, metadata={"help": "inverse L2 regularization strength of the logistic regression"})
    max_iter: int = field(default=1000, metadata={"help": "solver iterations (lbfgs)"})
    cue_window: int = field(
        default=1,
        metadata={"help": "request words: this many content words at the question's start and after each cue"},
    )
    cue_min_count: int = field(
        default=10, metadata={"help": "a request word is a feature when at least this many training queries have it"}
    )


def request_words(text: str, window: int) -> set[str]:
    """The normalized content words that open ``text`` and follow each of its request cues (``window`` each)."""
    norm = [t for t, _, _ in tokenize(text)]
    content = [(i, t) for i, t in enumerate(norm) if t not in STOPWORDS and t not in REQUEST_CUES and not t.isdigit()]
    starts = [-1] + [i for i, t in enumerate(norm) if t in REQUEST_CUES]
    return {t for s in starts for t in [t for i, t in content if i > s][:window]}


def request_matrix(texts: Sequence[str], vocabulary: Sequence[str], window: int) -> np.ndarray:
    """float32 [n, V]: 1 where a text's request words (:func:`request_words`) hold the vocabulary's word."""
    column = {w: j for j, w in enumerate(vocabulary)}
    out = np.zeros((len(texts), len(column)), np.float32)
    for row, text in enumerate(texts):
        for w in request_words(text, window):
            if w in column:
                out[row, column[w]] = 1.0
    return out


@dataclass
class AskedType:
    types: list[str]
    weights: np.ndarray  # float32 [T, D + V]: query vector, then one column per request word
    bias: np.ndarray  # float32 [T]
    vocabulary: list[str] = field(default_factory=list)  # request words with a column
    window: int = 0  # request words per cue (0 with an empty vocabulary: the query vector alone)

    def features(self, vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """[n, D + V] inputs of the model: query vectors [n, D] and the texts' request words."""
        vectors = np.atleast_2d(np.asarray(vectors, np.float32))
        if len(texts) != len(vectors):
            raise ValueError(f"{len(vectors)} query vectors but {len(texts)} texts")
        return np.concatenate([vectors, request_matrix(texts, self.vocabulary, self.window)], axis=1)

    def proba(self, vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """[n, T] probabilities of each type for query vectors [n, D] and their texts (one [D] vector: [1, T])."""
        logits = self.features(vectors, texts) @ self.weights.T + self.bias
        logits -= logits.max(1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(1, keepdims=True)

    def predict(self, vectors: np.ndarray, texts: Sequence[str]) -> list[str]:
        return [self.types[i] for i in self.proba(vectors, texts).argmax(1)]

    def save(self, directory: Path) -> None:
        write_json(
            Path(directory) / FILE,
            {
                "types": self.types,
                "vocabulary": self.vocabulary,
                "window": self.window,
                "weights": self.weights.tolist(),
                "bias": self.bias.tolist(),
            },
        )

    @classmethod
    def load(cls, directory: Path) -> AskedType | None:
        """The model saved in ``directory``, or None when it has none (a reranker trained before it existed)."""
        file = Path(directory) / FILE
        if not file.exists():
            return None
        obj = read_json(file)
        weights, bias = np.asarray(obj["weights"], np.float32), np.asarray(obj["bias"], np.float32)
        return cls(obj["types"], weights, bias, list(obj.get("vocabulary", [])), int(obj.get("window", 0)))


def fit_asked_type(
    vectors: np.ndarray,
    texts: Sequence[str],
    labels: Sequence[str],
    types: Sequence[str],
    cfg: AskedTypeConfig = AskedTypeConfig(),
) -> AskedType:
    """Fit on query vectors, their texts and gold types (labels outside ``types``, e.g. ``mixed``, are left out);
    a type no training query asks for gets probability ~0."""
    from sklearn.linear_model import LogisticRegression

    keep = np.array([label in types for label in labels], bool)
    kept_texts = [t for t, k in zip(texts, keep) if k]
    counts = Counter(w for t in kept_texts for w in request_words(t, cfg.cue_window))
    vocabulary = sorted(w for w, n in counts.items() if n >= cfg.cue_min_count)
    kept_vectors = np.asarray(vectors, np.float32)[keep].reshape(len(kept_texts), -1)
    x = np.concatenate([kept_vectors, request_matrix(kept_texts, vocabulary, cfg.cue_window)], axis=1)
    y = np.asarray(labels, dtype=object)[keep]
    seen = sorted(set(y))
    weights = np.zeros((len(types), x.shape[1]), np.float32)
    bias = np.full(len(types), -30.0, np.float32)
    if len(seen) < 2:  # one type only (or none): it is always the asked one
        bias[list(types).index(seen[0]) if seen else 0] = 0.0
        return AskedType(list(types), weights, bias, vocabulary, cfg.cue_window)
    model = LogisticRegression(C=cfg.c, max_iter=cfg.max_iter).fit(x, y)
    coef, intercept = model.coef_, model.intercept_
    if len(seen) == 2:  # sklearn keeps one row for two classes: class 1 vs class 0
        coef, intercept = np.stack([-coef[0] / 2, coef[0] / 2]), np.array([-intercept[0] / 2, intercept[0] / 2])
    for row, t in enumerate(model.classes_):
        weights[list(types).index(t)], bias[list(types).index(t)] = coef[row], intercept[row]
    return AskedType(list(types), weights, bias, vocabulary, cfg.cue_window)
