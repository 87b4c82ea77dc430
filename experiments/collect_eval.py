"""Copy an eval run's records (not its store) into records/eval/<run name>/ and print
its line for the README table. Usage: python experiments/collect_eval.py RUN_DIR [RUN_DIR ...]"""

import argparse
import json
import shutil
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "records" / "eval"
FILES = ("config.json", "predictions.jsonl", "metrics.json", "report.md", "retention.png", "ttft.png")


def collect(run: Path) -> str:
    missing = [name for name in FILES if not (run / name).is_file()]
    if missing:  # before anything is written: a wrong path must not leave an empty record
        raise SystemExit(f"{run} is not a finished eval run: it lacks {', '.join(missing)}")
    target = RESULTS / run.name
    target.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copy2(run / name, target / name)
    metrics = json.loads((run / "metrics.json").read_text())
    score = "f1" if metrics["task"] != "multiple_choice" else "accuracy"
    direct = metrics["modes"]["direct"]
    cells = []
    for mode, m in metrics["modes"].items():
        ratio = direct["ttft_median_ms"] / m["ttft_median_ms"] if m["ttft_median_ms"] else float("nan")
        ci = m["retention_ci95"]
        cells.append(f"{mode} {m[score]} ({m['retention']} [{ci[0]}, {ci[1]}], TTFT x{ratio:.1f})")
    return f"| {run.name} | {metrics['model']} | {metrics['examples']} | " + " | ".join(cells) + " |"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("Usage:")[0].strip())
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="A `cag eval --out` folder.")
    for run in parser.parse_args().runs:
        print(collect(run))
