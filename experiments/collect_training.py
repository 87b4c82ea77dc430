"""Copy training runs' records (config, metrics over time, translator JSON) into
records/training/<run>/, ship their translators into translators/, and print the
README table rows. Usage: python experiments/collect_training.py RUN_DIR [RUN_DIR ...] [--ship]"""

import argparse
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "records" / "training"
SHIPPED = ROOT / "translators"
RECORDS = ("config.json", "metrics.jsonl", "translator.json")  # copied; the weights only with --ship


def collect(run: Path, ship: bool) -> str:
    missing = [name for name in (*RECORDS, "translator.safetensors") if not (run / name).is_file()]
    if missing:  # before anything is written: a wrong path must not leave an empty record
        raise SystemExit(f"{run} is not a finished training run: it lacks {', '.join(missing)}")
    target = RESULTS / run.name
    target.mkdir(parents=True, exist_ok=True)
    for name in RECORDS:
        shutil.copy2(run / name, target / name)
    record = json.loads((run / "translator.json").read_text())
    spec = record["spec"]
    if ship:
        stem = f"{spec['source']['name']}__{spec['target']['name']}__{spec['kind']}"
        shutil.copy2(run / "translator.safetensors", SHIPPED / f"{stem}.safetensors")
        shutil.copy2(run / "translator.json", SHIPPED / f"{stem}.json")
    held = spec["metrics"]["heldout"]
    training = spec["training"]
    size = (run / "translator.safetensors").stat().st_size / 2 ** 20
    share = record["parameters"] / training["target_parameters"]
    return (f"| {spec['source']['name']} -> {spec['target']['name']} | {spec['kind']} | "
            f"{record['parameters']:,} ({share:.1%}) | {size:.1f} MB | {training['steps'] if spec['kind'] != 'ridge' else 0} | "
            f"{training['train_seconds']:.0f} s | {held['full']['kl']} / {held['full']['top1']} | "
            f"{held['window']['kl']} / {held['window']['top1']} | {held['none']['kl']} / {held['none']['top1']} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("Usage:")[0].strip())
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="A `cag train --out` folder.")
    parser.add_argument("--ship", action="store_true", help="Also install the translators into translators/.")
    args = parser.parse_args()
    for run in args.runs:
        print(collect(run, args.ship))
