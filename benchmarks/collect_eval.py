"""Copy an eval run's records (not its store) into benchmarks/results/eval/<run name>/ and print
its line for the README table. Usage: python benchmarks/collect_eval.py RUN_DIR [RUN_DIR ...]"""

import json
import shutil
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "eval"
FILES = ("config.json", "predictions.jsonl", "metrics.json", "report.md", "retention.png", "ttft.png")


def collect(run: Path) -> str:
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
    for arg in sys.argv[1:]:
        print(collect(Path(arg)))
