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
  "papers", "brands") become features without a lexicon;
* the request words' **types among the SKB's names**: the log of the mean, over the first ``name_window`` request
  words that occur in at least ``name_min_count`` node names or aliases, of the share of each type among the names
  holding the word (add-one smoothed; zeros when no word occurs). A request noun no training query opens with
  ("Which *syndromes* …") or an adjective in front ("*Hereditary* cancer syndromes with …") still points at the
  type whose names use it.

It is a reranker feature (the candidate's type's probability), never a filter. Stored as ``asked_type.json``
in the reranker artifact (types, vocabulary, weights, bias); prediction is one matrix product, so serving needs
no sklearn. Training is deterministic, the same model in every process: lbfgs with no sampling, run with one BLAS
thread (a second splits the solver's dot products and moves the weights by ~0.03), on features that never depend
on the order of a set (Python's string hashes, so a set's order, change from one process to the next).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grasp_core.entities.gazetteer import REQUEST_CUES, STOPWORDS
from grasp_core.io import read_json, write_json
from grasp_core.rerank.config import AskedTypeConfig
from grasp_core.textnorm import tokenize

FILE = "asked_type.json"


def request_words(text: str, window: int) -> set[str]:
    """The normalized content words that open ``text`` and follow each of its request cues (``window`` each)."""
    norm = [t for t, _, _ in tokenize(text)]
    content = [(i, t) for i, t in enumerate(norm) if t not in _STOP and not t.isdigit()]
    starts = [-1] + [i for i, t in enumerate(norm) if t in REQUEST_CUES]
    return {t for s in starts for t in [t for i, t in content if i > s][:window]}


# stopwords and cues as tokens: ``tokenize`` stems ("does" -> "doe")
_STOP = frozenset(t for w in STOPWORDS | REQUEST_CUES for t in (w, *(x for x, _, _ in tokenize(w))))


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
    name_words: list[str] = field(default_factory=list)  # words of the node names with their type counts
    name_counts: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))  # [W, T] names per type
    name_window: int = 0  # request words per cue looked up in name_words (no view when name_words is empty)
    _name_row: dict[str, int] = field(init=False, repr=False, compare=False)  # word -> row of name_counts
    _name_shares: np.ndarray = field(init=False, repr=False, compare=False)  # [W, T] add-one-smoothed type shares

    def __post_init__(self) -> None:  # once per model, not per question
        self._name_row = {w: i for i, w in enumerate(self.name_words)}
        self._name_shares = (self.name_counts + 1.0) / (self.name_counts + 1.0).sum(1, keepdims=True)

    def features(self, vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """[n, D + V (+ T)] inputs of the model: query vectors [n, D], the texts' request words and, with a name
        table, their types among the names."""
        vectors = np.atleast_2d(np.asarray(vectors, np.float32))
        if len(texts) != len(vectors):
            raise ValueError(f"{len(vectors)} query vectors but {len(texts)} texts")
        views = [vectors, request_matrix(texts, self.vocabulary, self.window)]
        if self.name_words:
            views.append(name_type_matrix(texts, self._name_row, self._name_shares, self.name_window))
        return np.concatenate(views, axis=1)

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
                "name_window": self.name_window,
                "name_words": self.name_words,
                "name_counts": self.name_counts.astype(int).tolist(),
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
        counts = np.asarray(obj.get("name_counts", []), np.float32).reshape(-1, len(obj["types"]))
        return cls(
            obj["types"],
            weights,
            bias,
            list(obj.get("vocabulary", [])),
            int(obj.get("window", 0)),
            list(obj.get("name_words", [])),
            counts,
            int(obj.get("name_window", 0)),
        )


def name_type_counts(
    names: Iterable[tuple[str, str]], types: Sequence[str], min_count: int
) -> tuple[list[str], np.ndarray]:
    """The words of (node type, name or alias) pairs held by at least ``min_count`` names, and how many names of
    each type hold each of them ([W, T], types in ``types`` order)."""
    column = {t: j for j, t in enumerate(types)}
    counts: dict[str, np.ndarray] = {}
    for node_type, name in names:
        for word in {t for t, _, _ in tokenize(name)}:
            if word not in _STOP and not word.isdigit():
                counts.setdefault(word, np.zeros(len(types), np.float32))[column[node_type]] += 1
    words = sorted(w for w, c in counts.items() if c.sum() >= min_count)
    return words, np.stack([counts[w] for w in words]) if words else np.zeros((0, len(types)), np.float32)


def name_type_matrix(texts: Sequence[str], row: dict[str, int], shares: np.ndarray, window: int) -> np.ndarray:
    """float32 [n, T]: per text, the log of the mean type share (``shares[row[word]]``) of its request words
    (``window`` per cue) among the names holding them; zeros for a text none of whose request words is in ``row``."""
    out = np.zeros((len(texts), shares.shape[1]), np.float32)
    for i, text in enumerate(texts):
        hits = sorted(row[w] for w in request_words(text, window) if w in row)  # a sum's order: a fixed one
        if hits:
            out[i] = np.log(shares[hits].mean(0))
    return out


def fit_asked_type(
    vectors: np.ndarray,
    texts: Sequence[str],
    labels: Sequence[str],
    types: Sequence[str],
    cfg: AskedTypeConfig = AskedTypeConfig(),
    names: Iterable[tuple[str, str]] = (),
) -> AskedType:
    """Fit on query vectors, their texts and gold types (labels outside ``types``, e.g. ``mixed``, are left out),
    and the SKB's (node type, name or alias) pairs for the names view; a type no training query asks for gets
    probability ~0."""
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    keep = np.array([label in types for label in labels], bool)
    kept_texts = [t for t, k in zip(texts, keep) if k]
    counts = Counter(w for t in kept_texts for w in request_words(t, cfg.cue_window))
    vocabulary = sorted(w for w, n in counts.items() if n >= cfg.cue_min_count)
    kept_vectors = np.asarray(vectors, np.float32)[keep].reshape(len(kept_texts), -1)
    shell = AskedType(list(types), np.zeros((0, 0), np.float32), np.zeros(0, np.float32), vocabulary, cfg.cue_window)
    if cfg.name_window:
        name_words, name_counts = name_type_counts(names, types, cfg.name_min_count)
        if name_words:
            shell = dataclasses.replace(
                shell, name_words=name_words, name_counts=name_counts, name_window=cfg.name_window
            )
    x = shell.features(kept_vectors, kept_texts)
    y = np.asarray(labels, dtype=object)[keep]
    seen = sorted(set(y))
    weights = np.zeros((len(types), x.shape[1]), np.float32)
    bias = np.full(len(types), -30.0, np.float32)
    if len(seen) < 2:  # one type only (or none): it is always the asked one
        bias[list(types).index(seen[0]) if seen else 0] = 0.0
        return dataclasses.replace(shell, weights=weights, bias=bias)
    with threadpool_limits(limits=1, user_api="blas"):
        model = LogisticRegression(C=cfg.c, max_iter=cfg.max_iter).fit(x, y)
    coef, intercept = model.coef_, model.intercept_
    if len(seen) == 2:  # sklearn keeps one row for two classes: class 1 vs class 0
        coef, intercept = np.stack([-coef[0] / 2, coef[0] / 2]), np.array([-intercept[0] / 2, intercept[0] / 2])
    for row, t in enumerate(model.classes_):
        weights[list(types).index(t)], bias[list(types).index(t)] = coef[row], intercept[row]
    return dataclasses.replace(shell, weights=weights, bias=bias)
