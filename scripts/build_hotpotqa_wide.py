"""Write data/hotpotqa_distractor/dev_20passages.jsonl: HotpotQA distractor dev questions with 20
paragraphs each (their own 10 plus 10 of other questions, seeded order). With `--split train`,
train_20passages.jsonl from the 100 training questions (for tuning, never evaluation).

Each question keeps its own paragraphs and gets distractor paragraphs of *other* questions, up to
`--passages` in all (never a paragraph whose title the question already holds), everything shuffled
with `random.Random(f"{seed}|{id}")`. Deterministic: the same input, `--passages` and `--seed` give
the same file, byte for byte (its SOURCE.md gives the sha256).

Usage: python scripts/build_hotpotqa_wide.py [--split dev|train] [--passages 20] [--seed 0]
Prints the file's sha256 (recorded in data/hotpotqa_distractor/SOURCE.md).
"""

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cag.errors import CagError  # noqa: E402
from eval.datasets import load_examples  # noqa: E402


def widen(examples: list[dict], passages: int = 20, seed: int = 0) -> list[dict]:
    """Each example with `passages` documents: its own plus others' paragraphs, shuffled."""
    if passages < 1:
        raise CagError(f"passages must be at least 1, not {passages}.")
    pool = [(ex["id"], doc) for ex in examples for doc in ex["documents"]]
    widened = []
    for ex in examples:
        rng = random.Random(f"{seed}|{ex['id']}")
        own = {doc.get("title", "") for doc in ex["documents"]}
        candidates = [doc for owner, doc in pool if owner != ex["id"] and doc.get("title", "") not in own]
        needed = max(0, passages - len(ex["documents"]))
        if needed > len(candidates):
            raise CagError(f"Only {len(candidates)} other paragraphs to add to {ex['id']}; "
                           f"cannot reach {passages} passages.")
        added, seen = [], set(own)
        for doc in rng.sample(candidates, len(candidates)):  # a seeded order over all candidates
            if len(added) == needed:
                break
            if doc.get("title", "") not in seen:  # one paragraph per title
                seen.add(doc.get("title", ""))
                added.append(doc)
        documents = list(ex["documents"]) + added
        rng.shuffle(documents)
        widened.append({**ex, "documents": documents, "added_from_other_questions": len(added)})
    return widened


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
