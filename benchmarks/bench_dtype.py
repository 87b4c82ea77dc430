"""A generator's prefill speed in fp32 against bf16, side by side in one process (alternating
repeats, so the machine's load hits both), and whether their greedy answers agree.

Usage: python benchmarks/bench_dtype.py [--model qwen2.5-coder-1.5b] [--repeats 3]
Writes runs/benchmarks/dtype_speed-MODEL.json (or --out).
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from cag.demo import demo_data
from cag.kv.generate import greedy_generate
from cag.models import load_model
from cag.prompt import prompt_layout

ROOT = Path(__file__).resolve().parents[1]
DTYPES = ("fp32", "bf16")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="result file (default runs/benchmarks/dtype_speed-MODEL.json)")
    args = parser.parse_args()
    models = {d: load_model(args.model, d) for d in DTYPES}
    data = demo_data()
    layout = prompt_layout(models["fp32"].tokenizer)
    tokenizer = models["fp32"].tokenizer
    prompts = [list(layout.prefix_ids) + tokenizer(data["passage"], add_special_tokens=False)["input_ids"]
               + layout.question_ids(tokenizer, q["question"]) for q in data["questions"]]
    speed = {d: [] for d in DTYPES}
    for _ in range(args.repeats):
        for d, lm in models.items():
            t0 = time.perf_counter()
            with torch.no_grad():
                lm.model(torch.tensor([prompts[0]]), logits_to_keep=1)
            speed[d].append(len(prompts[0]) / (time.perf_counter() - t0))
    answers = {d: [greedy_generate(lm, p, None, 16).text for p in prompts] for d, lm in models.items()}
    result = {"date": time.strftime("%Y-%m-%d"), "threads": torch.get_num_threads(), "model": args.model,
              "prompt_tokens": len(prompts[0]), "repeats": args.repeats,
              "prefill_tok_s_median": {d: round(statistics.median(v), 1) for d, v in speed.items()},
              "bf16_over_fp32": round(statistics.median(speed["bf16"]) / statistics.median(speed["fp32"]), 2),
              "answers": answers,
              "answers_same": sum(a == b for a, b in zip(answers["fp32"], answers["bf16"])),
              "questions": len(prompts)}
    out = args.out or ROOT / "runs" / "benchmarks" / f"dtype_speed-{args.model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
