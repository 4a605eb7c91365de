"""The gazetteer's dictionary: every normalized node name and alias, and the nodes it names.

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
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from grasp_core.entities.config import GazetteerConfig
from grasp_core.io import atomic_file
from grasp_core.skb.format import SKB, content_hash
from grasp_core.textnorm import tokens

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


def build_dictionary(skb: SKB, cfg: GazetteerConfig) -> Dictionary:
    """The dictionary of ``skb``'s names and aliases: strings of stopwords only, of more than ``max_ngram``
    tokens, one-token strings under ``min_chars`` characters and bare numbers are left out; a string is a symbol
    when every name it normalizes from is one."""
    entries: dict[str, set[int]] = defaultdict(set)
    symbol_votes: dict[str, bool] = {}
    names = skb.nodes["name"].astype(str).tolist()
    for node_id, alias in [*enumerate(names), *skb.alias_pairs()]:
        words = tokens(alias)
        if not words or len(words) > cfg.max_ngram or STOPWORDS.issuperset(words):
            continue
        if len(words) == 1 and (len(words[0]) < cfg.min_chars or words[0].isdigit()):
            continue
        key = " ".join(words)
        entries[key].add(node_id)
        symbol_votes[key] = symbol_votes.get(key, True) and is_symbol(alias)
    degrees = skb.degrees.tolist()
    by_degree = {
        k: (*v,) if len(v) == 1 else tuple(sorted(v, key=lambda i: (-degrees[i], i))) for k, v in entries.items()
    }
    return Dictionary(by_degree, frozenset(k for k, is_sym in symbol_votes.items() if is_sym))


def dictionary_key(skb_fingerprint: str, cfg: GazetteerConfig) -> str:
    """What a saved dictionary must have been built from to be used: the SKB, the settings, the code."""
    package = Path(__file__).resolve().parents[1]
    code = content_hash([package / name for name in _CODE])
    return hashlib.sha256(json.dumps([skb_fingerprint, cfg.max_ngram, cfg.min_chars, code]).encode()).hexdigest()


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
