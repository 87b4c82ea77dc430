"""Keep a finished `cag eval` run as a record: its config.json, metrics.json and report.md copied into
records/eval/NAME/, its predictions.jsonl written there gzip-compressed (predictions.jsonl.gz, the
same bytes every time). The run's store, passages and plots stay in the run folder.

Usage: python scripts/keep_record.py RUN_FOLDER [NAME] [--force] [--records DIR]
NAME defaults to the run folder's name; an existing record is replaced (whole) only with --force.
Prints the record's folder and, per mode, its score, retention and TTFT ratio against direct.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eval.jsonl import read_text, resolve, write_gz  # noqa: E402

RECORDS = ROOT / "records" / "eval"
SUMMARY = ("config.json", "metrics.json", "report.md")  # kept as they are: small and readable
PREDICTIONS = "predictions.jsonl"


def keep(run: Path, name: str, records: Path = RECORDS, force: bool = False) -> Path:
    """Copy `run`'s summary and compressed predictions into `records`/`name`; return that folder."""
    if not name or name.startswith(".") or Path(name).name != name:
        raise SystemExit(f"{name!r} is not a record name: give a plain folder name, e.g. squad-200-{run.name}")
    missing = [n for n in SUMMARY if not (run / n).is_file()]
    if not resolve(run / PREDICTIONS).is_file():
        missing.append(PREDICTIONS)
    if missing:  # before anything is written: a wrong path must not leave an empty record
        raise SystemExit(f"{run} is not a finished eval run: it lacks {', '.join(missing)}")
    target = records / name
    if target.exists() and not force:
        raise SystemExit(f"{target} exists: give --force to replace it, or another NAME")
    staged = records / f".{name}.partial"  # the record appears whole or not at all
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    for n in SUMMARY:
        shutil.copyfile(run / n, staged / n)
    write_gz(staged / f"{PREDICTIONS}.gz", read_text(run / PREDICTIONS))
    if target.exists():
        shutil.rmtree(target)
    staged.rename(target)
    return target


def summary_line(record: Path) -> str:
    """One table row: the record's name, model, examples and each mode's score (retention [95% CI],
    TTFT ratio against direct)."""
    metrics = json.loads((record / "metrics.json").read_text())
    score = "f1" if metrics["task"] != "multiple_choice" else "accuracy"
    direct = metrics["modes"]["direct"]
    cells = []
    for mode, m in metrics["modes"].items():
        ratio = direct["ttft_median_ms"] / m["ttft_median_ms"] if m["ttft_median_ms"] else float("nan")
        ci = m["retention_ci95"]
        cells.append(f"{mode} {m[score]} ({m['retention']} [{ci[0]}, {ci[1]}], TTFT x{ratio:.1f})")
    return f"| {record.name} | {metrics['model']} | {metrics['examples']} | " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, metavar="RUN_FOLDER", help="a finished `cag eval --out` folder")
    parser.add_argument("name", nargs="?", help="the record's folder name (default: the run folder's name)")
    parser.add_argument("--force", action="store_true", help="replace an existing record of that name")
    parser.add_argument("--records", type=Path, default=RECORDS, help="where records go (default: records/eval/)")
    args = parser.parse_args(argv)
    record = keep(args.run, args.name or args.run.resolve().name, args.records, args.force)
    print(record)
    print(summary_line(record))


if __name__ == "__main__":
    main()
