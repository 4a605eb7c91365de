"""Inputs longer than a model's window are cut for that model alone, and the cut is recorded.

A pasted case description can be longer than what a model reads: the planner's context (prompt + plan), the
reranker's input (instruction + query + candidate document) or the query encoder's window. Each model gets the
longest prefix of the query that fits it (cut at a token boundary, by that model's own tokenizer); the other
models keep the whole query. The returned note (``"read 61 of 152 tokens"``) goes into the result's explanation.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cut:
    text: str  # what the model reads
    note: str | None  # None when the whole text fits


def cut_to_tokens(text: str, tokenizer, max_tokens: int) -> Cut:
    """The longest prefix of ``text`` with at most ``max_tokens`` tokens of ``tokenizer`` (a fast tokenizer)."""
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    return cut_at_offsets(text, offsets, max_tokens)


def cut_at_offsets(text: str, offsets: list[tuple[int, int]], max_tokens: int) -> Cut:
    """The longest prefix of ``text`` with at most ``max_tokens`` of the tokens whose character spans are ``offsets``."""
    if len(offsets) <= max_tokens:
        return Cut(text, None)
    kept = max(max_tokens, 0)
    prefix = text[: offsets[kept - 1][1]].rstrip() if kept else ""
    return Cut(prefix, f"read {kept} of {len(offsets)} tokens")


def planner_cut(llm, messages_of, query: str, max_new_tokens: int) -> Cut:
    """The query as the planner reads it: the rendered prompt (``messages_of(query)``) must leave room for a plan
    of ``min(max_new_tokens, context / 4)`` tokens in the model's context. Backends without a local tokenizer
    (an HTTP endpoint) get the whole query."""
    tokenizer = getattr(llm, "tokenizer", None)
    context = getattr(getattr(getattr(llm, "model", None), "config", None), "max_position_embeddings", None)
    if tokenizer is None or context is None:
        return Cut(query, None)
    count = lambda q: len(tokenizer(llm.render(messages_of(q)), add_special_tokens=False)["input_ids"])  # noqa: E731
    room = context - min(max_new_tokens, context // 4)
    if count(query) <= room:
        return Cut(query, None)
    budget = room - count("")
    cut = cut_to_tokens(query, tokenizer, budget)
    while cut.text and count(cut.text) > room:  # tokens across the query's joins to the template may differ
        budget -= 1
        cut = cut_to_tokens(query, tokenizer, budget)
    return cut


def reranker_cut(scorer, query: str, max_input_tokens: int) -> Cut:
    """The query as the reranker reads it: instruction + query may take 3/4 of ``max_input_tokens`` (a quarter
    stays for the candidate document)."""
    room = max_input_tokens - max_input_tokens // 4
    if scorer.prompt_tokens(query) <= room:
        return Cut(query, None)
    return cut_to_tokens(query, scorer.tokenizer, room - scorer.prompt_tokens(""))
