"""Which context tokens should a translated-blend recompute? For SQuAD questions *not* in the
evaluated 200 (by default the next 100 distinct passages of the same seeded draw), translate each
passage with the installed MoT translator and measure, per selection rule and recomputed share, the
share of the gold answer's tokens selected ("coverage"): a screen before a QA run, not a verdict.
It ranked query over deviation over random as SQuAD QA does, but query-dilated-2 (query-span)
covers more than query and answers worse (-4.47 F1 at 0.25): what the recompute must repair is
what the question attends to, not only the answer's tokens.

    python experiments/probe_blend_selection.py [--offset 200 --count 100 --fractions 0.15,0.25]

Rules: query (cag.kv.blend's default: the prompt's last 4 tokens, upper half of the layers);
query-last1 / query-last8 / query-all (the last 1, 8, every question token); query-layers-all /
query-layers-top (every layer / the top quarter); query-dilated-R (query's scores max-pooled over
each token and R neighbours either side, so a selected answer token brings its span along; blend's
selection query-span is query-dilated-2);
deviation; random. Writes runs/probes/blend_selection-MODEL.json (or --out).
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from cag.modes import ContextRequest, get_mode  # noqa: E402
from cag.defaults import DEFAULT_GENERATOR  # noqa: E402
from cag.kv.chunk_cache import tokenize_chunk  # noqa: E402
from blend_selections import deviation_scores, random_scores, widen_to_spans  # noqa: E402
from cag.kv.blend import query_scores, select_tokens  # noqa: E402
from cag.models import load_model  # noqa: E402
from cag.progress import Progress  # noqa: E402
from cag.prompt import prompt_layout  # noqa: E402
from eval.datasets import load_examples, resolve_dataset, sample  # noqa: E402
from eval.runner import EvalConfig, build_store, context_rows  # noqa: E402


def answer_positions(rows: list, passage: str, answer: str, answer_start: int, tokenizer,
                     context_ids: torch.Tensor) -> list | None:
    """Indices into the context tokens (after the prefix) of the tokens overlapping the gold
    answer; None where the chunk texts cannot be located or retokenize differently."""
    positions, offset, cursor = [], 0, 0
    lo, hi = answer_start, answer_start + len(answer)
    for row in rows:
        at = passage.find(row.text, cursor)
        if at < 0:
            return None
        ids, spans = tokenize_chunk(tokenizer, row.text)  # as the translator tokenizes a chunk
        if not torch.equal(context_ids[offset:offset + len(ids)], ids):
            return None
        positions += [offset + i for i, (a, b) in enumerate(spans.tolist()) if at + a < hi and at + b > lo]
        offset, cursor = offset + len(ids), at + len(row.text)
    return positions if offset == context_ids.numel() and positions else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_GENERATOR)
    parser.add_argument("--offset", type=int, default=200, help="skip the first N passages (the evaluated ones)")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--fractions", default="0.15,0.25")
    parser.add_argument("--radii", default="1,2", help="query-dilated: neighbours either side")
    parser.add_argument("--run", default="runs/probe-blend-selection", help="run folder (the store)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    fractions = [float(f) for f in args.fractions.split(",")]

    path, task = resolve_dataset("squad", None)
    examples = sample(load_examples(path, task), task, args.offset + args.count, 0)[args.offset:]
    config = EvalConfig(dataset="squad", model=args.model, modes=("translated",), out=args.run)
    store, locators = build_store(Path(args.run), config, task, examples, ("translated",), Progress())
    lm = load_model(args.model, "fp32", "cpu")
    layout = prompt_layout(lm.tokenizer)

    query_variants = {"query": {}, "query-last1": {"last_tokens": 1}, "query-last8": {"last_tokens": 8},
                      "query-all": {"last_tokens": 10_000}, "query-layers-all": {"from_layer": 0.0},
                      "query-layers-top": {"from_layer": 0.75}}
    radii = [int(r) for r in args.radii.split(",")]
    dilated = [("query", r) for r in radii]
    rules = (*query_variants, *(f"{base}-dilated-{r}" for base, r in dilated), "deviation", "random")
    covered = {(r, f): [] for r in rules for f in fractions}
    skipped, start = 0, time.perf_counter()
    for n, (example, locs) in enumerate(zip(examples, locators), 1):
        rows = context_rows(store, locs, example, config, None)

        q_ids = layout.question_ids(lm.tokenizer, example["question"])
        context = get_mode("translated").build(ContextRequest(store, lm, layout, rows, q_ids)).context
        p = context.prefix_tokens
        gold = answer_positions(rows, example["context"], example["answers"][0],
                                example["answer_starts"][0], lm.tokenizer, context.input_ids[p:])
        if gold is None:
            skipped += 1
            continue
        scores = {name: query_scores(lm, context, q_ids, **kw) for name, kw in query_variants.items()}
        scores |= {f"{base}-dilated-{r}": widen_to_spans(scores[base], r) for base, r in dilated}
        scores |= {"deviation": deviation_scores(lm, context), "random": random_scores(context)}
        gold = torch.tensor(gold)
        for rule in rules:
            for f in fractions:
                chosen = select_tokens(scores[rule], f)
                covered[rule, f].append(float(torch.isin(gold, chosen).float().mean()))
        print(f"\r{n}/{len(examples)} passages ({time.perf_counter() - start:.0f} s)", end="", file=sys.stderr)
    print(file=sys.stderr)

    result = {"model": args.model, "offset": args.offset, "count": args.count, "skipped": skipped,
              "coverage": {}}
    print(f"gold-answer coverage over {len(examples) - skipped} passages ({skipped} skipped):")
    print("rule            " + "".join(f"{f:>8}" for f in fractions))
    for rule in rules:
        values = [sum(covered[rule, f]) / max(1, len(covered[rule, f])) for f in fractions]
        result["coverage"][rule] = {str(f): round(v, 4) for f, v in zip(fractions, values)}
        print(f"{rule:<16}" + "".join(f"{v:8.3f}" for v in values))
    out = Path(args.out or Path(__file__).resolve().parents[1] / "runs" / "probes" / f"blend_selection-{args.model}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
