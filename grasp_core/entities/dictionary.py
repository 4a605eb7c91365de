"""The gazetteer's dictionary: every normalized node name and alias, and the nodes it names.

Beside the names themselves it holds their **heads**: a name holding a head word of ``GazetteerConfig.head_words``
(``syndrome``, ``disease``, ``disorder``) after its first word is also found by the shorter strings people type:
what comes before the head word ("marfan" for "Marfan syndrome", "ehlers danlos" for "Ehlers-Danlos syndrome,
classic type"), and the name up to the head word ("usher syndrome" for "Usher syndrome, type I"). A head is added
only where no name or alias is that string, and one without its head word only when most names that hold it have
a head word after it (``head_min_share``): "noonan" and "fragile x" are heads, "eye" (of the alias "eye disease"),
"down" and "short" are not; nor is a one-word head the SKB's text fields mostly write in lower case (an English
word: "well" of "Wells syndrome"). A head names every node it was made from, most connected first.

Building it normalizes each of an SKB's names and aliases (tens of thousands on hpo), the largest part of loading a
retriever; so the ``entity_tables`` step, which builds it to extract the tables, writes it into its artifact
(``gazetteer.json``) and a process that answers questions reads it back (``Components.gazetteer``). What is read
is what would be built: the file carries a key over everything the dictionary depends on (the SKB's graph
fingerprint, the gazetteer settings it uses, and the source of the code that builds it: this module, the
normalization of :mod:`grasp_core.textnorm` and the SKB's alias and degree accessors in
:mod:`grasp_core.skb.format`), and a file of another key is not used (the dictionary is built instead).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from grasp_core.entities.config import GazetteerConfig
from grasp_core.io import atomic_file
from grasp_core.skb.format import SKB, content_hash
from grasp_core.textnorm import tokenize, tokens

FILE = "gazetteer.json"  # in the entity_tables artifact
STOPWORDS = frozenset(
    """a an the of in on at to for from by with without within into onto about over under above below between
    among and or but nor not no is are was were be been being am do does did done has have had having can could
    may might must shall should will would this that these those it its they them their there here which what who
    whom whose when where why how whether if then than so such as also any some all each every both either neither
    other another more most less least many much few very too only just same own i me my we our you your he she
    his her him us via per etc please""".split()
)
_CODE = ("textnorm.py", "entities/dictionary.py", "skb/format.py")  # relative to the grasp_core package


@dataclass(frozen=True)
class Dictionary:
    """Normalized string -> the nodes it names, most connected first; and the strings that are symbols (``MET``)."""

    entries: dict[str, tuple[int, ...]]
    symbols: frozenset[str]


def is_symbol(alias: str) -> bool:
    """A one-word, letters-only name with two or more capitals (``MET``, ``MAX``): it may be an English word
    when written in lower case. Symbols with a digit (``FBN1``) are not words and match in any case."""
    return alias.isalpha() and sum(c.isupper() for c in alias) >= 2


def _heads(words: list[str], head_words: frozenset[str]) -> list[tuple[str, bool]]:
    """The shorter strings a name's tokens are also typed as: (key, made by dropping the head word). Up to the first
    head word when more follows it ("usher syndrome" of "usher syndrome type i"), and what comes before it."""
    j = next((j for j, w in enumerate(words) if j and w in head_words), None)
    if j is None:
        return []
    out = [(" ".join(words[:j]), True)]
    if j + 1 < len(words):
        out.append((" ".join(words[: j + 1]), False))
    return out


def _usable(words: list[str], cfg: GazetteerConfig) -> bool:
    if not words or len(words) > cfg.max_ngram or STOPWORDS.issuperset(words):
        return False
    return len(words) > 1 or (len(words[0]) >= cfg.min_chars and not words[0].isdigit())


def build_dictionary(skb: SKB, cfg: GazetteerConfig) -> Dictionary:
    """The dictionary of ``skb``'s names and aliases, and their heads (see the module): strings of stopwords only,
    of more than ``max_ngram`` tokens, one-token strings under ``min_chars`` characters and bare numbers are left
    out; a string is a symbol when every name it normalizes from is one."""
    entries: dict[str, set[int]] = defaultdict(set)
    symbol_votes: dict[str, bool] = {}
    names = skb.nodes["name"].astype(str).tolist()
    head_words = frozenset(tokens(" ".join(cfg.head_words)))
    heads: dict[str, set[int]] = defaultdict(set)
    dropped: set[str] = set()  # heads made by dropping the head word: kept by share
    said = [(node_id, tokens(alias), alias) for node_id, alias in [*enumerate(names), *skb.alias_pairs()]]
    for node_id, words, alias in said:
        for head, by_drop in _heads(words, head_words):
            if _usable(head.split(), cfg):
                heads[head].add(node_id)
                if by_drop:
                    dropped.add(head)
        if not _usable(words, cfg):
            continue
        key = " ".join(words)
        entries[key].add(node_id)
        symbol_votes[key] = symbol_votes.get(key, True) and is_symbol(alias)
    heads = {k: v for k, v in heads.items() if k not in entries}
    held, followed = _head_counts(said, {k for k in heads if k in dropped}, head_words)
    heads = {k: v for k, v in heads.items() if k not in dropped or followed[k] >= cfg.head_min_share * held[k]}
    common = _common_words(skb, {k for k in heads if " " not in k})
    for key, nodes in heads.items():
        if key not in common:
            entries[key] = nodes
            symbol_votes[key] = False
    degrees = skb.degrees.tolist()
    by_degree = {
        k: (*v,) if len(v) == 1 else tuple(sorted(v, key=lambda i: (-degrees[i], i))) for k, v in entries.items()
    }
    return Dictionary(by_degree, frozenset(k for k, is_sym in symbol_votes.items() if is_sym))


def _head_counts(
    said: list[tuple[int, list[str], str]], keys: set[str], head_words: frozenset[str]
) -> tuple[Counter[str], Counter[str]]:
    """For each of ``keys``: how many names and aliases hold it, and in how many a head word comes after it."""
    held: Counter[str] = Counter()
    followed: Counter[str] = Counter()
    longest = max((k.count(" ") + 1 for k in keys), default=0)
    for _, words, _ in said:
        for i in range(len(words)):
            for n in range(1, min(longest, len(words) - i) + 1):
                key = " ".join(words[i : i + n])
                if key in keys:
                    held[key] += 1
                    followed[key] += any(w in head_words for w in words[i + n :])
    return held, followed


def _common_words(skb: SKB, words: set[str]) -> set[str]:
    """Those of ``words`` the SKB's text fields write in lower case more often than capitalized: English words
    ("well" of "Wells syndrome", "autoimmune"), not names ("Marfan"), so not typed alone to mean the node."""
    if not words:
        return set()
    lower: Counter[str] = Counter()
    upper: Counter[str] = Counter()
    for field in skb.schema.text_fields:
        if field not in skb.nodes:
            continue
        for text in skb.nodes[field].dropna().astype(str):
            for key, start, _ in tokenize(text):
                if key in words:
                    (lower if text[start].islower() else upper)[key] += 1
    return {w for w in words if lower[w] > upper[w]}


def dictionary_key(skb_fingerprint: str, cfg: GazetteerConfig) -> str:
    """What a saved dictionary must have been built from to be used: the SKB, the settings, the code."""
    package = Path(__file__).resolve().parents[1]
    code = content_hash([package / name for name in _CODE])
    return hashlib.sha256(
        json.dumps([skb_fingerprint, cfg.max_ngram, cfg.min_chars, cfg.head_words, cfg.head_min_share, code]).encode()
    ).hexdigest()


def write_dictionary(path: Path, dictionary: Dictionary, key: str) -> None:
    """Write ``dictionary`` under ``key`` (:func:`dictionary_key`) to ``path``."""
    with atomic_file(path) as handle:
        json.dump(
            {
                "key": key,
                "strings": list(dictionary.entries),
                "nodes": list(dictionary.entries.values()),
                "symbols": sorted(dictionary.symbols),
            },
            handle,
            separators=(",", ":"),
        )


def read_dictionary(path: Path, key: str) -> Dictionary | None:
    """The dictionary saved at ``path`` when it was saved under ``key``; None when it was not (or is absent)."""
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    if saved.get("key") != key:
        return None
    return Dictionary(dict(zip(saved["strings"], map(tuple, saved["nodes"]))), frozenset(saved["symbols"]))
