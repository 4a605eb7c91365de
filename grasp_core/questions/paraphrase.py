"""Optional LLM paraphrase of synthesized questions (STaRK phrases its templates with an LLM), off by default.

Each question is sent to an OpenAI-compatible chat endpoint (``$GRASP_PARAPHRASE_URL``, model
``$GRASP_PARAPHRASE_MODEL``; :class:`grasp_core.llm.backends.OpenAICompatibleLLM`, with its retries) with the
phrases it must keep word for word: how it names each anchor and the property phrase its gold was filtered by.
A rewrite is kept only when every such phrase still occurs in it (its tokens contiguous, querygen's match rule),
it is one short paragraph, and no other question already reads the same; otherwise the template's wording stays.
The gold never changes: the rewrite keeps the anchors and the property it was computed from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grasp_core.questions.properties import tokens

PROMPT = (
    "Rewrite this question the way a person would type it into a search box or ask a colleague. Keep its meaning "
    "exactly. Keep each of these phrases word for word: {keep}. Answer with the rewritten question only.\n\n"
    "Question: {question}"
)


@dataclass(frozen=True)
class ParaphraseResult:
    texts: list[str]
    rewritten: int  # how many questions took the LLM's wording


def _contains(text: str, phrase: str) -> bool:
    hay, needle = tokens(text), tokens(phrase)
    return bool(needle) and any(hay[i : i + len(needle)] == needle for i in range(len(hay) - len(needle) + 1))


def acceptable(rewrite: str, original: str, keep: Sequence[str]) -> bool:
    """A rewrite that keeps every phrase, is one paragraph and not far longer than the question."""
    text = rewrite.strip()
    return (
        bool(text)
        and "\n" not in text
        and len(text) <= 3 * len(original) + 40
        and all(_contains(text, p) for p in keep)
    )


def paraphrase(
    questions: Sequence[str], keep: Sequence[Sequence[str]], base_url: str, model: str, temperature: float = 0.7
) -> ParaphraseResult:
    """Rewrite ``questions`` through the endpoint; ``keep[i]`` are the phrases question i must keep."""
    from grasp_core.llm.backends import OpenAICompatibleLLM

    llm = OpenAICompatibleLLM(base_url, model)
    try:
        prompts = [PROMPT.format(keep="; ".join(f'"{p}"' for p in k), question=q) for q, k in zip(questions, keep)]
        answers = llm.generate(prompts, n=1, temperature=temperature, max_new_tokens=200)
    finally:
        llm.close()
    out, seen, rewritten = [], set(questions), 0
    for q, k, (answer,) in zip(questions, keep, answers):
        text = answer.strip().strip('"').strip()
        if text != q and text not in seen and acceptable(text, q, k):
            out.append(text)
            seen.add(text)
            rewritten += 1
        else:
            out.append(q)
    return ParaphraseResult(out, rewritten)
