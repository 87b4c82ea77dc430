"""Write data/hotpotqa_distractor/dev_20passages.jsonl: HotpotQA distractor dev questions with 20
paragraphs each (their own 10 plus 10 of other questions, seeded order; eval/widen.py). With
`--split train`, train_20passages.jsonl from the 100 training questions (for tuning, never evaluation).

Usage: python scripts/build_hotpotqa_wide.py [--split dev|train] [--passages 20] [--seed 0]
Prints the file's sha256 (recorded in data/hotpotqa_distractor/SOURCE.md).
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval.datasets import load_examples  # noqa: E402
from eval.widen import widen  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=("dev", "train"), default="dev")
    args = parser.parse_args()
    folder = ROOT / "data" / "hotpotqa_distractor"
    source = {"dev": "dev_sample.jsonl", "train": "train_sample100.jsonl"}[args.split]
    examples = load_examples(folder / source, "multi_doc")
    body = "".join(json.dumps(ex, ensure_ascii=False) + "\n" for ex in widen(examples, args.passages, args.seed))
    out = folder / f"{args.split}_{args.passages}passages.jsonl"
    out.write_text(body, encoding="utf-8")
    print(out, len(examples), "examples, sha256", hashlib.sha256(body.encode()).hexdigest())


if __name__ == "__main__":
    main()
