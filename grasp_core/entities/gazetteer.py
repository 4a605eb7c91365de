"""The gazetteer extractor: entity mentions without an LLM (the ``cpu`` default, ``docs/design.md``).

Built once per SKB: a dictionary from normalized strings (node names and the SKB's ``aliases`` column: hpo's
synonyms, lay terms and abbreviations) to the nodes they name (:mod:`grasp_core.entities.dictionary`, which also
keeps it beside the entity tables for a process that answers questions). Extraction of a query:

1. **Exact matches.** Every n-gram of 1..``max_ngram`` tokens is looked up. Normalization = NFKC, case folding,
   alphanumeric tokens, light plural stemming (``seizures`` = ``seizure``, ``allergies`` = ``allergy``).
   Strings made only of stopwords, one-token strings under ``min_chars`` characters and bare numbers are not in
   the dictionary; a one-word, letters-only symbol (``MET``, ``MAX``: two or more capitals) only matches a
   query token that has a capital letter, so ``met`` in running text is not the gene (``fbn1`` still matches
   ``FBN1``: generated queries often lower-case names).
2. **Overlaps.** The longest match wins (ties: the earlier one); a shorter match lying wholly inside an accepted
   one becomes a nested mention (``parent`` = the longer one's row; one level, longest first, no overlaps);
   crossing matches are dropped.
3. **Fuzzy matches** (when ``fuzzy``): each maximal run of ≥ ``fuzzy_min_tokens`` non-stopword tokens that no
   exact match touches is embedded and searched in the all-types name index; its best node is kept when the
   cosine reaches ``fuzzy_min_cosine``. This catches paraphrases and word-order variants of longer names at the
   cost of one encoder call per batch (a handful of spans per query). **Descriptive spans** (when
   ``descriptive``): runs with stopwords inside ("ringing in the ears", "eyes set too far apart"), cut at request
   cues and frame words ("called", "term"), are embedded the same way and kept from the lower
   ``descriptive_min_cosine`` on: a weak link stays in the table with its similarity for the planner and the
   reranker to weigh. The name index holds names and aliases, so a lay description finds the node its synonym
   names.
4. **Types** come from the matched nodes: at most ``max_types``, the types with most matched nodes first
   (ties: the higher-degree node's type).
5. **Roles** (a documented rule, no answer type is known at inference): a node-type word (``disease``,
   ``genes``, ``effect/phenotype`` -> ``phenotype``) within ``target_window`` tokens after a request cue
   (``which``, ``what``, ``find``, ``looking for``, ...) describes the answer -> a ``target`` row of that type
   (if a node name covers that span, that mention becomes the target). A numeric constraint (a comparator
   or currency before a number, or a unit after it: ``under $50``, ``at least 30 hours``) -> an ``attribute``
   row without links. Every other match -> ``anchor``.
6. **Typos.** A query word of ``typo_min_chars`` letters or more that no name or alias holds is read as the
   name word one edit away (a letter dropped, added, changed, or two swapped; the word most names hold wins), for
   matches of two or more words ("gaucher disase", "usher syndrom") and for one word of seven letters or more
   ("angelmn"); shorter single words are too often another English word.
7. **Look-ups** (:meth:`GazetteerExtractor.named`): a question that is a name, head or alias as a whole (typos read),
   or one inside a wording of ``lookup_frames`` ("what is marfan") or beside a node-type word ("BRCA2 gene"), asks
   for the nodes it names; the answer path puts them first.
8. **Mention text.** An exact match is written the way the node's name is written (paper: "written the way a
   graph node name would be written"): the name of a matched node whose name normalizes to the span, else the
   highest-degree matched node's name (a synonym match). A fuzzy match keeps the query's wording, so its link
   similarity stays honest.

Rows are ordered by position (a parent before its nested mentions) and then linked by :mod:`linking`.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
from tqdm.auto import tqdm

from grasp_core.entities.config import GazetteerConfig
from grasp_core.entities.dictionary import STOPWORDS, Dictionary, build_dictionary
from grasp_core.entities.linking import Mention, NameHits, link_many
from grasp_core.entities.table import EntityTable, Role
from grasp_core.skb.format import SKB
from grasp_core.textnorm import normalize, tokenize, tokens

# Words that frame a question about a description rather than belong to it ("what is it called when …").
FRAME_WORDS = frozenset("called call term terms word words name mean means meaning medical".split())
REQUEST_CUES = frozenset(
    """which what who find list identify name recommend suggest search seek seeking looking need want show give
    retrieve return locate discover get tell""".split()
)
_COMPARATOR = (
    r"(?:under|over|below|above|less than|more than|fewer than|greater than|at least|at most|up to|"
    r"no more than|no less than|between|after|before|since|within|around|about|approximately)"
)
_UNIT = (
    r"(?:%|percent|stars?|hours?|hrs?|minutes?|mins?|days?|weeks?|months?|years?|yrs?|pounds?|lbs?|kg|g|"
    r"grams?|ounces?|oz|inch(?:es)?|cm|mm|feet|ft|meters?|liters?|ml|mg|watts?|volts?|gb|tb|mb|mah|"
    r"dollars?|usd|euros?|reviews?|citations?|papers?|pages?|pieces?|pcs|pack|count)"
)
_NUMBER = r"\$?\d[\d,]*(?:\.\d+)?"
ATTRIBUTE_PATTERN = re.compile(
    rf"\b{_COMPARATOR}\s+{_NUMBER}(?:\s*{_UNIT}\b)?|\${_NUMBER}(?:\s*{_UNIT}\b)?|\b{_NUMBER}\s*{_UNIT}\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Match:
    start: int  # token positions, end exclusive
    end: int
    node_ids: tuple[int, ...]
    fuzzy: bool = False

    @property
    def length(self) -> int:
        return self.end - self.start


class GazetteerExtractor:
    """Finds and links mentions by dictionary matching. Build once per SKB, then ``extract`` many queries."""

    def __init__(
        self, skb: SKB, index, encoder, cfg: GazetteerConfig = GazetteerConfig(), dictionary: Dictionary | None = None
    ):
        """``dictionary``: ``skb``'s, built with ``cfg`` (:mod:`grasp_core.entities.dictionary`); None builds it."""
        self.skb, self.index, self.encoder, self.cfg = skb, index, encoder, cfg
        self._names = skb.nodes["name"].astype(str).to_numpy()
        self._types = skb.nodes["type"].astype(str).to_numpy()
        self._degrees = skb.degrees
        self.dictionary = dictionary if dictionary is not None else build_dictionary(skb, cfg)
        self._entries, self._symbol_keys = self.dictionary.entries, self.dictionary.symbols
        self._type_words = self._build_type_words()
        self._speller = Speller(self._entries, cfg.typo_min_chars)
        self._frames = [_frame(f) for f in cfg.lookup_frames]

    def named(self, text: str) -> tuple[int, ...]:
        """The nodes whose name, alias or head is the whole of ``text`` (normalized: case, Unicode form, plurals;
        typos as in matching), most connected first, or is all of it but a look-up wording (``lookup_frames``:
        "what is marfan", "angelman info") and a node-type word ("BRCA2 gene": then only that type's nodes); empty
        when ``text`` is not a name asked for (a bare name typed as a question asks for it)."""
        words = tokens(text)
        if not words:
            return ()
        for inner in _unframed(words, self._frames):  # the whole text first
            found = self._name(inner)
            if found:
                return found
            for typed, rest in ((inner[-1], inner[:-1]), (inner[0], inner[1:])):
                node_type = self._type_words.get(typed)
                if node_type is not None and rest:
                    found = tuple(n for n in self._name(rest) if self._types[n] == node_type)
                    if found:
                        return found
        return ()

    def _name(self, words: list[str]) -> tuple[int, ...]:
        """The nodes ``words`` (tokens) name as a whole, typos read; empty if none."""
        found = self._entries.get(" ".join(words))
        if found is not None:
            return found
        fixed = [self._speller.correct(w) for w in words]
        return self._entries.get(" ".join(fixed), ()) if _typo_match_allowed(words, fixed) else ()

    @property
    def num_entries(self) -> int:
        """Distinct normalized strings in the gazetteer."""
        return len(self._entries)

    # ---------------------------------------------------------------- building
    def _build_type_words(self) -> dict[str, str]:
        """Normalized type word -> node type: the full type name and each part of ``a/b`` or ``a_b`` names."""
        words: dict[str, str] = {}
        for t in self.skb.schema.node_types:
            for variant in [t, *t.split("/")]:
                key = normalize(variant.replace("_", " "))
                if key and key not in STOPWORDS:
                    words.setdefault(key, t)
        return words

    # -------------------------------------------------------------- extraction
    def extract(self, queries: Sequence[str], show_progress: bool = False) -> list[EntityTable]:
        """The entity table of every query (found and linked ``batch_size`` queries at a time)."""
        out: list[EntityTable] = []
        size = self.cfg.batch_size
        for start in tqdm(range(0, len(queries), size), desc="gazetteer", disable=not show_progress, unit="batch"):
            hits = self.name_hits()  # spans and mentions of the batch: one encoder call, one name-index pass
            mentions = self.find_mentions(list(queries[start : start + size]), hits)
            out.extend(link_many(mentions, self.skb, self.index, self.encoder, self.cfg.linking, hits))
        return out

    def name_hits(self) -> NameHits:
        """An empty :class:`NameHits` over this extractor's index, encoder and linking settings."""
        return NameHits(self.index, self.encoder, list(self.skb.schema.node_types), self.cfg.linking)

    def find_mentions(self, queries: Sequence[str], hits: NameHits | None = None) -> list[list[Mention]]:
        """The mentions of each query (unlinked), in position order. With ``hits`` (what the linking will read),
        the texts the mentions will be linked by are encoded and searched together with the candidate spans."""
        parsed = [self._exact(q) for q in queries]
        if self.cfg.fuzzy:
            linked = [] if hits is None else [t for q, p in zip(queries, parsed) for t in self._linked_texts(q, *p)]
            self._add_fuzzy(queries, parsed, hits if hits is not None else self.name_hits(), linked)
        return [self._to_mentions(q, tokens, matches) for q, (tokens, matches) in zip(queries, parsed)]

    def _exact(self, query: str) -> tuple[list[tuple[str, int, int]], list[_Match]]:
        tokens = tokenize(query)
        text = unicodedata.normalize("NFKC", query)
        norm = [t for t, _, _ in tokens]
        fixed = [self._speller.correct(t) for t in norm]
        typed = fixed != norm  # a word was read as another: spans holding it are looked up as corrected too
        found = []
        for i in range(len(norm)):
            for n in range(min(self.cfg.max_ngram, len(norm) - i), 0, -1):
                key = " ".join(norm[i : i + n])
                ids = self._entries.get(key)
                if ids is None and typed and _typo_match_allowed(norm[i : i + n], fixed[i : i + n]):
                    key = " ".join(fixed[i : i + n])
                    ids = self._entries.get(key)
                if ids is None:
                    continue
                if key in self._symbol_keys and not any(c.isupper() for c in text[tokens[i][1] : tokens[i][2]]):
                    continue
                found.append(_Match(i, i + n, ids))
        return tokens, self._resolve(found)

    def _resolve(self, found: list[_Match]) -> list[_Match]:
        """Longest match wins; matches wholly inside a winner are kept as nested (one level), unless they name
        only nodes the winner names (the head "marfan" inside "Marfan syndrome")."""
        found = sorted(found, key=lambda m: (-m.length, m.start))
        top: list[_Match] = []
        for m in found:
            if all(m.end <= t.start or m.start >= t.end for t in top):
                top.append(m)
        nested: list[_Match] = []
        if self.cfg.nested:
            for m in found:
                if m in top:
                    continue
                holders = [t for t in top if t.start <= m.start and m.end <= t.end]
                same = any(set(m.node_ids) <= set(t.node_ids) for t in holders)  # a head inside its own name
                if holders and not same and all(m.end <= o.start or m.start >= o.end for o in nested):
                    nested.append(m)
        return top + nested

    def _free_runs(self, tokens, matches: list[_Match]) -> list[tuple[int, int]]:
        """Maximal runs of content tokens no exact match touches, cut into pieces of at most ``max_ngram``."""
        covered = np.zeros(len(tokens), bool)
        for m in matches:
            covered[m.start : m.end] = True
        runs, start = [], None
        for i in range(len(tokens) + 1):
            free = (
                i < len(tokens)
                and not covered[i]
                and tokens[i][0] not in STOPWORDS
                and tokens[i][0] not in REQUEST_CUES
                and not tokens[i][0].isdigit()
            )
            if free and start is None:
                start = i
            if not free and start is not None:
                runs += [(s, min(s + self.cfg.max_ngram, i)) for s in range(start, i, self.cfg.max_ngram)]
                start = None
        return [(s, e) for s, e in runs if e - s >= self.cfg.fuzzy_min_tokens]

    def _descriptive_runs(self, tokens, matches: list[_Match]) -> list[tuple[int, int]]:
        """Maximal runs of tokens no exact match touches, stopwords allowed inside ("ringing in the ears"), cut at
        request cues, frame words, node-type words and numbers, stopwords trimmed at both ends; only runs with a
        stopword inside (the others are free runs already) and ``fuzzy_min_tokens`` content tokens; of a run longer
        than ``descriptive_max_tokens``, its last tokens (a description usually ends the question)."""
        covered = np.zeros(len(tokens), bool)
        for m in matches:
            covered[m.start : m.end] = True
        norm = [t for t, _, _ in tokens]
        runs, start = [], None
        for i in range(len(tokens) + 1):
            ok = (
                i < len(tokens)
                and not covered[i]
                and norm[i] not in REQUEST_CUES
                and norm[i] not in FRAME_WORDS
                and norm[i] not in self._type_words
                and not norm[i].isdigit()
            )
            if ok and start is None:
                start = i
            if not ok and start is not None:
                s, e = _trim(norm, max(start, i - self.cfg.descriptive_max_tokens), i)  # a long run: its end
                content = sum(norm[j] not in STOPWORDS for j in range(s, e))
                if content < e - s and content >= self.cfg.fuzzy_min_tokens:  # a stopword inside
                    runs.append((s, e))
                start = None
        return runs

    def _add_fuzzy(
        self,
        queries: Sequence[str],
        parsed: list[tuple[list[tuple[str, int, int]], list[_Match]]],
        hits: NameHits,
        linked: Sequence[str] = (),
    ) -> None:
        """Each free run, and the run less its first or last token (a verb such as "expressed" often clings to
        a name), is embedded; the best-scoring variant of a run is kept when it reaches ``fuzzy_min_cosine``.
        Descriptive runs (:meth:`_descriptive_runs`) likewise, kept from ``descriptive_min_cosine`` on when they
        overlap no kept free run. The spans are searched in ``hits`` together with the ``linked`` texts."""
        spans: list[tuple[int, int, int, int]] = []  # (run, query, start, end)
        runs = [
            (q, s, e, False) for q, (tokens, matches) in enumerate(parsed) for s, e in self._free_runs(tokens, matches)
        ]
        if self.cfg.descriptive:
            runs += [
                (q, s, e, True)
                for q, (tokens, matches) in enumerate(parsed)
                for s, e in self._descriptive_runs(tokens, matches)
            ]
        for r, (q, s, e, descriptive) in enumerate(runs):
            spans.append((r, q, s, e))
            if e - s > self.cfg.fuzzy_min_tokens:
                shorter = [(s + 1, e), (s, e - 1)]
                if descriptive:  # less the first or last word, stopwords trimmed again
                    norm = [t for t, _, _ in parsed[q][0]]
                    shorter = [_trim(norm, a, b) for a, b in shorter]
                spans += [(r, q, a, b) for a, b in shorter if b - a >= self.cfg.fuzzy_min_tokens]
        if not spans:
            return
        texts = [self._surface(queries[q], parsed[q][0], s, e) for _, q, s, e in spans]
        hits.add([*texts, *linked])
        scores, ids = hits.best(texts)
        best: dict[int, tuple[float, int, int, int, int]] = {}
        for (r, q, s, e), score, node in zip(spans, scores, ids):
            floor = self.cfg.descriptive_min_cosine if runs[r][3] else self.cfg.fuzzy_min_cosine
            if node >= 0 and score >= floor and score > best.get(r, (-np.inf,))[0]:
                best[r] = (float(score), q, s, e, int(node))
        kept: dict[int, list[tuple[int, int]]] = {}
        for r in sorted(best, key=lambda r: runs[r][3]):  # free runs first
            _, q, s, e, node = best[r]
            if runs[r][3] and any(s < ke and ks < e for ks, ke in kept.get(q, [])):
                continue
            kept.setdefault(q, []).append((s, e))
            parsed[q][1].append(_Match(s, e, (node,), fuzzy=True))

    def _types_of(self, node_ids: tuple[int, ...]) -> tuple[str, ...]:
        types = [self._types[i] for i in node_ids]  # node_ids are by descending degree
        counts = Counter(types)
        ranked = sorted(dict.fromkeys(types), key=lambda t: -counts[t])  # stable: ties keep degree order
        return tuple(ranked[: self.cfg.max_types])

    def _surface(self, query: str, tokens, start: int, end: int) -> str:
        text = unicodedata.normalize("NFKC", query)
        return text[tokens[start][1] : tokens[end - 1][2]]

    def _mention_text(self, key: str, node_ids: tuple[int, ...]) -> str:
        for i in node_ids:
            if normalize(self._names[i]) == key:
                return str(self._names[i])
        return str(self._names[node_ids[0]])

    def _linked_texts(self, query: str, tokens, matches: list[_Match]) -> list[str]:
        """The texts :meth:`_to_mentions` will give the exact matches and the target of a query."""
        texts = [self._mention_text(" ".join(t for t, _, _ in tokens[m.start : m.end]), m.node_ids) for m in matches]
        target = self._target_span(tokens)
        return texts if target is None else [*texts, self._surface(query, tokens, *target[:2])]

    def _target_span(self, tokens) -> tuple[int, int, str] | None:
        """The first node-type word (1–3 tokens) within ``target_window`` tokens after a request cue."""
        norm = [t for t, _, _ in tokens]
        for c in (i for i, t in enumerate(norm) if t in REQUEST_CUES):
            for i in range(c + 1, min(c + 1 + self.cfg.target_window, len(norm))):
                for n in (3, 2, 1):
                    if i + n > len(norm):  # the query ends first ("… which diseases?")
                        continue
                    node_type = self._type_words.get(" ".join(norm[i : i + n]))
                    if node_type is not None:
                        return i, i + n, node_type
        return None

    def _to_mentions(self, query: str, tokens, matches: list[_Match]) -> list[Mention]:
        rows: list[tuple[int, int, str, tuple[str, ...], Role, tuple[int, ...]]] = []  # span, text, types, role, exact
        target = self._target_span(tokens)
        for m in matches:
            types, role = self._types_of(m.node_ids), cast(Role, "anchor")
            if target is not None and (m.start, m.end) == target[:2]:
                types, role = tuple(dict.fromkeys((target[2], *types)))[: self.cfg.max_types], "target"
                target = None
            key = " ".join(tok for tok, _, _ in tokens[m.start : m.end])
            text = self._surface(query, tokens, m.start, m.end) if m.fuzzy else self._mention_text(key, m.node_ids)
            rows.append((m.start, m.end, text, types, role, () if m.fuzzy else m.node_ids))
        if target is not None:
            s, e, node_type = target
            rows.append((s, e, self._surface(query, tokens, s, e), (node_type,), "target", ()))
        text = unicodedata.normalize("NFKC", query)
        starts, ends = [s for _, s, _ in tokens], [e for _, _, e in tokens]
        for a in ATTRIBUTE_PATTERN.finditer(text):
            s = int(np.searchsorted(starts, a.start()))
            e = int(np.searchsorted(ends, a.end())) + 1  # tokens s..e-1 hold the attribute
            if s < len(tokens) and not any(r[0] < e and s < r[1] for r in rows):
                rows.append((s, e, a.group(), (), "attribute", ()))
        rows.sort(key=lambda r: (r[0], -r[1]))  # a parent before its nested mentions
        parents = _parents([(r[0], r[1]) for r in rows])
        return [
            Mention(text, types, role, parent, exact) for (_, _, text, types, role, exact), parent in zip(rows, parents)
        ]


class Speller:
    """Query words one edit away from the words of the dictionary's strings (``docs/natural-questions.md``): the
    index of every word's one-letter deletions is built on the first word that needs it."""

    def __init__(self, strings: Iterable[str], min_chars: int):
        self.counts = Counter(w for s in strings for w in set(s.split()))
        self.min_chars = min_chars
        self._index: dict[str, list[str]] | None = None

    def correct(self, word: str) -> str:
        """``word``, or the word of most strings one edit away from it (ties: the alphabetically first) when no
        string holds ``word``, it has ``min_chars`` letters or more and is not a stopword."""
        if not self.min_chars or len(word) < self.min_chars or word in self.counts or word in STOPWORDS:
            return word
        if not word.isalpha():
            return word
        index = self._deletions()
        near = {w for d in (word, *_deletions(word)) for w in index.get(d, ()) if _one_edit(word, w)}
        return min(near, key=lambda w: (-self.counts[w], w)) if near else word

    def _deletions(self) -> dict[str, list[str]]:
        if self._index is None:
            index: dict[str, list[str]] = defaultdict(list)
            for w in self.counts:
                if len(w) >= self.min_chars - 1 and w.isalpha():
                    for d in {w, *_deletions(w)}:
                        index[d].append(w)
            self._index = index
        return self._index


def _deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


def _one_edit(a: str, b: str) -> bool:
    """``a`` and ``b`` differ by one letter dropped, added or changed, or two neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    if len(a) == len(b):
        return a[i + 1 :] == b[i + 1 :] or (a[i + 2 :] == b[i + 2 :] and a[i : i + 2] == b[i : i + 2][::-1])
    return a[i + 1 :] == b[i:] if len(a) > len(b) else a[i:] == b[i + 1 :]


def _frame(wording: str) -> tuple[list[str], list[str]]:
    """A look-up wording's tokens before and after its ``{}``."""
    if wording.count("{}") != 1:
        raise ValueError(f"GazetteerConfig.lookup_frames: {wording!r} must hold '{{}}' (the name) exactly once")
    before, after = wording.split("{}")
    return tokens(before), tokens(after)


def _unframed(words: list[str], frames: Sequence[tuple[list[str], list[str]]]) -> Iterator[list[str]]:
    """The words themselves, then what they ask for inside each look-up wording that frames them (a leading article
    dropped), lazily: a bare name is found before any wording is tried."""
    yield words
    for before, after in frames:
        end = len(words) - len(after)
        if end > len(before) and words[: len(before)] == before and words[end:] == after:
            inner = words[len(before) : end]
            yield inner[1:] if len(inner) > 1 and inner[0] in ("a", "an", "the") else inner


def _typo_match_allowed(said: Sequence[str], fixed: Sequence[str]) -> bool:
    """A span read with corrected words matches when a word was corrected and it has two words or more, or is one
    word of seven letters or more."""
    if list(said) == list(fixed):
        return False
    return len(said) >= 2 or len(said[0]) >= 7


def _trim(norm: list[str], start: int, end: int) -> tuple[int, int]:
    """The span without its leading and trailing stopwords."""
    while start < end and norm[start] in STOPWORDS:
        start += 1
    while end > start and norm[end - 1] in STOPWORDS:
        end -= 1
    return start, end


def _parents(spans: list[tuple[int, int]]) -> list[int | None]:
    """For spans sorted by (start, -end): the index of the first longer span containing each one, or None."""
    out: list[int | None] = []
    for i, (s, e) in enumerate(spans):
        out.append(next((j for j in range(i) if spans[j][0] <= s and e <= spans[j][1] and spans[j] != (s, e)), None))
    return out
