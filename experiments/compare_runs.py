"""Paired score difference between modes of two eval runs over the same examples (e.g. a translator
trained another way, evaluated in a forked run), with the bootstrap 95% interval `cag eval` uses
within a run. Scores are F1 (extractive, multi-doc) or accuracy (multiple choice), per example.

Usage: python experiments/compare_runs.py RUN_A:MODE RUN_B:MODE [RUN_C:MODE ...]
Prints A - B, A - C, ... (RUN is a run folder or a recorded one under records/eval/, whose
predictions are gzip-compressed).
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eval.jsonl import read_records, resolve  # noqa: E402
from eval.metrics import bootstrap_difference_ci  # noqa: E402


def scores(spec: str) -> tuple[str, dict]:
    """"RUN:MODE" -> (label, {example id: score})."""
    run, _, mode = spec.rpartition(":")
    if not run or not mode:
        raise SystemExit(f"{spec!r}: expected RUN:MODE")
    path = resolve(Path(run) / "predictions.jsonl")  # a run folder's, or a record's .jsonl.gz
    if not path.is_file():
        raise SystemExit(f"{path}: no such predictions file")
    found = {r["id"]: r["score"] for r in read_records(path) if r["mode"] == mode}
    if not found:
        raise SystemExit(f"{path} holds no {mode!r} predictions")
    return f"{Path(run).name}:{mode}", found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="+", metavar="RUN:MODE")
    args = parser.parse_args()
    if len(args.specs) < 2:
        parser.error("give at least two RUN:MODE")
    first_label, first = scores(args.specs[0])
    for spec in args.specs[1:]:
        label, other = scores(spec)
        ids = sorted(set(first) & set(other))
        mean, low, high = bootstrap_difference_ci([first[i] for i in ids], [other[i] for i in ids])
        print(f"{first_label} - {label}: {mean:+.2f} [{low:+.2f}, {high:+.2f}] over {len(ids)} examples "
              f"(means {sum(first[i] for i in ids) / len(ids):.2f} vs {sum(other[i] for i in ids) / len(ids):.2f})")


if __name__ == "__main__":
    main()
