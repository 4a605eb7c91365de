"""The plan grammar, generated as Lark text from the plan model, the schema and the query's entity table.

Every sentence of the grammar is the canonical JSON of a plan that :func:`grasp_core.plan.validate.validate_plan`
accepts (:func:`grasp_core.planner.lm.prompt.canonical_plan_json` writes the same form):

* key names and their order come from the pydantic models of :mod:`grasp_core.plan.model` (fields and
  aliases), the match modes from its ``MatchMode`` literal, the answer variable from ``TARGET``; the
  policy's ``ABSTAIN`` is not in the grammar (the LM planner is never trained to abstain);
* ``target.type`` and every ``type``/``to_type`` is a node type of the schema, every ``rel`` a relation;
* anchors ``a1, a2, …`` are refs to the entity table's non-attribute rows (each row at most once, ``type``
  one of the row's types, ``match_mode`` any) or, when ``text_anchors`` is on, free-text ``doc``-mode anchors;
* each anchor has one path of hops to ``target`` of at most ``max_hops`` hops whose every (type, rel, type) is
  a schema triple (either direction), through fresh intermediate variables, each with its ``to_type``: the
  one ``d`` hops down anchor ``aj``'s path is ``xj_d``, so a path's names do not depend on how long the other
  paths are; a hop between two nodes of one type may carry ``"dir"`` (``out`` or ``in``). The paths are listed from the last anchor's to the first's: anchors and paths then nest
  (``a1 a2 ] [ p2 p1``), so one rule carries an anchor's type to its path instead of every tuple of anchor
  types being carried across the anchor list;
* the plan may end with ``"match":"most"`` (partial matching; the paths meet at ``target`` only anyway);
* no anchors means no hops (dense search of the target type); ``relevance_text`` and text anchors are free
  text without double quotes, backslashes or control characters, of bounded length (a text anchor starts
  with a non-space character).

The path rules are parameterized by (anchor, depth, current type, target type, hops left); the anchor rules by
(anchor index, target type, refs already used). Only rules that can complete a plan are written, so decoding
never walks into a dead end. A query's grammar is small enough to generate and compile per query; its size and
compile time per schema are in ``benchmarks/results/constrained_decoding.json`` (``grammar_size``).

Decoding: :class:`PlanLogitsProcessor` applies the grammar to transformers generation with llguidance (the
library vLLM uses for guided decoding: a vLLM server takes :attr:`PlanGrammar.lark` as-is). A plan still
unfinished when ``max_new_tokens`` runs out is cut there and fails to parse: it counts as an invalid plan
(``json``); :attr:`PlanGrammar.max_bytes` bounds the longest plan, and since every token is at least one byte,
a budget of ``max_bytes + 1`` tokens can never cut one.
"""

from __future__ import annotations

import json
import weakref
from functools import cache
from typing import Any, get_args

import torch
from llguidance import LLMatcher, LLTokenizer
from llguidance.hf import from_tokenizer
from pydantic import BaseModel
from transformers import LogitsProcessor

from grasp_core.entities.table import EntityTable
from grasp_core.errors import GraspError
from grasp_core.plan.model import TARGET, Anchor, Hop, MatchMode, Plan, Target
from grasp_core.planner.config import PlanGrammarConfig
from grasp_core.planner.lm.prompt import anchor_var, path_var
from grasp_core.skb.schema import Schema

# Free text: no double quote, backslash or control character (``grammar_safe_text`` writes it so).
_FREE = r'[^"\\\x00-\x1f\x7f]'
_FREE_START = r'[^"\\\x00-\x1f\x7f\s]'


def _key(model: type[BaseModel], name: str) -> str:
    """A field's JSON key (its alias when it has one)."""
    return model.model_fields[name].alias or name


def _object(model: type[BaseModel], values: dict[str, list[str]]) -> list[str]:
    """The grammar items of a JSON object of ``model``: the given fields, in the model's field order."""
    out, first = ["{"], True
    for name in model.model_fields:
        if name in values:
            out += [("" if first else ",") + json.dumps(_key(model, name)) + ":", *values[name]]
            first = False
    return [*out, "}"]


def _str(value: str) -> list[str]:
    return [json.dumps(value, ensure_ascii=False)]


# A rule is a list of alternatives; an alternative a list of items: a literal (``"…"`` text, quoted) or a
# rule/terminal name. Literals are kept as the JSON text they match, and quoted for Lark when written.
_Alt = list[str]


class _Rule(str):
    """A rule or terminal name, told apart from literal text."""


class _SchemaRules:
    """The rules that depend on the schema and the config only (paths, the relations between two types, type
    names), with their Lark lines: built once and shared by the grammars of every query."""

    def __init__(self, schema: Schema, cfg: PlanGrammarConfig):
        self.schema, self.cfg = schema, cfg
        self.type_ix = {t: i for i, t in enumerate(schema.node_types)}
        self._nb = {(r, t): schema.neighbour_types(r, t) for r in schema.relation_names for t in schema.node_types}
        # the types one hop from each type, over any relation
        self._next = {
            t: sorted({t2 for r in schema.relation_names for t2 in self._nb[(r, t)]}) for t in schema.node_types
        }
        self._reach = _reachability(self._next, cfg.max_hops)
        self.rules: dict[str, list[_Alt]] = {}
        self._lines: dict[str, str] = {}

    def _add(self, name: str, alts: list[_Alt]) -> str | None:
        if not alts:
            return None
        self.rules[name] = alts
        return name

    def type_name(self, value: str) -> list[str]:
        """A rule matching one quoted node type (fewer, shorter lexemes than spelling it in every hop)."""
        name = f"type_{self.type_ix[value]}"
        self.rules.setdefault(name, [_str(value)])
        return [_Rule(name)]

    def can_reach(self, t: str, target: str) -> bool:
        return any(self._reach(t, target, h) for h in range(1, self.cfg.max_hops + 1))

    def paths(self, j: int, t: str, target: str) -> str | None:
        """Anchor ``a{j}``'s path of 1..``max_hops`` hops to ``target``."""
        name = f"paths_{j}_{self.type_ix[t]}_{self.type_ix[target]}"
        if name not in self.rules:
            lengths = range(1, self.cfg.max_hops + 1)
            self._add(name, [[_Rule(p)] for h in lengths if (p := self._path(j, 0, t, target, h)) is not None])
        return name if name in self.rules else None

    def _path(self, j: int, depth: int, t: str, target: str, length: int) -> str | None:
        """Exactly ``length`` hops to ``target`` from the variable at ``depth`` on anchor ``a{j}``'s path (the
        anchor itself at depth 0), of type ``t``."""
        if not self._reach(t, target, length):
            return None
        name = f"path_{j}_{depth}_{self.type_ix[t]}_{self.type_ix[target]}_{length}"
        if name in self.rules:
            return name
        var = _str(anchor_var(j) if depth == 0 else path_var(j, depth))
        alts: list[_Alt] = []
        for t2 in self._next[t]:
            # a hop within one type may also carry a direction
            directions: list[dict[str, list[str]]] = [{}]
            directions += [{"dir": _str(d)} for d in ("out", "in")] if t2 == t else []
            for direction in directions:
                hop = {"from_": var, "rel": self._rels(t, t2), **direction}
                if length == 1 and t2 == target:
                    alts.append(_object(Hop, {**hop, "to": _str(TARGET)}))
                elif length > 1 and (rest := self._path(j, depth + 1, t2, target, length - 1)) is not None:
                    to = {"to": _str(path_var(j, depth + 1)), "to_type": self.type_name(t2)}
                    alts.append([*_object(Hop, {**hop, **to}), ",", _Rule(rest)])
        return self._add(name, alts)

    def _rels(self, t: str, t2: str) -> list[str]:
        """A shared rule matching any quoted relation that connects types ``t`` and ``t2`` (either direction)."""
        name = f"rels_{self.type_ix[t]}_{self.type_ix[t2]}"
        rels = [r for r in self.schema.relation_names if t2 in self._nb[(r, t)]]
        self.rules.setdefault(name, [_str(r) for r in rels])
        return [_Rule(name)]

    def closure(self, rules: dict[str, list[_Alt]]) -> list[str]:
        """The shared rules that ``rules`` reach."""
        todo = [i for alts in rules.values() for alt in alts for i in alt if isinstance(i, _Rule) and i in self.rules]
        seen: dict[str, None] = {}
        while todo:
            name = todo.pop()
            if name not in seen:
                seen[name] = None
                todo += [i for alt in self.rules[name] for i in alt if isinstance(i, _Rule) and i in self.rules]
        return list(seen)

    def line(self, name: str) -> str:
        if name not in self._lines:
            self._lines[name] = _lark_rule(name, self.rules[name])
        return self._lines[name]


_SHARED: dict[tuple[str, PlanGrammarConfig], _SchemaRules] = {}


def _schema_rules(schema: Schema, cfg: PlanGrammarConfig) -> _SchemaRules:
    """The shared rules of a schema and config, kept for the last few (schema, config) pairs."""
    key = (json.dumps(schema.to_json(), sort_keys=True), cfg)
    if key not in _SHARED:
        while len(_SHARED) >= 4:
            del _SHARED[next(iter(_SHARED))]
        _SHARED[key] = _SchemaRules(schema, cfg)
    return _SHARED[key]


def _lark_rule(name: str, alts: list[_Alt]) -> str:
    return f"{name}: " + " | ".join(" ".join(_lark_item(i) for i in _merged(alt)) for alt in alts) + "\n"


class PlanGrammar:
    """The plan grammar of one schema and one entity table (see the module docstring).

    ``lark`` is the grammar text; ``rules`` the same grammar as ``{name: [[item, …], …]}`` (items are
    literal strings or :class:`_Rule` names), for tests and size checks.
    """

    def __init__(self, schema: Schema, table: EntityTable | None = None, cfg: PlanGrammarConfig = PlanGrammarConfig()):
        if list(Plan.model_fields) != ["target", "anchors", "hops", "relevance_text", "match"]:
            raise GraspError("plan grammar: Plan's fields changed; the grammar nests anchors right before hops")
        self.schema, self.cfg = schema, cfg
        self._shared = _schema_rules(schema, cfg)
        self._type_ix = self._shared.type_ix
        self._rows = [r for r in (table.rows if table else ()) if r.role != "attribute"]
        self._refs = [r.ref for r in self._rows]
        self.rules: dict[str, list[_Alt]] = {}
        self.terminals: dict[str, str] = {}
        self._hops_open = f"],{json.dumps(_key(Plan, 'hops'))}:["
        targets = [self._plan(t) for t in schema.node_types]
        self.rules["start"] = [[_Rule(n)] for n in targets]
        shared = self._shared.closure(self.rules)
        self.lark = self._write() + "".join(self._shared.line(n) for n in shared)
        self.rules |= {n: self._shared.rules[n] for n in shared}
        self.max_bytes = self._longest("start")

    # ------------------------------------------------------------------ generation
    def _add(self, name: str, alts: list[_Alt]) -> str | None:
        """Register rule ``name`` (None when it has no alternative: nothing may refer to it)."""
        if not alts:
            return None
        self.rules[name] = alts
        return name

    def _terminal(self, name: str, hi: int, first: str) -> _Rule:
        """Free text of 1..``hi`` characters whose first character matches ``first``."""
        self.terminals[name] = f"/{first}{_FREE}{{0,{hi - 1}}}/"
        return _Rule(name)

    def _plan(self, target: str) -> str:
        T = self._type_ix[target]
        head = _object(Plan, {"target": _object(Target, {"type": self._shared.type_name(target)})})[:-1]
        head.append(f",{json.dumps(_key(Plan, 'anchors'))}:[")
        body: list[_Alt] = [[self._hops_open]]  # no anchors, no hops
        if (nest := self._nest(1, target, ())) is not None:
            body.append([_Rule(nest)])
        tail = [f'],{json.dumps(_key(Plan, "relevance_text"))}:"']
        if self.cfg.max_relevance_chars > 0:
            tail.append(_Rule(f"{self._terminal('REL', self.cfg.max_relevance_chars, _FREE)}?"))
        self.rules.setdefault("partial", [[f",{json.dumps(_key(Plan, 'match'))}:{json.dumps('most')}"]])
        tail += ['"', _Rule("partial?"), "}"]
        self._add(f"body_{T}", body)
        return self._add(f"plan_{T}", [[*head, _Rule(f"body_{T}"), *tail]]) or ""

    def _anchor_choices(self, j: int, target: str, used: tuple[str, ...]) -> list[tuple[str, _Alt, tuple[str, ...]]]:
        """(anchor type, the anchor's grammar items, refs used after it) for anchor ``a{j}``."""
        var = _str(anchor_var(j))
        out = []
        self.rules.setdefault("mode", [_str(m) for m in get_args(MatchMode)])
        for row in self._rows:
            if row.ref in used:
                continue
            for t in dict.fromkeys(row.types):
                if t in self._type_ix and self._shared.can_reach(t, target):
                    fields: dict[str, list[str]] = {
                        "var": var,
                        "type": self._shared.type_name(t),
                        "ref": _str(row.ref),
                        "match_mode": [_Rule("mode")],
                    }
                    out.append((t, _object(Anchor, fields), tuple(sorted((*used, row.ref), key=self._refs.index))))
        if self.cfg.text_anchors:
            text: list[str] = ['"', self._terminal("TEXT", self.cfg.max_text_chars, _FREE_START), '"']
            for t in self.schema.node_types:
                if self._shared.can_reach(t, target):
                    fields = {
                        "var": var,
                        "type": self._shared.type_name(t),
                        "text": text,
                        "match_mode": _str("doc"),
                    }
                    out.append((t, _object(Anchor, fields), used))
        return out

    def _used_name(self, used: tuple[str, ...]) -> str:
        return "".join(f"_r{self._refs.index(u)}" for u in used)

    def _nest(self, j: int, target: str, used: tuple[str, ...]) -> str | None:
        """Anchor ``a{j}``, the anchors after it and their paths, then ``a{j}``'s path (``used``: refs taken
        by the anchors before ``a{j}``)."""
        if j > self.cfg.max_anchors:
            return None
        name = f"nest_{j}_{self._type_ix[target]}{self._used_name(used)}"
        if name not in self.rules:
            alts = []
            for t, items, used2 in self._anchor_choices(j, target, used):
                inner, paths = self._inner(j + 1, target, used2), self._shared.paths(j, t, target)
                if paths is not None:
                    alts.append([*items, _Rule(inner), _Rule(paths)])
            self._add(name, alts)
        return name if name in self.rules else None

    def _inner(self, j: int, target: str, used: tuple[str, ...]) -> str:
        """What follows anchor ``a{j-1}`` up to its path: the end of the anchors, or ``,a{j}…,``."""
        name = f"inner_{j}_{self._type_ix[target]}{self._used_name(used)}"
        if name not in self.rules:
            alts: list[_Alt] = [[self._hops_open]]
            if (nest := self._nest(j, target, used)) is not None:
                alts.append([",", _Rule(nest), ","])
            self._add(name, alts)
        return name

    # ------------------------------------------------------------------ output
    def _write(self) -> str:
        lines = [_lark_rule(name, alts) for name, alts in self.rules.items()]
        return "".join(lines) + "".join(f"{name}: {regex}\n" for name, regex in self.terminals.items())

    def _longest(self, name: str) -> int:
        """Longest sentence of rule ``name`` in UTF-8 bytes (free text counted at 4 bytes per character)."""
        memo: dict[str, int] = {}

        def item(i: str) -> int:
            if not isinstance(i, _Rule):
                return len(i.encode())
            base = i.rstrip("?")
            if base in self.terminals:
                hi = self.cfg.max_relevance_chars if base == "REL" else self.cfg.max_text_chars
                return 4 * hi
            return rule(base)

        def rule(r: str) -> int:
            if r not in memo:
                memo[r] = max(sum(item(i) for i in alt) for alt in self.rules[r])
            return memo[r]

        return rule(name)

    @classmethod
    def logits_processor(
        cls,
        constraints,
        tokenizer: Any,
        eos_ids: list[int],
        prompt_len: int,
        max_new_tokens: int,
        n: int,
        record: bool = False,
    ) -> PlanLogitsProcessor:
        """The decoding constraint of a batch of prompts (:class:`grasp_core.llm.backends.Constraint`)."""
        return PlanLogitsProcessor(list(constraints), ll_tokenizer(tokenizer, eos_ids), n, record)


def _merged(alt: _Alt) -> list[str]:
    """Adjacent literals joined into one (fewer, longer lexemes)."""
    out: list[str] = []
    for i in alt:
        if out and not isinstance(i, _Rule) and not isinstance(out[-1], _Rule):
            out[-1] = out[-1] + i
        else:
            out.append(i)
    return out


def _lark_item(i: str) -> str:
    return str(i) if isinstance(i, _Rule) else json.dumps(i, ensure_ascii=False)


def _reachability(next_types: dict[str, list[str]], max_hops: int):
    """``reach(t, target, h)``: a walk of exactly ``h`` hops over schema triples leads from ``t`` to ``target``
    (``next_types``: the types one hop from each type)."""

    @cache
    def reach(t: str, target: str, h: int) -> bool:
        if h <= 0 or h > max_hops:
            return False
        return (target in next_types[t]) if h == 1 else any(reach(t2, target, h - 1) for t2 in next_types[t])

    return reach


# -------------------------------------------------------------------- decoding with llguidance
_TOKENIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def ll_tokenizer(tokenizer: Any, eos_ids: list[int] | None = None) -> LLTokenizer:
    """llguidance's view of a fast transformers tokenizer (costly to build, so built once while the tokenizer
    lives)."""
    eos = list(dict.fromkeys([*(eos_ids or []), tokenizer.eos_token_id]))
    cached = _TOKENIZERS.get(tokenizer)
    if cached is None or cached[0] != eos:
        cached = _TOKENIZERS[tokenizer] = (eos, from_tokenizer(tokenizer, eos_token=eos))
    return cached[1]


def matcher(grammar: PlanGrammar, tokenizer: LLTokenizer) -> LLMatcher:
    """A compiled matcher of ``grammar``; a grammar llguidance refuses raises :class:`GraspError`."""
    m = LLMatcher(tokenizer, grammar.lark, log_level=0)
    if m.is_error():
        raise GraspError(f"plan grammar does not compile: {m.get_error()}")
    return m


class PlanLogitsProcessor(LogitsProcessor):
    """Masks every token that would leave the plan grammar (one grammar per prompt), with llguidance.

    Rows are ``prompt × n`` as transformers lays out ``num_return_sequences``. Each grammar is compiled
    once and its matcher copied for the ``n`` rows. A finished row (EOS) is held at EOS.

    With ``record``, every step's allowed tokens are kept as a packed bitmask (bit ``v % 32`` of int32 word
    ``v // 32`` is token ``v``; 1 bit per vocabulary entry): :meth:`allowed_bits` returns them, and GRPO takes
    its log-probabilities over exactly the tokens the sampler could choose (:func:`unpack_bits`).
    """

    def __init__(self, grammars: list[PlanGrammar], tokenizer: LLTokenizer, n: int = 1, record: bool = False):
        # llguidance.torch runs torch.compile when imported (seconds on 2 cores): only decoding pays for it, not every
        # process that reads plans (a cold `grasp query` with the cpu profile's policy planner never decodes)
        from llguidance.torch import allocate_token_bitmask, fill_next_token_bitmask

        self._fill = fill_next_token_bitmask
        compiled = [matcher(g, tokenizer) for g in grammars]
        self.matchers = [c if k == 0 else c.deep_copy() for c in compiled for k in range(n)]
        self.eos = tokenizer.eos_token
        self.vocab = tokenizer.vocab_size
        self.bitmask = allocate_token_bitmask(len(self.matchers), self.vocab)
        self.started = False
        self.failures = 0  # steps where a row's matcher was in error (never expected; EOS is forced then)
        self._steps: list[torch.Tensor] | None = [] if record else None

    def allowed_bits(self) -> torch.Tensor:
        """The recorded masks, ``(rows, steps, ceil(vocab / 32))`` int32 (the constructor's ``record``)."""
        if self._steps is None:
            raise GraspError("PlanLogitsProcessor: allowed_bits() needs record=True")
        if not self._steps:
            return torch.zeros(len(self.matchers), 0, self.bitmask.shape[1], dtype=torch.int32)
        return torch.stack(self._steps, dim=1)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        rows = input_ids.shape[0]
        if self.started:
            for r, tok in enumerate(input_ids[:, -1].tolist()):
                m = self.matchers[r]
                if not m.is_stopped():
                    m.consume_token(tok)
        self.started = True
        for r in range(rows):
            m = self.matchers[r]
            if m.is_stopped() or m.is_error():
                self.failures += int(m.is_error())
                self.bitmask[r] = 0  # EOS only
                self.bitmask[r, self.eos // 32] = _bit(self.eos % 32)
                continue
            self._fill(m, self.bitmask, r)
        if self._steps is not None:
            self._steps.append(self.bitmask[:rows].clone())
        allowed = unpack_bits(self.bitmask[:rows], scores.shape[-1])
        return scores.masked_fill(~allowed.to(scores.device), float("-inf"))


def _bit(i: int) -> int:
    """Bit ``i`` of an int32 word, as the signed value torch stores (bit 31 is the sign)."""
    return (1 << i) - (1 << 32 if i == 31 else 0)


def unpack_bits(bits: torch.Tensor, width: int) -> torch.Tensor:
    """Packed int32 bitmasks ``(..., words)`` -> bool ``(..., width)``; tokens past ``32 * words`` are not allowed."""
    flat = ((bits.unsqueeze(-1) >> torch.arange(32, dtype=torch.int32, device=bits.device)) & 1).bool()
    flat = flat.reshape(*bits.shape[:-1], -1)
    if flat.shape[-1] >= width:
        return flat[..., :width]
    return torch.cat([flat, flat.new_zeros(*bits.shape[:-1], width - flat.shape[-1])], dim=-1)
