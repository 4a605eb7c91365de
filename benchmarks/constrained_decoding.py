"""Constrained plan decoding: per-token overhead and failed-plan rate, ours vs existing libraries.

Setup: the synthetic Prime SKB (``tiny``), a planner tokenizer trained on its documents + prompts + plans,
and an UNTRAINED default-size tiny Qwen3 planner (~4M parameters) sampling at temperature 1.0. An untrained
model writes garbage, so unconstrained decoding fails ~100% of the time; a sound constraint must bring
that to 0%. This measures the mechanism, not planner quality.

Options (each a transformers LogitsProcessor; overhead = seconds inside the processor per generated token):
- ``none``        unconstrained;
- ``plan_grammar`` ours (grasp_core.planner.lm.grammar): the plan grammar generated as Lark text from the plan
                  model, the schema and the entity table, applied by llguidance 1.9.1; its per-query generation
                  and compilation are timed too (``setup_s``);
- ``plan_grammar_xgrammar`` the same generated grammar converted to xgrammar's EBNF and compiled per query;
- ``hand_grammar_before`` the hand-written character automaton this replaced (figures kept from its last run);
- ``xgrammar``    xgrammar 0.2.9 with a JSON schema of the plan (enums for types, relations, refs, vars);
- ``lmfe``        lm-format-enforcer 0.11.3 core (its transformers integration does not import under
                  transformers 5), same JSON schema.
A JSON schema cannot tie a hop's relation to its endpoint types or force paths to reach ``target``, so the
libraries' plans can be well-formed yet invalid: that is the failed-plan rate they get.

Also measured: tokens/s of one SFT training step (forward + backward + AdamW) of the default tiny model, and
the generated grammar's size and per-query generate/compile seconds on each synthetic schema (``grammar_size``).

The comparison libraries are the ``bench`` extra of ``pyproject.toml`` (not needed to run GRASP):
``.venv/bin/pip install -e '.[bench]'``; an option whose library is missing is recorded as an error.

    nice -n 10 python benchmarks/constrained_decoding.py   -> benchmarks/results/constrained_decoding.json

The results file holds the run's ``record`` (commit, machine, load average, date: ``benchmarks/harness.py``); its
``hand_grammar_before`` entry is carried over from the file being replaced. It takes no arguments (``--help`` only).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402
from harness import RESULTS, Run, read_result, timed  # noqa: E402

from grasp_core.entities.table import EntityRow, EntityTable  # noqa: E402
from grasp_core.errors import PlanError  # noqa: E402
from grasp_core.llm.backends import TransformersLLM  # noqa: E402
from grasp_core.plan.parse import parse_plan  # noqa: E402
from grasp_core.plan.validate import validate_plan  # noqa: E402
from grasp_core.planner.lm.grammar import (  # noqa: E402
    PlanGrammar,
    PlanGrammarConfig,
    PlanLogitsProcessor,
    ll_tokenizer,
    matcher,
)
from grasp_core.planner.lm.prompt import build_planner_messages  # noqa: E402
from grasp_core.planner.lm.tiny_model import build_tiny_qwen3, save_model  # noqa: E402
from grasp_core.planner.lm.tokenizer import train_planner_tokenizer  # noqa: E402
from grasp_core.sources.synth import build_synth_skb  # noqa: E402

N_PROMPTS, N_SAMPLES, MAX_NEW = 8, 4, 400
OPTIONS = ("none", "plan_grammar", "plan_grammar_xgrammar", "xgrammar", "lmfe")
OUT = RESULTS / "constrained_decoding.json"


def random_tables(skb, n, rng):
    tables = []
    for _ in range(n):
        ids = rng.sample(range(len(skb.nodes)), 3)
        rows = [
            EntityRow(f"E{i + 1}", str(skb.nodes.name[j]), "anchor", (str(skb.nodes.type[j]),))
            for i, j in enumerate(ids)
        ]
        tables.append(EntityTable((*rows, EntityRow("E4", "recent", "attribute", ()))))
    return tables


def random_plan(grammar, rng, rule="start"):
    """A random sentence of the grammar (uniform choice per rule; free text is a few words): tokenizer corpus only."""
    out = ""
    for item in rng.choice(grammar.rules[rule]):
        name = item.rstrip("?")
        if name in grammar.rules:
            out += random_plan(grammar, rng, name)
        elif name in grammar.terminals:
            out += " ".join(
                rng.choice(["retina", "eye drops", "BRCA1", "pain", "rare"]) for _ in range(rng.randint(1, 4))
            )
        else:
            out += item
    return out


def token_strings(tokenizer):
    """The text each token id stands for (None for special tokens), for lm-format-enforcer."""
    special = set(tokenizer.all_special_ids)
    return [None if i in special else tokenizer.decode([i]) or None for i in range(len(tokenizer))]


def xgrammar_ebnf(grammar):
    """The generated Lark grammar in xgrammar's EBNF (``root`` is the start rule, terminals become rules)."""
    lines = []
    for name, alts in grammar.rules.items():
        body = " | ".join(
            " ".join(
                (("root" if i == "start" else str(i).rstrip("?")) + ("?" if str(i).endswith("?") else ""))
                if (str(i).rstrip("?") in grammar.rules or str(i).rstrip("?") in grammar.terminals)
                else json.dumps(i, ensure_ascii=False)
                for i in alt
            )
            for alt in alts
        )
        lines.append(f"{'root' if name == 'start' else name} ::= {body}")
    for name, regex in grammar.terminals.items():
        lines.append(f"{name} ::= {regex.strip('/').replace(chr(92) + 's', ' ').replace(chr(92) + 'x', chr(92) + 'x')}")
    return "\n".join(lines)


def plan_json_schema(schema, table):
    types, refs = list(schema.node_types), [r.ref for r in table.rows if r.role != "attribute"]
    obj = lambda props, req: {"type": "object", "properties": props, "required": req, "additionalProperties": False}  # noqa: E731
    anchor = obj(
        {
            "var": {"enum": ["a1", "a2", "a3"]},
            "ref": {"enum": refs},
            "type": {"enum": types},
            "match_mode": {"enum": ["name", "doc"]},
        },
        ["var", "ref", "type", "match_mode"],
    )
    hop = obj(
        {
            "from": {"enum": ["a1", "a2", "a3", *[f"x{i}" for i in range(1, 7)]]},
            "rel": {"enum": schema.relation_names},
            "to": {"enum": [*[f"x{i}" for i in range(1, 7)], "target"]},
            "to_type": {"enum": types},
        },
        ["from", "rel", "to"],
    )
    return obj(
        {
            "target": obj({"type": {"enum": types}}, ["type"]),
            "anchors": {"type": "array", "items": anchor, "maxItems": 3},
            "hops": {"type": "array", "items": hop, "maxItems": 9},
            "relevance_text": {"type": "string", "maxLength": 200},
        },
        ["target", "anchors", "hops", "relevance_text"],
    )


class Timed:
    """Wraps a logits processor and accumulates the seconds spent inside it."""

    def __init__(self, inner):
        self.inner, self.seconds = inner, 0.0

    def __call__(self, input_ids, scores):
        t = time.perf_counter()
        out = self.inner(input_ids, scores)
        self.seconds += time.perf_counter() - t
        return out


class LMFEProcessor:
    def __init__(self, enforcers, prompt_len):
        self.enforcers, self.prompt_len = enforcers, prompt_len

    def __call__(self, input_ids, scores):
        mask = torch.full_like(scores, float("-inf"))
        for r, enforcer in enumerate(self.enforcers):
            allowed = enforcer.get_allowed_tokens(input_ids[r, self.prompt_len :].tolist())
            ids = allowed.allowed_tokens if hasattr(allowed, "allowed_tokens") else allowed
            mask[r, ids] = 0
        return scores + mask


def make_processors(option, llm, grammars, tables, schema, prompt_len):
    row_tables = [t for t in tables for _ in range(N_SAMPLES)]
    if option == "plan_grammar":  # the per-query grammars are generated and compiled here (timed as setup)
        grammars = [PlanGrammar(schema, t) for t in tables]
        return PlanLogitsProcessor(grammars, ll_tokenizer(llm.tokenizer, llm.eos_ids), N_SAMPLES)
    if option == "plan_grammar_xgrammar":
        import xgrammar as xgr
        from xgrammar.contrib.hf import LogitsProcessor

        info = xgr.TokenizerInfo.from_huggingface(llm.tokenizer, vocab_size=llm.model.config.vocab_size)
        compiler = xgr.GrammarCompiler(info, cache_enabled=False)
        compiled = [compiler.compile_grammar(xgrammar_ebnf(PlanGrammar(schema, t))) for t in tables]
        return LogitsProcessor([c for c in compiled for _ in range(N_SAMPLES)])
    if option == "xgrammar":
        import xgrammar as xgr
        from xgrammar.contrib.hf import LogitsProcessor

        info = xgr.TokenizerInfo.from_huggingface(llm.tokenizer, vocab_size=llm.model.config.vocab_size)
        compiler = xgr.GrammarCompiler(info)
        compiled = [
            compiler.compile_json_schema(json.dumps(plan_json_schema(schema, t)), any_whitespace=False) for t in tables
        ]
        return LogitsProcessor([c for c in compiled for _ in range(N_SAMPLES)])
    if option == "lmfe":
        from lmformatenforcer import JsonSchemaParser, TokenEnforcer
        from lmformatenforcer.tokenenforcer import TokenEnforcerTokenizerData

        strings = token_strings(llm.tokenizer)
        regular = [(i, s, s.startswith(" ")) for i, s in enumerate(strings) if s is not None]
        data = TokenEnforcerTokenizerData(
            regular, lambda ids: llm.tokenizer.decode(ids), llm.tokenizer.eos_token_id, False, len(strings)
        )
        return LMFEProcessor(
            [TokenEnforcer(data, JsonSchemaParser(plan_json_schema(schema, t))) for t in row_tables], prompt_len
        )
    return None


def failed(text, schema, table):
    try:
        validate_plan(parse_plan(text), schema, table)
    except PlanError as exc:
        return exc.reason if hasattr(exc, "reason") else "invalid"
    return None


def grammar_sizes(tok, rng) -> dict:
    """Per-query cost of the generated grammar on each synthetic schema: rules, Lark characters, seconds to
    generate (schema rules already shared, as for every query after the first) and to compile (llguidance),
    for the default config and the cpu one (refs only, no free text); tables of 3 anchor rows."""
    out = {}
    lltok = ll_tokenizer(tok)
    for topic in ("prime", "mag", "amazon"):
        skb = build_synth_skb(topic, "tiny")
        tables = random_tables(skb, 6, rng)
        for label, cfg in (
            ("default", PlanGrammarConfig()),
            ("cpu", PlanGrammarConfig(text_anchors=False, max_relevance_chars=0)),
        ):
            PlanGrammar(skb.schema, tables[0], cfg)  # the schema's shared rules, built once
            gen, comp, sizes = [], [], []
            for t in tables[1:]:
                a = time.perf_counter()
                g = PlanGrammar(skb.schema, t, cfg)
                b = time.perf_counter()
                matcher(g, lltok)
                comp.append(time.perf_counter() - b)
                gen.append(b - a)
                sizes.append((len(g.rules), len(g.lark), g.max_bytes))
            out[f"synth-{topic}/{label}"] = {
                "node_types": len(skb.schema.node_types),
                "relations": len(skb.schema.relation_names),
                "rules": int(np.median([x[0] for x in sizes])),
                "lark_chars": int(np.median([x[1] for x in sizes])),
                "max_bytes": int(np.median([x[2] for x in sizes])),
                "generate_s": float(np.median(gen)),
                "compile_s": float(np.median(comp)),
            }
            print("grammar", topic, label, out[f"synth-{topic}/{label}"], file=sys.stderr)
    return out


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    run = Run(torch_threads=1)
    torch.set_num_threads(1)  # a shared 2-core machine: OpenMP threads spinning against other jobs cost 20x
    rng = random.Random(0)
    skb = build_synth_skb("prime", "tiny")
    schema = skb.schema
    tables = random_tables(skb, N_PROMPTS, rng)
    types = list(schema.node_types)
    queries = [f"which {types[i % len(types)]} is related to {t.rows[0].mention}?" for i, t in enumerate(tables)]
    chats = [build_planner_messages(schema, t, q, compact=True) for t, q in zip(tables, queries)]
    grammars = [PlanGrammar(schema, t) for t in tables]
    plans = [random_plan(grammars[i % N_PROMPTS], rng) for i in range(60)]
    before = read_result(OUT).get("hand_grammar_before")
    corpus = [skb.document(i) for i in range(len(skb.nodes))] + [m["content"] for c in chats for m in c] * 5 + plans
    results: dict = {
        "setup": {
            "skb": "synth-prime tiny",
            "prompts": N_PROMPTS,
            "samples_per_prompt": N_SAMPLES,
            "max_new_tokens": MAX_NEW,
            "temperature": 1.0,
            "torch_threads": 1,
        }
    }
    with tempfile.TemporaryDirectory() as tmp:
        tok = train_planner_tokenizer(corpus, 4000, Path(tmp) / "tok", schema=schema)
        model = build_tiny_qwen3(tok)
        results["model"] = {
            "vocab": len(tok),
            "parameters": sum(p.numel() for p in model.parameters()),
            "prompt_tokens_mean": float(
                np.mean(
                    [
                        len(tok(llm_text)["input_ids"])
                        for llm_text in [
                            tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats
                        ]
                    ]
                )
            ),
        }
        # --- one SFT step: tokens/s
        batch = tok(
            [
                tok.apply_chat_template(c + [{"role": "assistant", "content": p}], tokenize=False)
                for c, p in zip(chats, plans)
            ],
            return_tensors="pt",
            padding=True,
            add_special_tokens=False,
        )
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def train_step() -> None:
            model(**batch, labels=batch["input_ids"]).loss.backward()
            opt.step()
            opt.zero_grad()

        step_s = float(np.median(timed(train_step, n=3, warmup=1))) / 1000
        n_tok = int(batch["attention_mask"].sum())
        results["train_step"] = {
            "batch": N_PROMPTS,
            "tokens": n_tok,
            "seconds": step_s,
            "tokens_per_s": n_tok / step_s,
        }
        save_model(build_tiny_qwen3(tok), tok, Path(tmp) / "model")
        llm = TransformersLLM(Path(tmp) / "model", batch_size=N_PROMPTS)
        enc = llm.tokenizer([llm.render(c) for c in chats], return_tensors="pt", padding=True, add_special_tokens=False)
        prompt_len = enc["input_ids"].shape[1]
        ll_tokenizer(llm.tokenizer, llm.eos_ids)  # once per tokenizer (~1 s), not per query: built before timing
        for option in OPTIONS:
            try:
                t = time.perf_counter()
                proc = make_processors(option, llm, grammars, tables, schema, prompt_len)
                setup = time.perf_counter() - t
            except Exception as exc:  # noqa: BLE001  (a library that does not work here is a result)
                results[option] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            wrapped = Timed(proc) if proc is not None else None
            torch.manual_seed(0)
            t = time.perf_counter()
            with torch.inference_mode():
                gen = llm.model.generate(
                    **enc,
                    max_new_tokens=MAX_NEW,
                    do_sample=True,
                    temperature=1.0,
                    top_k=0,
                    top_p=1.0,
                    num_return_sequences=N_SAMPLES,
                    logits_processor=[wrapped] if wrapped else None,
                    pad_token_id=llm.tokenizer.pad_token_id,
                )
            wall = time.perf_counter() - t
            new = gen[:, prompt_len:]
            n_new = int((new != llm.tokenizer.pad_token_id).sum())
            texts = llm.tokenizer.batch_decode(new, skip_special_tokens=True)
            reasons = [failed(x, schema, tables[i // N_SAMPLES]) for i, x in enumerate(texts)]
            processor_s = wrapped.seconds if wrapped else 0.0
            results[option] = {
                "generated_tokens": n_new,
                "steps": new.shape[1],
                "wall_s": wall,
                "processor_s": processor_s,
                "overhead_ms_per_token": 1000 * processor_s / max(n_new, 1),
                "overhead_ms_per_step": 1000 * processor_s / max(new.shape[1], 1),
                "setup_s": setup,
                "overhead_incl_setup_ms_per_token": 1000 * (processor_s + setup) / max(n_new, 1),
                "unfinished": sum(not x.rstrip().endswith("}") for x in texts),
                "failed_plan_rate": sum(r is not None for r in reasons) / len(reasons),
                "failure_reasons": {r: reasons.count(r) for r in set(reasons) if r is not None},
                "example": texts[0][:300],
            }
            print(option, {k: v for k, v in results[option].items() if k != "example"}, file=sys.stderr)
        results["grammar_size"] = grammar_sizes(llm.tokenizer, rng)
    if before is not None:
        results["hand_grammar_before"] = before
    run.write(OUT, results, quiet=True)
    print(
        "| option | failed plans | overhead ms/token | incl. setup ms/token | wall s | tokens |\n|---|---|---|---|---|---|"
    )
    for option in [*OPTIONS, "hand_grammar_before"]:
        r = results.get(option, {"error": "not measured"})
        if "error" in r:
            print(f"| {option} | error: {r['error'][:60]} | | | | |")
        else:
            incl = r.get("overhead_incl_setup_ms_per_token", float("nan"))
            print(
                f"| {option} | {100 * r['failed_plan_rate']:.0f}% | {r['overhead_ms_per_token']:.3f} | {incl:.3f} | {r['wall_s']:.1f} | {r['generated_tokens']} |"
            )
    print(
        f"\ntrain step: {results['train_step']['tokens_per_s']:.0f} tokens/s "
        f"({results['train_step']['tokens']} tokens in {results['train_step']['seconds']:.2f} s); model {results['model']}"
    )


if __name__ == "__main__":
    main()
