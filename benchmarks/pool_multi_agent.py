"""Pool the multi-agent case study's records over several question samples: one summary (F1 with
bootstrap 95% intervals, retention against reading the history as text, paired differences) over
every question the records answered, in the modes all of them asked.

Each record names its predictions file (beside it, in records/, gzip-compressed there) and how many
questions it covers (`n`, the first ones of its seed's order, the first `n` lines of its predictions).
The samples must not share a question. TTFT ratios are pooled too, but each run's own ratios (in
each record's `runs`) are the fair speed figures: runs under other loads mix here.

Usage: python benchmarks/pool_multi_agent.py records/A.json records/B.json --record records/POOLED.json
"""

import argparse
import json
from pathlib import Path

from bench_multi_agent import summarize  # benchmarks/ is the script's folder
from eval.jsonl import read_text


def answered_rows(record_path: Path, record: dict) -> list[dict]:
    """The record's questions, in its order: the first `n` lines of its predictions file."""
    lines = read_text(record_path.parent / record["predictions"]).splitlines()  # .jsonl or .jsonl.gz
    if len(lines) < record["n"]:
        raise SystemExit(f"{record_path}: {record['n']} questions, but its predictions hold {len(lines)}")
    return [json.loads(line) for line in lines[:record["n"]]]


def common_keys(samples: list[list[dict]]) -> tuple:
    """The history modes every sample asked, in the first sample's order (paragraphs is summarize's)."""
    asked = [list(rows[0]["modes"]) for rows in samples]
    return tuple(m for m in asked[0] if m != "paragraphs" and all(m in other for other in asked[1:]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+", help="records of bench_multi_agent.py")
    parser.add_argument("--record", type=Path, required=True, help="where the pooled summary goes")
    args = parser.parse_args(argv)
    if len(args.records) < 2:
        raise SystemExit("give at least two records to pool")
    records = [json.loads(path.read_text()) for path in args.records]
    samples = [answered_rows(path, record) for path, record in zip(args.records, records)]
    ids = [row["id"] for rows in samples for row in rows]
    if len(ids) != len(set(ids)):
        raise SystemExit("the records share questions: pooling would count them twice")
    keys = common_keys(samples)
    sources = [{"record": path.name, "dataset": record["dataset"], "n": record["n"], "runs": record["runs"]}
               for path, record in zip(args.records, records)]
    rows = [row for rows in samples for row in rows]
    pooled = {"pooled_from": sources, **summarize(rows, keys)}
    args.record.write_text(json.dumps(pooled, indent=2))
    print(json.dumps(pooled["modes"], indent=1), json.dumps(pooled["f1_differences_ci95"]),
          json.dumps(pooled["f1_retention_ci95"]), sep="\n")


if __name__ == "__main__":
    main()
