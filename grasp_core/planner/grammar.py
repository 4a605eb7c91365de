"""Grammar-constrained plan decoding: only plans that parse and validate against the schema can be sampled.

The grammar is the canonical plan JSON of :func:`grasp_core.planner.prompt.canonical_plan_json` as a
character-level automaton built from the schema and the query's entity table:

* ``target.type`` and every ``type``/``to_type`` is a node type of the schema, every ``rel`` a relation;
* anchors are refs to the entity table's non-attribute rows (each row at most once, ``type`` one of that
  row's types, ``match_mode`` name or doc) or, when ``text_anchors`` is on, free-text ``doc``-mode anchors;
* hops are listed path by path: each anchor's path starts at the anchor, uses fresh intermediate variables
  ``x1, x2, …`` and ends at ``target`` within ``max_hops`` hops, and every hop's (type, rel, type) is a
  schema triple (either direction). A relation or intermediate type is offered only when the target can
  still be reached in the hops left, so decoding never walks into a dead end;
* no anchors means no hops (dense search of the target type); ``relevance_text`` and text anchors are free
  text without double quotes, backslashes or control characters, of bounded length.

Paths that share an intermediate variable before ``target`` (a merge before the answer) are outside the
grammar; the same constraint is expressed by two paths meeting at ``target``.

Token level (:class:`PlanLogitsProcessor`): every token's decoded string is precomputed; a token is allowed
when its whole string is a valid continuation. Masks are computed once per automaton state and cached (walking a
character trie of the vocabulary, which visits only the valid prefixes); inside free text the mask is a
vectorized test over the vocabulary plus a cached list of the tokens that close the text. Contexts after
the anchors do not depend on the entity table, so their caches are shared by all grammars of a schema. A token is also refused when the shortest completion after it would not
fit in the tokens left (every character is one byte-level token), so the plan is always finished within
``max_new_tokens``.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch
from transformers import LogitsProcessor

from grasp_core.entities.table import EntityTable
from grasp_core.errors import GraspError
from grasp_core.skb.schema import Schema

TARGET = "target"


@dataclass(frozen=True)
class PlanGrammarConfig:
    max_anchors: int = field(default=3, metadata={"help": "Most anchors in one plan."})
    max_hops: int = field(default=3, metadata={"help": "Most hops on one anchor's path to the target."})
    text_anchors: bool = field(
        default=True, metadata={"help": "Allow free-text doc-mode anchors besides refs to entity-table rows."}
    )
    max_text_chars: int = field(default=100, metadata={"help": "Longest free-text anchor, in characters."})
    max_relevance_chars: int = field(default=200, metadata={"help": "Longest relevance_text, in characters."})


class _Free(NamedTuple):
    """Free text of ``lo..hi`` characters closed by a double quote, then context ``next``."""

    lo: int
    hi: int
    next: tuple


def is_free_char(ch: str) -> bool:
    return ch not in '"\\\x7f\ufffd' and ord(ch) >= 32


_START, _FINAL = ("start",), ("final",)
_TABLE_FREE = {"to", "chain_end", "relevance", "close", "final"}


@dataclass
class _Caches:
    specs: dict = field(default_factory=dict)  # context -> prefix table or _Free
    minc: dict = field(default_factory=dict)  # context -> fewest characters to the end
    minp: dict = field(default_factory=dict)  # context -> {prefix: fewest characters to the end}
    finish: dict = field(default_factory=dict)  # (type, target, hops) -> reachable
    masks: dict = field(default_factory=dict)  # vocab -> {state: (token ids, fewest characters after each)}


_SHARED: dict[tuple, tuple[Schema, _Caches]] = {}


def _shared_caches(schema: Schema, cfg: PlanGrammarConfig) -> _Caches:
    key = (id(schema), cfg)
    if key not in _SHARED or _SHARED[key][0] is not schema:
        _SHARED[key] = (schema, _Caches())
    return _SHARED[key][1]


class PlanGrammar:
    """The plan automaton for one schema and one entity table.

    A state is ``(context, progress)``: in a literal context, ``progress`` is the part of an alternative
    consumed so far; in a free-text context, the number of characters written. Contexts are hashable
    tuples holding the decisions that constrain what follows.
    """

    def __init__(self, schema: Schema, table: EntityTable | None = None, cfg: PlanGrammarConfig = PlanGrammarConfig()):
        if cfg.max_anchors > 9 or cfg.max_anchors * (cfg.max_hops - 1) > 9:
            raise GraspError(f"plan grammar: at most 9 anchors and 9 intermediate variables (got {cfg})")
        self.schema, self.cfg = schema, cfg
        self._types = list(schema.node_types)
        self._nb = {(r, t): schema.neighbour_types(r, t) for r in schema.relation_names for t in self._types}
        self._rows = [r for r in (table.rows if table else ()) if r.role != "attribute"]
        self._own = _Caches()
        self._shared = _shared_caches(schema, cfg)
        self.start = (_START, "")

    @classmethod
    def logits_processor(
        cls, constraints, tokenizer: Any, eos_ids: list[int], prompt_len: int, max_new_tokens: int, n: int
    ) -> PlanLogitsProcessor:
        """The decoding constraint of a batch of prompts (:class:`grasp_core.llm.backends.Constraint`)."""
        return PlanLogitsProcessor(list(constraints), token_vocab(tokenizer, eos_ids), prompt_len, max_new_tokens, n)

    def _caches(self, ctx: tuple) -> _Caches:
        """Contexts after the anchors do not depend on the entity table: their caches are shared by every
        grammar of the same schema and config (so per-query grammars stay cheap)."""
        return self._shared if ctx[0] in _TABLE_FREE else self._own

    # ---------------------------------------------------------------- schema reachability
    def can_finish(self, node_type: str, target: str, hops: int) -> bool:
        """True when ``target`` is reachable from ``node_type`` in 1..``hops`` hops."""
        key, cache = (node_type, target, hops), self._shared.finish
        if key not in cache:
            cache[key] = hops > 0 and any(
                t2 == target or self.can_finish(t2, target, hops - 1)
                for r in self.schema.relation_names
                for t2 in self._nb[(r, node_type)]
            )
        return cache[key]

    # ---------------------------------------------------------------- the grammar
    def _anchor_alts(self, target: str, anchors: tuple, used: tuple) -> list[tuple[str, tuple]]:
        k = len(anchors) + 1
        if k > self.cfg.max_anchors:
            return []
        head, alts = f'{{"var":"a{k}",', []
        for row in self._rows:
            if row.ref in used:
                continue
            for t in dict.fromkeys(row.types):
                if t in self.schema.node_types and self.can_finish(t, target, self.cfg.max_hops):
                    s = f'{head}"ref":"{row.ref}","type":"{t}","match_mode":"'
                    alts.append((s, ("mode", target, anchors + (t,), used + (row.ref,))))
        if self.cfg.text_anchors:
            for t in self._types:
                if self.can_finish(t, target, self.cfg.max_hops):
                    alts.append((f'{head}"type":"{t}","text":"', ("text", target, anchors + (t,), used)))
        return alts

    def _hop_alts(self, target: str, rest: tuple, k: int, cur: str, h: int, nx: int) -> list[tuple[str, tuple]]:
        """Relations out of a ``cur``-typed variable on hop ``h`` of a path; ``rest`` are the types of the anchors
        whose paths come later (the next one is ``a{k}``), ``nx`` the intermediate variables used so far."""
        left = self.cfg.max_hops - h
        alts = []
        for r in self.schema.relation_names:
            nbs = self._nb[(r, cur)]
            if any(t2 == target or (left > 1 and self.can_finish(t2, target, left - 1)) for t2 in nbs):
                alts.append((f'{r}","to":"', ("to", target, rest, k, cur, r, h, nx)))
        return alts

    def _alts(self, ctx: tuple) -> Any:
        """A context's alternatives ``[(string, next context)]`` (prefix-free), or a :class:`_Free`."""
        kind = ctx[0]
        if kind == "start":
            return [(f'{{"target":{{"type":"{t}"}},"anchors":[', ("anchors", t)) for t in self._types]
        if kind == "anchors":  # after '['
            return [('],"hops":[],"relevance_text":"', ("relevance",)), *self._anchor_alts(ctx[1], (), ())]
        if kind == "mode":
            return [(f'{m}"}}', ("next_anchor", *ctx[1:])) for m in ("name", "doc")]
        if kind == "text":
            return _Free(1, self.cfg.max_text_chars, ("text_end", *ctx[1:]))
        if kind == "text_end":
            return [(',"match_mode":"doc"}', ("next_anchor", *ctx[1:]))]
        if kind == "next_anchor":
            _, target, anchors, used = ctx
            head = '],"hops":[{"from":"a1","rel":"'
            return [("," + s, c) for s, c in self._anchor_alts(target, anchors, used)] + [
                (head + s, c) for s, c in self._hop_alts(target, anchors[1:], 2, anchors[0], 0, 0)
            ]
        if kind == "to":
            _, target, rest, k, cur, r, h, nx = ctx
            nbs, left = self._nb[(r, cur)], self.cfg.max_hops - h
            alts = [('target"}', ("chain_end", target, rest, k, nx))] if target in nbs else []
            for t2 in nbs:
                if left > 1 and self.can_finish(t2, target, left - 1):
                    x = f"x{nx + 1}"
                    head = f'{x}","to_type":"{t2}"}},{{"from":"{x}","rel":"'
                    alts += [(head + s, c) for s, c in self._hop_alts(target, rest, k, t2, h + 1, nx + 1)]
            return alts
        if kind == "chain_end":
            _, target, rest, k, nx = ctx
            if not rest:
                return [('],"relevance_text":"', ("relevance",))]
            head = f',{{"from":"a{k}","rel":"'
            return [(head + s, c) for s, c in self._hop_alts(target, rest[1:], k + 1, rest[0], 0, nx)]
        if kind == "relevance":
            return _Free(0, self.cfg.max_relevance_chars, ("close",))
        if kind == "close":
            return [("}", _FINAL)]
        return []  # final

    def _spec(self, ctx: tuple) -> Any:
        """:meth:`_alts` as a table ``{every prefix: None, every alternative: next context}``, or a :class:`_Free`."""
        specs = self._caches(ctx).specs
        if ctx in specs:
            return specs[ctx]
        alts = self._alts(ctx)
        if isinstance(alts, _Free):
            specs[ctx] = alts
            return alts
        table: dict[str, tuple | None] = {"": None}
        for s, nxt in alts:
            for j in range(1, len(s)):
                if table.get(s[:j]) is not None:
                    raise AssertionError(f"grammar alternatives are not prefix-free at {s[:j]!r}")
                table[s[:j]] = None
            if s in table:
                raise AssertionError(f"grammar alternatives are not prefix-free at {s!r}")
            table[s] = nxt
        specs[ctx] = table
        return table

    # ---------------------------------------------------------------- the automaton
    def enter(self, ctx: tuple) -> tuple:
        return (ctx, 0) if isinstance(self._spec(ctx), _Free) else (ctx, "")

    def step(self, state: tuple, ch: str) -> tuple | None:
        """The state after one more character, or None when ``ch`` cannot follow."""
        ctx, prog = state
        spec = self._spec(ctx)
        if isinstance(spec, _Free):
            if ch == '"':
                return self.enter(spec.next) if prog >= spec.lo else None
            return (ctx, prog + 1) if prog < spec.hi and is_free_char(ch) else None
        nb = prog + ch
        if nb not in spec:
            return None
        nxt = spec[nb]
        return (ctx, nb) if nxt is None else self.enter(nxt)

    def advance(self, state: tuple | None, text: str) -> tuple | None:
        for ch in text:
            if state is None:
                return None
            state = self.step(state, ch)
        return state

    def is_final(self, state: tuple | None) -> bool:
        return state is not None and state[0] == _FINAL

    def accepts(self, text: str) -> bool:
        """True when ``text`` is a complete plan of this grammar."""
        return self.is_final(self.advance(self.start, text))

    def _min_ctx(self, ctx: tuple) -> int:
        """Fewest characters from the start of ``ctx`` to the end of the plan.

        Inside the hops the grammar's contexts multiply (remaining anchors × current type × relation × depth),
        so there the minimum is decomposed: finish the current path, then each remaining anchor's shortest
        path, then an empty relevance text. This is exact because variable names never change length
        (at most 9 anchors and 9 intermediate variables, checked in the constructor).
        """
        kind = ctx[0]
        if kind == "to":
            _, target, rest, _k, cur, r, h, _nx = ctx
            return self._path_min(target, cur, r, h) + self._rest_min(target, rest)
        if kind == "chain_end":
            return self._rest_min(ctx[1], ctx[2])
        if kind == "next_anchor":  # closing the anchor list now is always shorter than adding an anchor
            _, target, anchors, _used = ctx
            return len('],"hops":[') - len(",") + self._rest_min(target, anchors)  # _rest_min counts a leading ","
        minc = self._caches(ctx).minc
        if ctx not in minc:
            alts = self._alts(ctx)
            if isinstance(alts, _Free):
                minc[ctx] = alts.lo + 1 + self._min_ctx(alts.next)
            else:
                minc[ctx] = min((len(s) + self._min_ctx(n) for s, n in alts), default=0)
        return minc[ctx]

    def _path_min(self, target: str, cur: str, r: str, h: int) -> int:
        """Fewest characters from after ``"to":"`` of hop ``h`` (relation ``r`` out of a ``cur``) to the path's end."""
        key, cache = ("path", target, cur, r, h), self._shared.minc
        if key not in cache:
            nbs, left = self._nb[(r, cur)], self.cfg.max_hops - h
            best = [len('target"}')] if target in nbs else []
            for t2 in nbs:
                if left > 1 and self.can_finish(t2, target, left - 1):
                    head = len(f'x1","to_type":"{t2}"}},{{"from":"x1","rel":"')
                    best += [
                        head + len(s) + self._path_min(target, t2, c[5], h + 1)
                        for s, c in self._hop_alts(target, (), 1, t2, h + 1, 0)
                    ]
            cache[key] = min(best)
        return cache[key]

    def _rest_min(self, target: str, rest: tuple) -> int:
        """Fewest characters from the end of a path to the end of the plan, ``rest`` being the anchors still to go."""
        key, cache = ("rest", target, rest), self._shared.minc
        if key not in cache:
            if not rest:
                cache[key] = len('],"relevance_text":"') + self._min_ctx(("relevance",))
            else:
                head = len(',{"from":"a1","rel":"')
                first = min(
                    len(s) + self._path_min(target, rest[0], c[5], 0)
                    for s, c in self._hop_alts(target, (), 1, rest[0], 0, 0)
                )
                cache[key] = head + first + self._rest_min(target, rest[1:])
        return cache[key]

    def min_chars(self, state: tuple) -> int:
        """Fewest characters that complete a plan from ``state``."""
        ctx, prog = state
        spec = self._spec(ctx)
        if isinstance(spec, _Free):
            return max(0, spec.lo - prog) + 1 + self._min_ctx(spec.next)
        if not prog:
            return self._min_ctx(ctx)
        minp = self._caches(ctx).minp
        if ctx not in minp:  # every prefix of an alternative -> fewest characters to the end of the plan
            best: dict[str, int] = {}
            for s, nxt in spec.items():
                if nxt is not None:
                    tail = self._min_ctx(nxt)
                    for j in range(1, len(s) + 1):
                        best[s[:j]] = min(best.get(s[:j], 1 << 30), len(s) - j + tail)
            minp[ctx] = best
        return minp[ctx][prog]

    # ---------------------------------------------------------------- token masks
    def allowed(self, state: tuple, vocab: TokenVocab) -> tuple[np.ndarray, np.ndarray]:
        """Token ids that may follow ``state`` and, for each, the fewest characters that complete the plan after it."""
        masks = self._caches(state[0]).masks.setdefault(vocab, {})
        if state in masks:
            return masks[state]
        if self.is_final(state):
            ids, minc = list(vocab.eos_ids), [0] * len(vocab.eos_ids)
        elif isinstance(self._spec(state[0]), _Free):  # vectorized and cheap: not cached (one state per length)
            return self._allowed_free(state, vocab)
        else:
            ids, minc = [], []
            stack = [(vocab.trie, state)]
            while stack:
                node, st = stack.pop()
                for ch, child in node[0].items():
                    st2 = self.step(st, ch)
                    if st2 is None:
                        continue
                    if child[1]:
                        m = self.min_chars(st2)
                        ids += child[1]
                        minc += [m] * len(child[1])
                    if child[0]:
                        stack.append((child, st2))
        out = (np.asarray(ids, dtype=np.int64), np.asarray(minc, dtype=np.int64))
        masks[state] = out
        return out

    def _allowed_free(self, state: tuple, vocab: TokenVocab) -> tuple[np.ndarray, np.ndarray]:
        ctx, n = state
        spec = self._spec(ctx)
        fits = (vocab.free_len >= 1) & (vocab.free_len <= spec.hi - n)
        ids = np.nonzero(fits)[0]
        minc = np.maximum(0, spec.lo - n - vocab.free_len[ids]) + 1 + self._min_ctx(spec.next)
        q_ids, q_p, q_minc = self._closing_tokens(ctx, vocab)
        keep = (n + q_p >= spec.lo) & (n + q_p <= spec.hi)
        return np.concatenate([ids, q_ids[keep]]), np.concatenate([minc, q_minc[keep]])

    def _closing_tokens(self, ctx: tuple, vocab: TokenVocab) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tokens that close the free text of ``ctx`` and continue validly: (ids, free prefix length, min chars after).
        They depend on the context only, not on how much text was written, so they are computed once."""
        cache = self._caches(ctx).masks.setdefault(vocab, {})
        key = ("closing", ctx)
        if key not in cache:
            after = self.enter(self._spec(ctx).next)
            rows = [
                (tok, p, self.min_chars(st))
                for tok, p, rest in vocab.quoted
                if (st := self.advance(after, rest)) is not None
            ]
            cache[key] = tuple(np.asarray(col, dtype=np.int64) for col in (zip(*rows) if rows else ([], [], [])))
        return cache[key]


# -------------------------------------------------------------------- the vocabulary
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the printable character standing for each byte -> the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in printable]
    chars = {b: chr(b) for b in printable} | {b: chr(256 + i) for i, b in enumerate(shifted)}
    return {c: b for b, c in chars.items()}


def token_strings(tokenizer: Any) -> list[str | None]:
    """The text each token id stands for; None for special tokens and for partial UTF-8 sequences.

    Byte-level BPE pieces are mapped back to bytes (``decode([id])`` would strip or merge spaces); added
    tokens keep their content; other tokenizers fall back to ``decode``.
    """
    decoder = _byte_decoder()
    special = set(tokenizer.all_special_ids)
    added = {i: t.content for i, t in tokenizer.added_tokens_decoder.items()}
    out: list[str | None] = []
    for i, piece in enumerate(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))):
        if i in special or piece is None:
            out.append(None)
        elif i in added:
            out.append(added[i])
        elif all(c in decoder for c in piece):
            try:
                out.append(bytes(decoder[c] for c in piece).decode("utf-8"))
            except UnicodeDecodeError:
                out.append(None)
        else:
            out.append(tokenizer.decode([i]))
    return [s if s else None for s in out]


class TokenVocab:
    """A tokenizer's token strings as a character trie plus the arrays the free-text masks need."""

    def __init__(self, tokenizer: Any, eos_ids: list[int] | None = None):
        self.strings = token_strings(tokenizer)
        self.size = len(self.strings)
        self.eos_ids = tuple(dict.fromkeys([*(eos_ids or []), tokenizer.eos_token_id]))
        self.trie: list = [{}, []]  # node = [children by character, ids of tokens ending here]
        free_len = np.full(self.size, -1, dtype=np.int64)
        self.quoted: list[tuple[int, int, str]] = []  # (id, free prefix length, rest after the quote)
        for i, s in enumerate(self.strings):
            if s is None:
                continue
            node = self.trie
            for ch in s:
                node = node[0].setdefault(ch, [{}, []])
            node[1].append(i)
            p = 0
            while p < len(s) and is_free_char(s[p]):
                p += 1
            if p == len(s):
                free_len[i] = p
            elif s[p] == '"':
                self.quoted.append((i, p, s[p + 1 :]))
        self.free_len = free_len


_VOCABS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def token_vocab(tokenizer: Any, eos_ids: list[int] | None = None) -> TokenVocab:
    """The :class:`TokenVocab` of a tokenizer, built once while the tokenizer lives."""
    key = tuple(eos_ids or ())
    cached = _VOCABS.get(tokenizer)
    if cached is None or cached[0] != key:
        cached = _VOCABS[tokenizer] = (key, TokenVocab(tokenizer, list(key)))
    return cached[1]


# -------------------------------------------------------------------- the logits processor
class PlanLogitsProcessor(LogitsProcessor):
    """Masks every token that would leave the plan grammar (one grammar per prompt).

    Rows are ``prompt × n`` as transformers lays out ``num_return_sequences``; ``prompt_len`` is the padded
    prompt length of the batch and ``max_new_tokens`` the generation budget the plan must fit in.
    """

    def __init__(
        self, grammars: list[PlanGrammar], vocab: TokenVocab, prompt_len: int, max_new_tokens: int, n: int = 1
    ):
        self.grammars, self.vocab, self.n = grammars, vocab, n
        self.prompt_len, self.max_new_tokens = prompt_len, max_new_tokens
        self.states: list[tuple | None] | None = None
        self.failures = 0  # steps where a row had no allowed token (never expected; EOS is forced then)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        rows = input_ids.shape[0]
        if self.states is None:
            self.states = [self.grammars[r // self.n].start for r in range(rows)]
        else:
            last = input_ids[:, -1].tolist()
            for r in range(rows):
                g, st = self.grammars[r // self.n], self.states[r]
                if st is not None:
                    self.states[r] = None if g.is_final(st) else g.advance(st, self.vocab.strings[last[r]] or "\0")
        left = self.max_new_tokens - (input_ids.shape[1] - self.prompt_len) - 1  # tokens after this one
        mask = torch.full_like(scores, float("-inf"))
        for r in range(rows):
            st = self.states[r]
            ids = np.asarray(self.vocab.eos_ids)
            if st is not None:
                cand, minc = self.grammars[r // self.n].allowed(st, self.vocab)
                fit = cand[minc <= left]
                if len(fit):
                    ids = fit
                elif len(cand):
                    ids = cand
                else:
                    self.failures += 1
            mask[r, torch.from_numpy(ids)] = 0.0
        return scores + mask
