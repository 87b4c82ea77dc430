"""Summarize an eval's predictions and compare them per question with other runs of the same questions.

An eval cut short counts only the questions answered in every mode. A comparison is, e.g., the
GPU's bf16 answers against the CPU's fp32 ones.

Usage: python benchmarks/gpu/summarize.py PREDICTIONS.jsonl [--reference NAME=PREDICTIONS.jsonl[.gz] ...]
                                          [--json OUT.json]
Prints per mode: questions, F1, retention against direct [95% CI], median TTFT; then, per reference
and shared mode, the paired F1 difference (this run minus the reference) [95% CI] on the questions
both answered.
"""

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from eval.jsonl import read_text  # noqa: E402
from eval.metrics import bootstrap_difference_ci, bootstrap_ratio_ci  # noqa: E402


def read(path: Path) -> dict[str, dict[str, dict]]:
    """mode -> question id -> prediction record."""
    by_mode = defaultdict(dict)
    for line in read_text(path).splitlines():  # .jsonl, or a record's .jsonl.gz
        if line.strip():
            record = json.loads(line)
            by_mode[record["mode"]][record["id"]] = record
    return by_mode


def summarize(run: dict[str, dict[str, dict]]) -> dict:
    complete = set.intersection(*(set(rows) for rows in run.values()))  # answered in every mode
    ids = sorted(complete)
    direct = [run["direct"][i]["score"] for i in ids]
    summary = {"questions": len(ids), "modes": {}}
    for mode, rows in run.items():
        scores = [rows[i]["score"] for i in ids]
        ratio, low, high = bootstrap_ratio_ci(scores, direct)
        summary["modes"][mode] = {
            "f1": round(statistics.fmean(scores), 2), "retention": round(ratio, 3),
            "retention_ci95": [round(low, 3), round(high, 3)],
            "ttft_median_ms": round(statistics.median(rows[i]["timings_ms"]["ttft"] for i in ids), 1)}
    return summary


def compare(run: dict, reference: dict) -> dict:
    complete = set.intersection(*(set(rows) for rows in run.values()))
    out = {}
    for mode in run:
        if mode not in reference:
            continue
        ids = sorted(complete & set(reference[mode]))
        diff, low, high = bootstrap_difference_ci([run[mode][i]["score"] for i in ids],
                                                  [reference[mode][i]["score"] for i in ids])
        same = sum(run[mode][i]["prediction"] == reference[mode][i]["prediction"] for i in ids)
        out[mode] = {"questions": len(ids), "f1_difference": round(diff, 2),
                     "f1_difference_ci95": [round(low, 2), round(high, 2)], "same_answer": same}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("predictions", type=Path)
    parser.add_argument("--reference", action="append", default=[], help="NAME=PREDICTIONS.jsonl")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    run = read(args.predictions)
    if "direct" not in run:
        sys.exit("summarize: the run has no direct answers to measure retention against")
    result = summarize(run)
    print(f"{result['questions']} questions answered in every mode")
    print(f"{'mode':18} {'F1':>6} {'retention [95% CI]':>24} {'TTFT median ms':>15}")
    for mode, m in result["modes"].items():
        print(f"{mode:18} {m['f1']:6.2f} {m['retention']:>8} [{m['retention_ci95'][0]}, {m['retention_ci95'][1]}]"
              f" {m['ttft_median_ms']:>15}")
    result["references"] = {}
    for item in args.reference:
        name, _, path = item.partition("=")
        result["references"][name] = {"predictions": path, "modes": compare(run, read(Path(path)))}
        print(f"\nthis run minus {name} ({path}), same questions:")
        for mode, c in result["references"][name]["modes"].items():
            print(f"{mode:18} {c['questions']:4d} questions  F1 {c['f1_difference']:+.2f} "
                  f"[{c['f1_difference_ci95'][0]:+.2f}, {c['f1_difference_ci95'][1]:+.2f}]  "
                  f"same answer {c['same_answer']}/{c['questions']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
