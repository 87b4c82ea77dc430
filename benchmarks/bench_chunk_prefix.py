"""How should a chunk be prefilled for later reuse? Measured on SQuAD v1.1 dev, one run:

- direct: the generator reads prefix + context + question (the reference);
- native, after prefix: the chunk prefilled after the same prefix that precedes it at answer time
  (what `cag ingest` does);
- native, alone: the chunk prefilled from position 0 with no prefix, re-positioned after it;
- native, split in two: the context cut in two halves at a sentence boundary, each prefilled on its
  own after the prefix, assembled (the cost of missing attention between chunks).

F1 / EM (official SQuAD normalization) and the share of answers identical to direct.
Writes runs/benchmarks/chunk_prefix.json (or --out; `--out records/chunk_prefix.json` replaces the
record). Usage:
    python benchmarks/bench_chunk_prefix.py [--dataset PATH] [--limit 30] [--model qwen2.5-coder-0.5b]
"""

import argparse
import json
import random
import time
from pathlib import Path

from cag.kv.assemble import assemble
from cag.kv.chunk_cache import prefill_chunk
from cag.kv.generate import greedy_generate
from cag.models import load_model
from cag.prompt import prompt_layout
from eval.metrics import squad_scores

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT.parent / "shared" / "data" / "squad_v1.1" / "dev.jsonl"
MODES = ("direct", "native_after_prefix", "native_alone", "native_split_in_two")


def distinct_context_sample(path: Path, limit: int, seed: int) -> list:
    by_context = {}
    for line in path.open(encoding="utf-8"):
        row = json.loads(line)
        by_context.setdefault(row["context"], []).append(row)
    rng = random.Random(seed)
    contexts = sorted(by_context)
    rng.shuffle(contexts)
    return [rng.choice(by_context[c]) for c in contexts[:limit]]


def split_in_two(text: str) -> tuple[str, str]:
    middle = len(text) // 2
    cut = text.find(". ", middle)
    cut = middle if cut < 0 else cut + 2
    return text[:cut], text[cut:]


def answers(lm, layout, row, max_new: int) -> dict:
    prefix = list(layout.prefix_ids)
    q = layout.question_ids(lm.tokenizer, row["question"])
    after = prefill_chunk(lm, row["context"], prefix_ids=prefix)
    alone = prefill_chunk(lm, row["context"])
    halves = [prefill_chunk(lm, part, prefix_ids=prefix) for part in split_in_two(row["context"])]
    return {
        "direct": greedy_generate(lm, prefix + after.token_ids.tolist() + q, None, max_new).text,
        "native_after_prefix": greedy_generate(lm, q, assemble(lm, [after], prefix), max_new).text,
        "native_alone": greedy_generate(lm, q, assemble(lm, [alone], prefix), max_new).text,
        "native_split_in_two": greedy_generate(lm, q, assemble(lm, halves, prefix), max_new).text,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "benchmarks" / "chunk_prefix.json",
                        help="result file")
    args = parser.parse_args()
    start = time.perf_counter()
    lm = load_model(args.model)
    layout = prompt_layout(lm.tokenizer)
    rows = distinct_context_sample(args.dataset, args.limit, args.seed)
    per_mode = {m: {"f1": 0.0, "em": 0.0, "same_as_direct": 0} for m in MODES}
    records = []
    for i, row in enumerate(rows, 1):
        got = answers(lm, layout, row, args.max_new_tokens)
        for mode, text in got.items():
            scores = squad_scores(text, row["answers"])
            per_mode[mode]["f1"] += scores["f1"] / len(rows)
            per_mode[mode]["em"] += scores["em"] / len(rows)
            per_mode[mode]["same_as_direct"] += int(text == got["direct"])
        records.append({"id": row["id"], "gold": row["answers"], **got})
        print(f"[{i}/{len(rows)}] {row['question']} | " + " | ".join(f"{m}: {t!r}" for m, t in got.items()), flush=True)
    direct_f1 = per_mode["direct"]["f1"] or 1.0
    summary = {m: {"f1": round(v["f1"], 1), "em": round(v["em"], 1),
                   "retention_f1": round(v["f1"] / direct_f1, 3),
                   "same_as_direct": f"{v['same_as_direct']}/{len(rows)}"} for m, v in per_mode.items()}
    result = {"date": time.strftime("%Y-%m-%d"), "model": args.model, "examples": len(rows),
              "seed": args.seed, "dataset": args.dataset.name, "seconds": round(time.perf_counter() - start),
              "summary": summary, "records": records}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(json.dumps(summary, indent=2))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
