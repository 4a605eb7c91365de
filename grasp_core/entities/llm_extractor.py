"""The LLM entity extractor of the paper (§3.1, Figure A7), with the gazetteer as its safety net.

The prompt is the one unified template ``grasp_core/prompts/extractor_system.txt`` (slots: the SKB's name,
its node types, a few SKB rules) followed by four demonstrations ``Query: …`` / ``Mentions: [json]`` and the
query; the model continues with a JSON list of ``{text, types, role, nested_in}`` (``nested_in``: 1-based
position of the containing mention, or null). SKB rules: example node names per type (the most connected
nodes, so the model sees how names are written) plus any ``LLMExtractorConfig.rules``.

The LLM is any ``generate(prompts: list[str]) -> list[str]`` callable (the local transformers backend or an
OpenAI-compatible endpoint from ``grasp_core.llm``). :func:`parse_mentions` tolerates code fences, a
``<think>`` block, prose around the list, a ``{"mentions": [...]}`` wrapper, a list cut off by the token limit
(the complete objects are kept), unknown types (dropped), and bad single items (skipped). When nothing usable
remains it raises :class:`ExtractionError` with the reason; that query then falls back to the gazetteer, and
:meth:`LLMExtractor.extract_detailed` records it.

Demonstrations come from the caller (human-written) or from :func:`gazetteer_demonstrations`: gazetteer output
on training queries, picked to cover many node types.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from importlib.resources import files
from string import Template
from typing import NamedTuple, cast

from grasp_core.entities.config import LLMExtractorConfig
from grasp_core.entities.gazetteer import GazetteerExtractor
from grasp_core.entities.linking import Mention, link_many
from grasp_core.entities.table import EntityTable, Role
from grasp_core.errors import ExtractionError
from grasp_core.skb.format import SKB
from grasp_core.skb.schema import Schema

Generate = Callable[[list[str]], list[str]]
Demonstration = tuple[str, list[Mention]]
ROLES = ("anchor", "target", "attribute")

_FENCE = re.compile(r"```[A-Za-z]*\s*\n?(.*?)(?:```|$)", re.DOTALL)
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_DECODER = json.JSONDecoder()


class Extraction(NamedTuple):
    table: EntityTable
    source: str  # "llm" or "gazetteer" (fallback)
    error: str | None  # why the LLM output was not used


def mentions_to_json(mentions: Sequence[Mention]) -> str:
    """The answer format of the prompt (also used for demonstrations)."""
    return json.dumps(
        [
            {
                "text": m.text,
                "types": list(m.types),
                "role": m.role,
                "nested_in": None if m.parent is None else m.parent + 1,
            }
            for m in mentions
        ],
        ensure_ascii=False,
    )


def _type_key(name: object) -> str:
    return re.sub(r"[\s_\-/]+", " ", str(name).strip().lower())


def _type_lookup(schema: Schema) -> dict[str, str]:
    """Lenient type names (case, separators, a plural s) -> the schema's type."""
    return {_type_key(t): t for t in schema.node_types} | {_type_key(t) + "s": t for t in schema.node_types}


def _json_body(text: str) -> list:
    text = _THINK.sub("", text)
    fence = _FENCE.search(text)
    body = fence.group(1) if fence else text
    starts = [i for i in (body.find("["), body.find("{")) if i >= 0]
    if not starts:
        raise ExtractionError("no JSON list in the output")
    start = min(starts)
    try:
        obj, _ = _DECODER.raw_decode(body, start)
    except json.JSONDecodeError as exc:
        salvaged = _complete_objects(body, start)
        if not salvaged:
            raise ExtractionError(f"invalid JSON at char {exc.pos}: {exc.msg}") from exc
        return salvaged
    if isinstance(obj, dict):
        obj = obj.get("mentions", obj.get("entities", [obj] if "text" in obj else None))
    if not isinstance(obj, list):
        raise ExtractionError("the JSON is not a list of mentions")
    return obj


def _complete_objects(body: str, start: int) -> list:
    """The complete ``{...}`` objects of a list cut off mid-way."""
    out, pos = [], body.find("{", start)
    while pos >= 0:
        try:
            obj, end = _DECODER.raw_decode(body, pos)
        except json.JSONDecodeError:
            break
        out.append(obj)
        pos = body.find("{", end)
    return out


def parse_mentions(text: str, schema: Schema, max_types: int = 2) -> list[Mention]:
    """Mentions from an LLM answer; raises :class:`ExtractionError` when none can be read."""
    if not isinstance(text, str) or not text.strip():
        raise ExtractionError("empty output")
    items = _json_body(text)
    lookup = _type_lookup(schema)
    kept: list[tuple[int, Mention, object]] = []  # (position in the LLM's list, mention, nested_in)
    for pos, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or not item["text"].strip():
            continue
        raw_types = item.get("types", item.get("type", []))
        raw_types = [raw_types] if isinstance(raw_types, str) else raw_types if isinstance(raw_types, list) else []
        types = tuple(dict.fromkeys(lookup[k] for k in map(_type_key, raw_types) if k in lookup))[:max_types]
        said = str(item.get("role", "")).strip().lower()
        role = cast(Role, said if said in ROLES else ("attribute" if not types else "anchor"))
        kept.append(
            (pos, Mention(item["text"].strip(), types if role != "attribute" else (), role), item.get("nested_in"))
        )
    if items and not kept:
        raise ExtractionError("no item of the list has a non-empty 'text'")
    index_of = {pos: i for i, (pos, _, _) in enumerate(kept)}
    out = []
    for i, (_pos, mention, nested_in) in enumerate(kept):
        parent = index_of.get(nested_in - 1) if isinstance(nested_in, int) and not isinstance(nested_in, bool) else None
        out.append(Mention(mention.text, mention.types, mention.role, parent if parent != i else None))
    return out


def gazetteer_demonstrations(
    skb: SKB, gazetteer: GazetteerExtractor, n: int = 4, pool: int = 300, seed: int = 0
) -> list[Demonstration]:
    """``n`` training queries with their gazetteer mentions, chosen to cover many node types.

    From ``pool`` training queries (seeded shuffle), those with 2–6 mentions including an anchor qualify; then a
    greedy pick maximizes new types per demonstration (ties: more mentions, then shuffled order).
    """
    train = skb.split("train")["query"].tolist()
    random.Random(seed).shuffle(train)
    candidates = []
    for query, mentions in zip(train[:pool], gazetteer.find_mentions(train[:pool])):
        if 2 <= len(mentions) <= 6 and any(m.role == "anchor" for m in mentions):
            candidates.append((query, mentions))
    chosen: list[Demonstration] = []
    seen: set[str] = set()
    while candidates and len(chosen) < n:
        best = max(
            range(len(candidates)),
            key=lambda i: (len({t for m in candidates[i][1] for t in m.types} - seen), len(candidates[i][1]), -i),
        )
        query, mentions = candidates.pop(best)
        chosen.append((query, mentions))
        seen |= {t for m in mentions for t in m.types}
    return chosen


class LLMExtractor:
    """Prompted LLM extraction, linked like the gazetteer's; unreadable answers fall back to the gazetteer."""

    def __init__(
        self,
        skb: SKB,
        index,
        encoder,
        generate: Generate,
        demonstrations: Sequence[Demonstration],
        fallback: GazetteerExtractor,
        cfg: LLMExtractorConfig = LLMExtractorConfig(),
    ):
        self.skb, self.index, self.encoder, self.generate = skb, index, encoder, generate
        self.fallback, self.cfg = fallback, cfg
        self.demonstrations = list(demonstrations)[: cfg.num_demos]
        self._header = self._render_header()

    def _skb_rules(self) -> list[str]:
        nodes, degrees = self.skb.nodes, self.skb.degrees
        rules = []
        for t in self.skb.schema.node_types:
            ids = self.skb.ids_of_type(t)
            top = ids[(-degrees[ids]).argsort(kind="stable")[: self.cfg.example_names]]
            if len(top):
                rules.append(f"{t} names look like: " + "; ".join(f'"{nodes["name"].iat[i]}"' for i in top))
        return rules + list(self.cfg.rules)

    def _render_header(self) -> str:
        template = Template(files("grasp_core.prompts").joinpath("extractor_system.txt").read_text())
        header = template.substitute(
            skb_name=self.skb.schema.name,
            node_types=", ".join(self.skb.schema.node_types),
            rules="\n".join(f"- {r}" for r in self._skb_rules()),
        ).strip()
        demos = "".join(f"\n\nQuery: {q.strip()}\nMentions: {mentions_to_json(m)}" for q, m in self.demonstrations)
        return header + demos

    def prompt(self, query: str) -> str:
        return f"{self._header}\n\nQuery: {query.strip()}\nMentions:"

    def extract(self, queries: Sequence[str]) -> list[EntityTable]:
        return [e.table for e in self.extract_detailed(queries)]

    def extract_detailed(self, queries: Sequence[str]) -> list[Extraction]:
        """Each query's table, where it came from, and why the LLM answer was rejected (if it was)."""
        out: list[Extraction] = []
        for start in range(0, len(queries), self.cfg.batch_size):
            batch = list(queries[start : start + self.cfg.batch_size])
            answers = self.generate([self.prompt(q) for q in batch])
            if len(answers) != len(batch):
                raise ValueError(f"generate() returned {len(answers)} answers for {len(batch)} prompts")
            mentions: list[list[Mention] | None] = []
            errors: list[str | None] = []
            for answer in answers:
                try:
                    mentions.append(parse_mentions(answer, self.skb.schema, self.cfg.max_types))
                    errors.append(None)
                except ExtractionError as exc:
                    mentions.append(None)
                    errors.append(exc.reason)
            failed = [i for i, m in enumerate(mentions) if m is None]
            for i, m in zip(failed, self.fallback.find_mentions([batch[i] for i in failed])):
                mentions[i] = m
            found = [m or [] for m in mentions]  # every failed answer got the gazetteer's mentions above
            tables = link_many(found, self.skb, self.index, self.encoder, self.fallback.cfg.linking)
            out.extend(Extraction(t, "llm" if e is None else "gazetteer", e) for t, e in zip(tables, errors))
        return out
